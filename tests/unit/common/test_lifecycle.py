"""StartClose: ``async with`` starts the component and always closes it."""

from __future__ import annotations

import pytest

from asyncsched.common.lifecycle import StartClose


class Part(StartClose):
    def __init__(self) -> None:
        self.events: list[str] = []

    async def start(self) -> None:
        self.events.append("start")

    async def close(self) -> None:
        self.events.append("close")


async def test_the_body_runs_between_start_and_close_and_gets_the_component() -> None:
    part = Part()
    async with part as entered:
        assert entered is part
        part.events.append("body")
    assert part.events == ["start", "body", "close"]


async def test_close_runs_when_the_body_raises_and_the_error_goes_on() -> None:
    part = Part()
    with pytest.raises(RuntimeError, match="boom"):
        async with part:
            raise RuntimeError("boom")
    assert part.events == ["start", "close"]
