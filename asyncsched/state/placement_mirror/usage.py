"""Providers' capacity and usage, read fresh from Placement's database.

The overcommit guard asks this right after each claim. Through Placement's API that is one
or two more HTTP calls per claim, each a full WSGI request on Placement's own workers, which
halves the claim rate Placement can give; here it is one indexed query on a small pool of its
own (so it never waits behind a mirror refresh). Placement commits a claim before it answers
204, so a read that starts after the answer sees it. Claims that shared one POST are answered
together, so their reads are asked in the same loop turn: those share one query. The pool,
its bounded queries and its one failure type are ``state.db.NovaDatabase``'s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from asyncsched.common.capacity import capacity as placement_capacity
from asyncsched.state.db import NovaDatabase
from asyncsched.state.placement_mirror.statements import BY_DIALECT

Capacity = dict[str, int]
Used = dict[str, int]
Usage = tuple[Capacity, Used]


class ProviderUsageReader:
    """``(capacity, used)`` by class name for one provider; DatabaseUnavailable otherwise.

    Reads asked in one loop turn go out as one query (``queries`` counts them)."""

    def __init__(self, url: str, *, timeout: float, pool_size: int = 4) -> None:
        self._db = NovaDatabase(
            "placement database (overcommit guard)",
            url,
            pool_size=pool_size,
            query_timeout=timeout,
            reconnect_max=timeout,
            clock=time.monotonic,
        )
        self._sql = BY_DIALECT[self._db.parsed.dialect].provider_usage
        self._asked: dict[str, list[asyncio.Future[Usage]]] = {}
        self._queries: set[asyncio.Task[None]] = set()
        self.queries = 0

    async def read(self, provider_uuid: str) -> Usage:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Usage] = loop.create_future()
        if not self._asked:
            loop.call_soon(self._send)  # after the reads asked in this turn
        self._asked.setdefault(provider_uuid, []).append(answer)
        return await answer

    def _send(self) -> None:
        asked, self._asked = self._asked, {}
        task = asyncio.ensure_future(self._query(asked))
        self._queries.add(task)
        task.add_done_callback(self._queries.discard)

    async def _query(self, asked: dict[str, list[asyncio.Future[Usage]]]) -> None:
        self.queries += 1
        waiting = [a for answers in asked.values() for a in answers]
        try:
            rows = await self._db.fetch(self._sql, list(asked))
        except asyncio.CancelledError:  # closed
            for a in waiting:
                a.cancel()
            raise
        except Exception as exc:  # DatabaseUnavailable: each reader gets it
            for a in waiting:
                if not a.done():
                    a.set_exception(exc)
            return
        by_provider: dict[str, list[Any]] = {}
        for row in rows:
            by_provider.setdefault(row[0], []).append(row)
        for uuid, answers in asked.items():
            usage = _usage(by_provider.get(uuid, ()))
            for a in answers:
                if not a.done():  # (its reader may have given up)
                    a.set_result(usage)

    async def close(self) -> None:
        for task in list(self._queries):
            task.cancel()
        await asyncio.gather(*self._queries, return_exceptions=True)
        await self._db.close()


def _usage(rows: Sequence[Any]) -> Usage:
    capacity = {
        name: placement_capacity(total, reserved, float(ratio))
        for _, name, total, reserved, ratio, _ in rows
    }
    used = {row[1]: int(row[5]) for row in rows if row[5]}
    return capacity, used
