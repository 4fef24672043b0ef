"""Operators see inside: the admin HTTP endpoint, readiness, Prometheus metrics."""
