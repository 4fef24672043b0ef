"""Helpers the tests, the demo and the benchmarks share (real peers, builders)."""
