"""Fixtures the Placement client tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest


@pytest.fixture
async def stack() -> AsyncIterator[list[Any]]:
    """Servers and clients to close at the end of a test."""
    items: list[Any] = []
    yield items
    for item in reversed(items):
        await item.close()
