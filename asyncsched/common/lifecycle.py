"""``async with`` for a component with ``start`` and ``close`` (aiohttp's ClientSession shape)."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class StartClose:
    """``async with x:`` starts ``x`` and closes it on the way out, whatever happened inside."""

    async def start(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
