"""The one wall clock: timezone-aware UTC, injectable where a test needs another time."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """Now as an aware UTC datetime (the default ``clock`` of every component)."""
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """``value`` as aware UTC; a naive value is taken as UTC (nova's DB stores naive UTC)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
