"""The operator's nova.conf as nova-scheduler ran it: ``[placement] auth_type = admin_token``
with ``endpoint`` and ``token``, and notifications on. ``asyncsched serve`` loads it unchanged,
nova-conductor's real oslo.messaging client calls it, claims land in the real Placement (noauth2:
only the token ``admin`` may read candidates and claim), and the real oslo.messaging notification
listener receives scheduler.select_destinations.start/.end in both formats.

Once with nova's and Placement's databases on PostgreSQL, once on MariaDB (issue #25: the
``[api_database]``/cell URLs are ``mysql+pymysql://...?charset=utf8`` as deployment tools write
them, the schema nova-manage's); the same requests get the same hosts on both."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from asyncsched.conf import load_string
from asyncsched.conf.options import PlacementOptions
from asyncsched.exceptions import PlacementError
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.query import ResourceRequest
from tests.integration.e2e.checks import check_allocations, check_selections
from tests.integration.e2e.conftest import SeededStack
from tests.support.cloud import AZ1, SMALL, config_file_text, daemon_config, decode_reply
from tests.support.notification_listener import NotificationListener
from tests.support.nova_db import BACKENDS, Backend
from tests.support.oslo_caller import OsloSchedulerClient, request_spec_primitive
from tests.support.serve_process import ServeProcess

pytestmark = [
    pytest.mark.integration,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.parametrize("db_backend", BACKENDS, scope="module"),
]
#: backend -> the hosts chosen by test_same_decisions_on_both_databases, to compare
DECISIONS: dict[str, list[list[str]]] = {}


def nova_conf(stack: SeededStack, module_amqp_url: str, host: str) -> str:
    """What nova-scheduler was given: keystoneauth's admin_token plugin, notifications on."""
    base = config_file_text(
        daemon_config(
            transport_url=module_amqp_url,
            api_url=stack.db.api_url,
            placement=PlacementOptions(auth_type="none", endpoint_override="http://unused"),
            scheduler_host=host,
            refresh_interval=3600.0,
            full_resync_interval=3600.0,
        )
    )
    base = base.replace(
        "auth_type = none\nendpoint_override = http://unused\n",
        f"auth_type = admin_token\nendpoint = {stack.placement.url}\ntoken = admin\n"
        "region_name = RegionOne\nvalid_interfaces = internal\n",
    )
    return base + (
        "[oslo_messaging_notifications]\ndriver = messagingv2\n"
        "[notifications]\nnotification_format = both\n"
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def listener(
    module_amqp_url: str, db_backend: Backend
) -> AsyncIterator[NotificationListener]:
    """One per database backend: the other run's notifications are not this one's."""
    lst = await asyncio.to_thread(
        NotificationListener, module_amqp_url, ["notifications", "versioned_notifications"]
    )
    try:
        yield lst
    finally:
        await asyncio.to_thread(lst.close)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def serve(
    seeded: SeededStack,
    module_amqp_url: str,
    listener: NotificationListener,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[ServeProcess, str]]:
    tmp = tmp_path_factory.mktemp("dropin")
    host = f"e2e-dropin-{uuid.uuid4().hex[:8]}"
    conf = tmp / "nova.conf"
    conf.write_text(nova_conf(seeded, module_amqp_url, host))
    daemon = ServeProcess(conf, tmp / "stderr.log")
    daemon.start()
    try:
        await asyncio.to_thread(daemon.listener.wait_for, "READY", "1", 60.0)
        yield daemon, host
    except BaseException:
        print(daemon.stderr())
        raise
    finally:
        daemon.stop()


async def test_admin_token_nova_conf_serves_novas_client_and_notifies(
    serve: tuple[ServeProcess, str],
    seeded: SeededStack,
    module_amqp_url: str,
    listener: NotificationListener,
) -> None:
    daemon, host = serve
    client = OsloSchedulerClient(module_amqp_url, timeout=120.0, call_monitor_timeout=30.0)
    try:
        spec = request_spec_primitive(
            num_instances=3,
            memory_mb=2048,
            vcpus=1,
            root_gb=20,
            group_policy=None,
            availability_zone="az1",
        )
        uuids = [str(uuid.uuid4()) for _ in range(3)]
        sels = decode_reply(await asyncio.to_thread(client.select_destinations, spec, uuids))
    finally:
        client.close()
    check_selections(seeded.cloud, sels, uuids, AZ1, az="az1")
    await check_allocations(seeded.placement, sels, uuids, SMALL)
    got = await asyncio.to_thread(listener.wait_for, 4)
    events = sorted((publisher, event) for _, publisher, event, _, _ in got)
    assert events == [
        (f"nova-scheduler:{host}", "scheduler.select_destinations.end"),
        (f"nova-scheduler:{host}", "scheduler.select_destinations.start"),
        (f"scheduler.{host}", "scheduler.select_destinations.end"),
        (f"scheduler.{host}", "scheduler.select_destinations.start"),
    ]
    spec_uuid = spec["nova_object.data"]["instance_uuid"]
    for _, publisher, _, payload, _ in got:
        if publisher.startswith("nova-scheduler:"):
            data = payload["nova_object.data"]
            assert data["instance_uuid"] == spec_uuid and data["num_instances"] == 3
        else:
            props = payload["request_spec"]["instance_properties"]
            assert props["uuid"] == spec_uuid
    assert "Traceback" not in daemon.stderr()


async def test_the_token_is_what_placement_judges(seeded: SeededStack) -> None:
    """The same plugin with another token is refused by the real Placement: the header is
    the configured token, not something asyncsched makes up."""
    opts = load_string(
        f"[placement]\nauth_type = admin_token\nendpoint = {seeded.placement.url}\n"
        "token = not-an-admin\n"
    ).placement
    async with PlacementClient(opts) as client:  # GET / needs no role
        with pytest.raises(PlacementError, match="HTTP 403"):
            await client.get_allocation_candidates(ResourceRequest())


def shape(stack: SeededStack, host: str) -> str:
    """What tells a host from another to the scheduler here: its size and zone."""
    p = stack.cloud.hosts[host].plan
    return f"{p.vcpus}/{p.memory_mb}/{p.disk_gb}/{','.join(p.aggregates)}"


async def test_same_decisions_on_both_databases(
    serve: tuple[ServeProcess, str],
    seeded: SeededStack,
    module_amqp_url: str,
    db_backend: Backend,
) -> None:
    """Three requests in a row (a batch of 4, one of 2 into az-cap, one impossible): the hosts
    and alternates asyncsched picks from nova's databases on MariaDB are the ones it picks on
    PostgreSQL (the same seeded cloud, host_subset_size 1: no randomness), up to ties: hosts
    alike in every respect weigh the same, and which of them comes first follows the order
    the databases return rows in (nova's too), so a pick is compared as its host's shape."""
    assert seeded.db.api_url.startswith(
        "mysql+pymysql://" if db_backend == "mysql" else "postgresql+psycopg2://"
    )
    client = OsloSchedulerClient(module_amqp_url, timeout=120.0, call_monitor_timeout=30.0)
    picks: list[list[str]] = []
    try:
        for n, az, mem in ((4, "az1", 4096), (2, "az-cap", 4096), (1, "az1", 10**7)):
            spec = request_spec_primitive(
                num_instances=n, memory_mb=mem, vcpus=2, root_gb=20, availability_zone=az
            )
            uuids = [str(uuid.uuid4()) for _ in range(n)]
            call = asyncio.to_thread(client.select_destinations, spec, uuids)
            try:
                sels = decode_reply(await call)
            except Exception as exc:  # NoValidHost, as nova's client gets it
                picks.append([str(getattr(exc, "exc_type", type(exc).__name__))])
                continue
            picks += [[shape(seeded, s.service_host) for s in per] for per in sels]
    finally:
        client.close()
    assert picks[-1] == ["NoValidHost"], picks
    DECISIONS[db_backend] = picks
    if len(DECISIONS) == len(BACKENDS):
        assert DECISIONS["mysql"] == DECISIONS["postgresql"]
