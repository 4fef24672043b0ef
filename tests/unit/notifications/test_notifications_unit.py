"""select_destinations notifications: payload shapes (nova's samples), streams, queueing."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import Any

import pytest

from asyncsched.conf import load_string
from asyncsched.conf.options import Config
from asyncsched.exceptions import ConfigError
from asyncsched.notifications import build_notifier
from asyncsched.notifications.notifier import SchedulerNotifier, encode, streams
from asyncsched.notifications.payloads import legacy_request_spec, request_spec_payload
from asyncsched.objects import codec
from asyncsched.objects.models import RequestContext
from tests.support.oslo_caller import request_spec, request_spec_primitive

CTX = RequestContext(request_id="req-1", user_id="u", project_id="p", auth_token="tok")

# Field names of nova's doc/notification_samples/common_payloads (nova master).
REQUEST_SPEC_FIELDS = {
    "availability_zone", "flavor", "ignore_hosts", "image", "instance_uuid", "num_instances",
    "numa_topology", "pci_requests", "project_id", "scheduler_hints", "security_groups",
    "force_hosts", "force_nodes", "instance_group", "requested_destination", "retry", "user_id",
}  # fmt: skip
FLAVOR_FIELDS = {
    "flavorid", "name", "root_gb", "vcpus", "ephemeral_gb", "memory_mb", "disabled",
    "rxtx_factor", "extra_specs", "projects", "swap", "is_public", "vcpu_weight", "description",
}  # fmt: skip
IMAGE_FIELDS = {
    "checksum", "container_format", "created_at", "direct_url", "disk_format", "id", "min_disk",
    "min_ram", "name", "owner", "properties", "protected", "size", "status", "tags",
    "updated_at", "virtual_size", "visibility",
}  # fmt: skip
SERVER_GROUP_FIELDS = {
    "uuid", "name", "project_id", "user_id", "policies", "policy", "rules", "members", "hosts",
}  # fmt: skip


def conf(text: str) -> Config:
    return load_string(text)


def test_request_spec_payload_has_novas_shape_and_values() -> None:
    # Through the codec, as the spec arrives from a conductor.
    spec = codec.decode_request_spec(request_spec_primitive(request_spec(num_instances=2)))
    p = request_spec_payload(spec)
    assert p["nova_object.name"] == "RequestSpecPayload"
    assert p["nova_object.version"] == "1.1" and p["nova_object.namespace"] == "nova"
    data = p["nova_object.data"]
    assert set(data) == REQUEST_SPEC_FIELDS
    assert data["num_instances"] == 2 and data["instance_uuid"] == spec.instance_uuid
    flavor = data["flavor"]
    assert flavor["nova_object.version"] == "1.4"
    assert set(flavor["nova_object.data"]) == FLAVOR_FIELDS
    assert flavor["nova_object.data"]["memory_mb"] == 4096
    assert flavor["nova_object.data"]["extra_specs"]["hw:cpu_policy"] == "shared"
    image = data["image"]["nova_object.data"]
    assert set(image) == IMAGE_FIELDS and image["name"] == "ubuntu-24.04"
    props = image["properties"]
    assert props["nova_object.name"] == "ImageMetaPropsPayload"
    assert props["nova_object.data"]["hw_architecture"] == "x86_64"
    assert "hw_cpu_policy" not in props["nova_object.data"]  # only the set properties
    pci = data["pci_requests"]["nova_object.data"]
    assert pci == {"instance_uuid": spec.instance_uuid, "requests": []}
    group = data["instance_group"]["nova_object.data"]
    assert set(group) == SERVER_GROUP_FIELDS and group["policy"] == "anti-affinity"
    assert data["retry"]["nova_object.data"] == {"num_attempts": 1, "hosts": []}
    assert data["scheduler_hints"] == {"group": [spec.instance_group.uuid]}  # type: ignore[union-attr]
    assert data["numa_topology"] is None and data["requested_destination"] is None
    json.dumps(p)  # JSON-ready as it is


def test_legacy_request_spec_is_novas_to_legacy_request_spec_dict() -> None:
    spec = request_spec()
    legacy = legacy_request_spec(spec)
    assert set(legacy) == {"num_instances", "image", "instance_properties", "instance_type"}
    assert legacy["instance_properties"]["uuid"] == spec.instance_uuid
    assert legacy["instance_properties"]["memory_mb"] == 4096
    assert legacy["instance_type"]["name"] == "c1.medium" and legacy["instance_type"]["id"] == 42
    assert legacy["image"]["properties"]["os_distro"] == "ubuntu"
    assert legacy_request_spec(dataclasses.replace(spec, image=None))["image"] == {}
    json.dumps(legacy)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("[oslo_messaging_notifications]\ndriver = noop\n", []),
        (
            "[oslo_messaging_notifications]\ndriver = messagingv2\n",
            [(False, "scheduler.h1", ("notifications",), "messagingv2")],
        ),
        (
            "[oslo_messaging_notifications]\ndriver = messaging\n"
            "[notifications]\nnotification_format = versioned\n",
            [(True, "nova-scheduler:h1", ("versioned_notifications",), "messaging")],
        ),
        (
            "[oslo_messaging_notifications]\ndriver = messagingv2\ndriver = log\n"
            "topics = a,b\n[notifications]\nnotification_format = both\n",
            [
                (False, "scheduler.h1", ("a", "b"), "messagingv2"),
                (True, "nova-scheduler:h1", ("versioned_notifications",), "messagingv2"),
                (False, "scheduler.h1", ("a", "b"), "log"),
                (True, "nova-scheduler:h1", ("versioned_notifications",), "log"),
            ],
        ),
    ],
)
def test_streams_follow_novas_two_notifiers(text: str, expected: list[Any]) -> None:
    got = streams(conf("[DEFAULT]\nhost = h1\n" + text))
    assert [(s.versioned, s.publisher_id, s.topics, s.driver) for s in got] == expected


def test_unknown_driver_and_bad_transport_url_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="driver = 'routing': not supported"):
        build_notifier(conf("[oslo_messaging_notifications]\ndriver = routing\n"))
    with pytest.raises(ConfigError, match=r"\[oslo_messaging_notifications\] transport_url"):
        conf("[oslo_messaging_notifications]\ntransport_url = http://x/\n")


def test_encode_v2_is_the_oslo_envelope_and_v1_the_bare_message() -> None:
    msg = {"event_type": "e", "payload": {"a": 1}}
    v2 = json.loads(encode(msg, "messagingv2"))
    assert v2["oslo.version"] == "2.0" and json.loads(v2["oslo.message"]) == msg
    assert json.loads(encode(msg, "messaging")) == msg


class FakePublisher:
    def __init__(self, fail: bool = False) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail
        self.closed = 0

    async def publish(self, routing_key: str, body: bytes) -> None:
        if self.fail:
            raise ConnectionError("broker down")
        inner = json.loads(json.loads(body)["oslo.message"])
        self.sent.append((routing_key, inner))

    async def close(self) -> None:
        self.closed += 1


BOTH = (
    "[DEFAULT]\nhost = sched1\n[oslo_messaging_notifications]\ndriver = messagingv2\n"
    "[notifications]\nnotification_format = both\n"
)


async def test_start_and_end_go_out_in_order_on_both_topics() -> None:
    pub = FakePublisher()
    n = SchedulerNotifier(conf(BOTH), lambda: pub)
    await n.start()
    spec = request_spec()
    n.select_destinations("start", CTX, spec)
    n.select_destinations("end", CTX, spec)
    await n.close()
    assert [(k, m["event_type"], m["publisher_id"]) for k, m in pub.sent] == [
        ("notifications.info", "scheduler.select_destinations.start", "scheduler.sched1"),
        (
            "versioned_notifications.info",
            "scheduler.select_destinations.start",
            "nova-scheduler:sched1",
        ),
        ("notifications.info", "scheduler.select_destinations.end", "scheduler.sched1"),
        (
            "versioned_notifications.info",
            "scheduler.select_destinations.end",
            "nova-scheduler:sched1",
        ),
    ]
    legacy, versioned = pub.sent[0][1], pub.sent[1][1]
    assert legacy["payload"]["request_spec"]["instance_properties"]["uuid"] == spec.instance_uuid
    assert versioned["payload"]["nova_object.name"] == "RequestSpecPayload"
    assert versioned["priority"] == "INFO" and versioned["_context_request_id"] == "req-1"
    assert n.health()["sent"] == 4 and pub.closed == 1


async def test_a_notification_that_cannot_be_sent_is_logged_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pub = FakePublisher(fail=True)
    config = conf(BOTH + "[oslo_messaging_notifications]\nretry = 1\n")
    n = SchedulerNotifier(config, lambda: pub, retry_delay=0.01)
    await n.start()
    with caplog.at_level(logging.WARNING):
        n.select_destinations("start", CTX, request_spec())  # returns at once
        for _ in range(200):
            if n.health()["failed"] == 2:
                break
            await asyncio.sleep(0.01)
    await n.close()
    assert n.health()["failed"] == 2 and n.health()["sent"] == 0
    assert "scheduler.select_destinations.start to notifications.info not sent" in caplog.text
    assert "broker down" in str(n.health()["last_error"])


async def test_a_full_queue_drops_instead_of_waiting() -> None:
    n = SchedulerNotifier(conf(BOTH), lambda: FakePublisher(), queue_size=2)
    for _ in range(5):  # not started: nothing drains the queue
        n.select_destinations("start", CTX, request_spec())
    assert n.health()["dropped"] == 3 and n.health()["pending"] == 2


async def test_noop_default_sends_nothing() -> None:
    n = build_notifier(Config())
    assert not n.enabled
    n.select_destinations("start", CTX, request_spec())
    assert n.health()["pending"] == 0


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str | None]] = []

    def select_destinations(self, phase: str, ctx: RequestContext, spec: Any) -> None:
        self.events.append((phase, ctx.request_id))


async def test_manager_notifies_start_and_end_and_only_start_on_no_valid_host() -> None:
    from asyncsched.exceptions import NoValidHost
    from asyncsched.objects.models import Flavor, RequestSpec
    from asyncsched.scheduling.manager import SchedulerManager
    from tests.support.sched_fakes import FakeCache, FakePlacement
    from tests.support.sched_helpers import NOW, config, host

    hosts = [host(f"cmp{i}", free_ram_mb=8192, total_usable_ram_mb=8192) for i in range(2)]
    rec = Recorder()
    mgr = SchedulerManager(
        config(), FakeCache(hosts, []), FakePlacement(hosts), clock=lambda: NOW, notifier=rec
    )
    spec = RequestSpec(flavor=Flavor(memory_mb=1024, vcpus=1, root_gb=1), project_id="p")
    await mgr.select_destinations(CTX, spec, ["i1"], True, True)
    assert rec.events == [("start", "req-1"), ("end", "req-1")]
    huge = dataclasses.replace(spec, flavor=Flavor(memory_mb=10**7, vcpus=1, root_gb=1))
    with pytest.raises(NoValidHost):
        await mgr.select_destinations(CTX, huge, ["i2"], True, True)
    assert rec.events[2:] == [("start", "req-1")]  # as nova: no .end when scheduling fails
