"""Small builders shared by the scheduling unit tests."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, Flavor, RequestContext, RequestSpec
from asyncsched.state.host_state import HostState, ServiceInfo

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def host(name: str = "h1", **kw: Any) -> HostState:
    """An up, enabled host with roomy defaults; keyword args override HostState fields."""
    svc = kw.pop("service", None)
    if svc is None:
        svc = ServiceInfo(id=1, host=name, last_seen_up=NOW - timedelta(seconds=10))
    defaults: dict[str, Any] = dict(
        uuid=str(uuid.uuid4()),
        host=name,
        nodename=kw.pop("nodename", name),
        cell_uuid=kw.pop("cell_uuid", "cell1"),
        total_usable_ram_mb=8192,
        free_ram_mb=8192,
        free_disk_mb=100 * 1024,
        total_usable_disk_gb=100,
        vcpus_total=8,
        vcpus_used=0,
        service=svc,
    )
    defaults.update(kw)
    return HostState(**defaults)


def spec(**kw: Any) -> RequestSpec:
    flavor = kw.pop("flavor", None) or Flavor(
        memory_mb=kw.pop("memory_mb", 512),
        vcpus=kw.pop("vcpus", 1),
        root_gb=kw.pop("root_gb", 1),
        name=kw.pop("flavor_name", "m1.tiny"),
        extra_specs=kw.pop("extra_specs", {}),
    )
    return RequestSpec(flavor=flavor, **kw)


def agg(hosts: tuple[str, ...], **metadata: str) -> Aggregate:
    return Aggregate(
        id=abs(hash(hosts)) % 10000,
        uuid=str(uuid.uuid4()),
        name="a",
        hosts=hosts,
        metadata=metadata,
    )


def config(**sections: dict[str, Any]) -> Config:
    """``config(filter_scheduler={"host_subset_size": 2})``."""
    base = Config()
    for name, values in sections.items():
        base = dataclasses.replace(
            base, **{name: dataclasses.replace(getattr(base, name), **values)}
        )
    return base


CTX = RequestContext(request_id="req-1", user_id="u", project_id="p")


def cloud(n: int = 6, cells: int = 1, **kw: Any) -> list[HostState]:
    return [
        host(
            f"cmp{i}",
            cell_uuid=f"cell{i % cells}",
            free_ram_mb=8192 - i * 512,  # cmp0 has most free RAM: the RAMWeigher picks it first
            total_usable_ram_mb=8192,
            **kw,
        )
        for i in range(n)
    ]


def boot(num: int = 1, **kw: Any) -> tuple[RequestSpec, list[str]]:
    flavor = kw.pop("flavor", Flavor(memory_mb=1024, vcpus=1, root_gb=10, name="m1.small"))
    s = RequestSpec(flavor=flavor, num_instances=num, project_id="p", user_id="u", **kw)
    return s, [str(uuid.uuid4()) for _ in range(num)]
