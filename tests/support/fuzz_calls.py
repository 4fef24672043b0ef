"""What the fuzz and hostile-corpus tests both send and read: an ordinary call for the seeded
cloud, and the scheduler queue's counts."""

from __future__ import annotations

import uuid

from tests.support import broker
from tests.support.chaos import boot_spec
from tests.support.oslo_caller import nova_context


def scheduler_queue(vhost: str) -> dict[str, int]:
    rows = broker.list_json("list_queues", vhost, "name", "messages", "messages_unacknowledged")
    return {q["name"]: q for q in rows}["scheduler"]


def own_call() -> dict[str, object]:
    """A select_destinations for the seeded cloud's AZ, as a decoded oslo message."""
    ctx = {f"_context_{k}": v for k, v in nova_context().items()}
    return {
        **ctx,
        "method": "select_destinations",
        "version": "4.5",
        "_timeout": 60,
        "args": {
            "spec_obj": boot_spec(2),
            "instance_uuids": [str(uuid.uuid4()), str(uuid.uuid4())],
            "return_objects": True,
            "return_alternates": True,
        },
    }
