"""compute_status_filter: never offer computes of disabled services."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement.prefilters.base import add_root_forbidden
from asyncsched.placement.traits import COMPUTE_STATUS_DISABLED


def compute_status_filter(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    return add_root_forbidden(spec, COMPUTE_STATUS_DISABLED)
