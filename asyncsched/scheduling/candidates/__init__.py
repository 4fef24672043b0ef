"""Allocation candidates for a request: from the Placement mirror when the request's shape
allows an exact local answer (``local``), else one shared ``GET /allocation_candidates``
(``single_flight``); ``source.CandidateSource`` chooses and counts the path."""

from asyncsched.scheduling.candidates.local import Fallback, LocalCandidates, shape
from asyncsched.scheduling.candidates.single_flight import SingleFlight
from asyncsched.scheduling.candidates.source import CandidateSource

__all__ = ["CandidateSource", "Fallback", "LocalCandidates", "SingleFlight", "shape"]
