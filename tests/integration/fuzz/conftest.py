"""The fuzz and hostile-corpus tests' stack: a seeded cloud and an ``asyncsched serve`` of it.

Each module says how many roomy hosts it seeds (``HOSTS``) and the daemon's health-file
interval (``BEAT``, seconds: its loop's heartbeat as the tests read it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from tests.support.chaos import ChaosStack, roomy_hosts
from tests.support.serve_process import ServeProcess


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(request: pytest.FixtureRequest) -> AsyncIterator[ChaosStack]:
    async with ChaosStack(roomy_hosts(request.module.HOSTS)) as s:
        yield s


@pytest.fixture(scope="module")
def daemon(
    request: pytest.FixtureRequest, stack: ChaosStack, module_amqp_url: str
) -> Iterator[ServeProcess]:
    d = stack.daemon(module_amqp_url, refresh_interval=request.module.BEAT)
    yield d
    d.stop()
