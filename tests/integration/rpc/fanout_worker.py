"""A second asyncsched RPC server in its own process, for the fanout and competing-consumer tests.

``python -m tests.integration.rpc.fanout_worker <transport_url> <host>`` prints ``READY`` once
consuming, then one JSON line per host-state event and per select_destinations it served.
It stops when its stdin closes (the test ends it that way, or with SIGTERM).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from asyncsched.objects.models import Aggregate
from asyncsched.rpc.server import RPCServer
from tests.support.broker import make_config
from tests.support.decisions import RecordingScheduler, SchedulerCall


def emit(kind: str, value: Any) -> None:
    sys.stdout.write(json.dumps({"event": kind, "value": value}) + "\n")
    sys.stdout.flush()


class PrintingEvents:
    async def update_aggregates(self, aggregates: Sequence[Aggregate]) -> None:
        emit("update_aggregates", [[a.id, a.name, list(a.hosts)] for a in aggregates])

    async def delete_aggregate(self, aggregate: Aggregate) -> None:
        emit("delete_aggregate", aggregate.id)

    async def update_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        emit("update_instance_info", [host_name, list(instance_uuids)])

    async def delete_instance_info(self, host_name: str, instance_uuid: str) -> None:
        emit("delete_instance_info", [host_name, instance_uuid])

    async def sync_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        emit("sync_instance_info", [host_name, list(instance_uuids)])


class PrintingScheduler(RecordingScheduler):
    def note(self, call: SchedulerCall) -> None:
        emit("select_destinations", list(call.instance_uuids or ()))


async def main(url: str, host: str) -> None:
    server = RPCServer(
        make_config(url, host=host), PrintingScheduler(delay=0.01, name=host), PrintingEvents()
    )
    await server.start(timeout=30)
    print("READY", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the test closes our stdin
    await server.drain(5)
    await server.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
