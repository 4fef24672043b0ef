"""Dispatcher version rules, topology flags, transport URLs and the reply cache."""

from __future__ import annotations

from dataclasses import replace

import pytest

from asyncsched.conf.options import OsloMessagingRabbitOptions
from asyncsched.conf.transport_url import BrokerHost, parse_transport_url
from asyncsched.exceptions import ConfigError
from asyncsched.rpc import dispatcher
from asyncsched.rpc.reply_cache import Outcome, ReplyCache
from asyncsched.rpc.topology import build_topology, prefetch_count, queue_arguments

RABBIT = OsloMessagingRabbitOptions()


@pytest.mark.parametrize(
    ("imp", "req", "ok"),
    [
        ("4.5", "4.5", True),
        ("4.5", "4.0", True),
        ("4.5", "4", True),
        ("4.5", "4.6", False),
        ("4.5", "5.0", False),
        ("4.5", "3.9", False),
        ("4.5", "4.5.1", False),
        ("4.5", "four", False),
        ("1.1", "1.0", True),
    ],
)
def test_version_is_compatible(imp: str, req: str, ok: bool) -> None:
    assert dispatcher.version_is_compatible(imp, req) is ok


def test_resolve_like_oslo() -> None:
    assert dispatcher.resolve(None, "4.5", "select_destinations").name == "scheduler"
    assert dispatcher.resolve(None, "4.1", "update_aggregates").name == "scheduler"
    assert dispatcher.resolve("baseapi", "1.1", "ping").name == "baseapi"
    with pytest.raises(dispatcher.NoSuchMethod):
        dispatcher.resolve(None, "4.5", "frobnicate")
    with pytest.raises(dispatcher.NoSuchMethod):
        dispatcher.resolve(None, "4.5", "_private")  # DefaultRPCAccessPolicy
    with pytest.raises(dispatcher.UnsupportedVersion):
        dispatcher.resolve(None, "4.6", "select_destinations")
    with pytest.raises(dispatcher.UnsupportedVersion):
        dispatcher.resolve(None, "5.0", "select_destinations")
    with pytest.raises(dispatcher.UnsupportedVersion):
        dispatcher.resolve("nosuchns", "1.0", "ping")
    with pytest.raises(dispatcher.UnsupportedVersion):
        dispatcher.resolve(None, "1.0", "ping")  # a missing version means 1.0


def test_default_topology_matches_a_real_nova_scheduler() -> None:
    topo = build_topology(RABBIT, control_exchange="nova", topic="scheduler", server="sched-1")
    c = topo.control_exchange
    assert (c.name, c.type, c.durable, c.auto_delete) == ("nova", "topic", False, False)
    f = topo.fanout_exchange
    assert (f.name, f.type, f.durable, f.auto_delete) == ("scheduler_fanout", "fanout", False, True)
    topic, server, fanout = topo.queues
    assert (topic.name, topic.routing_key, topic.exchange) == ("scheduler", "scheduler", c)
    assert (server.name, server.routing_key, server.exchange) == (
        "scheduler.sched-1",
        "scheduler.sched-1",
        c,
    )
    for q in (topic, server):
        assert q.durable is False and q.auto_delete is False and dict(q.arguments) == {}
    assert fanout.name.startswith("scheduler_fanout_") and len(fanout.name) == 17 + 32
    assert fanout.exchange == f and fanout.routing_key == "scheduler"
    assert fanout.durable is False and fanout.auto_delete is False
    assert dict(fanout.arguments) == {"x-expires": 1800000}


def test_quorum_topology_as_verified_on_a_broker() -> None:
    rabbit = replace(
        RABBIT,
        rabbit_quorum_queue=True,
        rabbit_transient_quorum_queue=True,
        rabbit_quorum_delivery_limit=10,
    )
    topo = build_topology(rabbit, control_exchange="nova", topic="scheduler", server="h")
    assert topo.control_exchange.durable is True
    assert topo.fanout_exchange.durable is True and topo.fanout_exchange.auto_delete is True
    topic, _, fanout = topo.queues
    assert topic.durable and dict(topic.arguments) == {
        "x-queue-type": "quorum",
        "x-delivery-limit": 10,
    }
    assert fanout.durable and dict(fanout.arguments) == {
        "x-queue-type": "quorum",
        "x-delivery-limit": 10,
        "x-expires": 1800000,
    }


def test_other_flags() -> None:
    rabbit = replace(
        RABBIT,
        amqp_durable_queues=True,
        amqp_auto_delete=True,
        rabbit_ha_queues=True,
        rabbit_transient_queues_ttl=0,
        enable_cancel_on_failover=True,
    )
    topo = build_topology(rabbit, control_exchange="x", topic="scheduler", server="h")
    assert topo.control_exchange.durable and topo.control_exchange.auto_delete
    topic, _, fanout = topo.queues
    assert topic.durable and topic.auto_delete
    assert dict(topic.arguments) == {"x-ha-policy": "all"}
    assert dict(fanout.arguments) == {"x-ha-policy": "all"}  # ttl 0: no x-expires
    assert dict(topic.consumer_arguments) == {"x-cancel-on-ha-failover": True}


def test_quorum_memory_limits_and_stream_fanout() -> None:
    rabbit = replace(
        RABBIT,
        rabbit_quorum_queue=True,
        rabbit_quorum_max_memory_length=100,
        rabbit_quorum_max_memory_bytes=4096,
    )
    assert queue_arguments(rabbit, quorum=True, ttl=0) == {
        "x-queue-type": "quorum",
        "x-max-in-memory-length": 100,
        "x-max-in-memory-bytes": 4096,
    }
    stream = replace(
        RABBIT,
        rabbit_stream_fanout=True,
        rabbit_transient_quorum_queue=True,
        rabbit_qos_prefetch_count=10,
    )
    topo = build_topology(stream, control_exchange="nova", topic="scheduler", server="h")
    fanout = topo.queues[2]
    assert fanout.name == "scheduler_fanout" and fanout.durable
    assert dict(fanout.arguments) == {"x-queue-type": "stream", "x-max-age": "1800s"}
    assert dict(fanout.consumer_arguments) == {"x-stream-offset": "last"}


def test_config_errors_oslo_also_refuses() -> None:
    with pytest.raises(ConfigError):
        build_topology(
            replace(RABBIT, rabbit_quorum_queue=True, rabbit_ha_queues=True),
            control_exchange="nova",
            topic="scheduler",
            server="h",
        )
    with pytest.raises(ConfigError, match="stream"):
        build_topology(
            replace(RABBIT, rabbit_stream_fanout=True),
            control_exchange="nova",
            topic="scheduler",
            server="h",
        )


def test_prefetch() -> None:
    assert prefetch_count(RABBIT, 32) == 32
    assert prefetch_count(replace(RABBIT, rabbit_qos_prefetch_count=5), 32) == 5


def test_transport_url_failover_vhost_tls() -> None:
    url = parse_transport_url("rabbit://u1:p%40ss@h1:5673,u2:p2@h2/my%2Fvhost?ssl=1")
    assert url.hosts == (
        BrokerHost("h1", 5673, "u1", "p@ss"),
        BrokerHost("h2", 5672, "u2", "p2"),
    )
    assert url.virtual_host == "my/vhost" and url.ssl is True
    assert "p@ss" not in url.redacted() and "p2" not in repr(url)
    plain = parse_transport_url("rabbit://guest:guest@127.0.0.1:5672/")
    assert plain.virtual_host == "/" and plain.ssl is False
    v6 = parse_transport_url("rabbit://u:p@[::1]:5671/v")
    assert v6.hosts[0].host == "::1" and v6.hosts[0].port == 5671
    assert parse_transport_url("rabbit://h").hosts == (BrokerHost("h"),)


@pytest.mark.parametrize(
    "bad", ["http://h/", "rabbit://", "rabbit://u:p@h:notaport/", "rabbit://u:p@h:0/", "h:5672"]
)
def test_bad_transport_urls(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_transport_url(bad)
    assert ":p@" not in str(info.value)


def test_reply_cache_bounds_size_and_age() -> None:
    now = [0.0]
    cache = ReplyCache(max_size=3, ttl=10.0, clock=lambda: now[0])
    for i in range(5):
        cache.put(f"id{i}", Outcome(result=i))
    assert len(cache) == 3
    assert cache.get("id0") is None and cache.get("id1") is None
    assert cache.get("id4") == Outcome(result=4)
    now[0] = 11.0
    assert cache.get("id4") is None
    cache.put("new", Outcome(failure="f"))
    assert len(cache) == 1 and cache.get("new") == Outcome(failure="f")


def test_reply_cache_bounds_memory() -> None:
    cache = ReplyCache(max_size=100, ttl=60.0, max_bytes=1000)
    for i in range(5):
        cache.put(f"id{i}", Outcome(result="x" * 300), size=300)
    assert cache.bytes <= 1000 and len(cache) == 3
    assert cache.get("id4") is not None and cache.get("id1") is None
    cache.put("huge", Outcome(result="y"), size=5000)  # the newest is kept even if too big
    assert len(cache) == 1 and cache.get("huge") is not None and cache.bytes == 5000
    cache.put("huge", Outcome(result="z"), size=10)
    assert cache.bytes == 10


def test_method_table_serves_exactly_what_the_dispatcher_admits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asyncsched.rpc.methods import method_table

    table = method_table(None, None)  # building only binds them; nothing is called
    for endpoint in dispatcher.ENDPOINTS:
        assert set(table[endpoint.name]) == endpoint.methods
    grown = replace(
        dispatcher.SCHEDULER_ENDPOINT,
        methods=dispatcher.SCHEDULER_ENDPOINT.methods | {"new_method"},
    )
    monkeypatch.setattr(dispatcher, "ENDPOINTS", (grown, dispatcher.BASEAPI_ENDPOINT))
    with pytest.raises(RuntimeError, match="new_method"):
        method_table(None, None)
