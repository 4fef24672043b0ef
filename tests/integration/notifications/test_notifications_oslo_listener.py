"""Our notifier publishing on the real RabbitMQ, the real oslo.messaging listener decoding."""

from __future__ import annotations

import asyncio

import pytest

from asyncsched.conf import load_string
from asyncsched.notifications import build_notifier
from asyncsched.objects import codec
from tests.support.notification_listener import NotificationListener
from tests.support.oslo_caller import nova_context, request_spec

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("driver", ["messagingv2", "messaging"])
async def test_oslo_listener_decodes_both_formats(amqp_url: str, driver: str) -> None:
    config = load_string(
        f"[DEFAULT]\nhost = sched-a\ntransport_url = rabbit://nobody:x@127.0.0.1:1/\n"
        f"[oslo_messaging_notifications]\ndriver = {driver}\ntransport_url = {amqp_url}\n"
        "[notifications]\nnotification_format = both\n"
    )
    listener = await asyncio.to_thread(
        NotificationListener, amqp_url, ["notifications", "versioned_notifications"]
    )
    notifier = build_notifier(config)
    try:
        await notifier.start()
        ctx = codec.decode_context({f"_context_{k}": v for k, v in nova_context().items()})
        spec = request_spec()
        notifier.select_destinations("start", ctx, spec)
        notifier.select_destinations("end", ctx, spec)
        got = await asyncio.to_thread(listener.wait_for, 4)
    finally:
        await notifier.close()
        await asyncio.to_thread(listener.close)
    seen = sorted((publisher, event) for _, publisher, event, _, _ in got)
    assert seen == [
        ("nova-scheduler:sched-a", "scheduler.select_destinations.end"),
        ("nova-scheduler:sched-a", "scheduler.select_destinations.start"),
        ("scheduler.sched-a", "scheduler.select_destinations.end"),
        ("scheduler.sched-a", "scheduler.select_destinations.start"),
    ]
    for ctxt, publisher, _, payload, metadata in got:
        assert ctxt["request_id"] == ctx.request_id and ctxt["project_id"] == ctx.project_id
        assert metadata["message_id"] and metadata["timestamp"]
        if publisher.startswith("nova-scheduler"):
            assert payload["nova_object.name"] == "RequestSpecPayload"
            assert payload["nova_object.data"]["instance_uuid"] == spec.instance_uuid
            assert payload["nova_object.data"]["flavor"]["nova_object.data"]["vcpus"] == 2
        else:
            assert payload["request_spec"]["instance_properties"]["uuid"] == spec.instance_uuid
    assert notifier.health()["sent"] == 4


async def test_notifications_wait_in_the_default_queue_for_a_later_listener(
    amqp_url: str,
) -> None:
    """oslo's driver declares '<topic>.info' before sending; a consumer started later gets it."""
    config = load_string(
        f"[DEFAULT]\ntransport_url = {amqp_url}\n"
        "[oslo_messaging_notifications]\ndriver = messagingv2\n"
        "[notifications]\nnotification_format = versioned\n"
    )
    notifier = build_notifier(config)
    await notifier.start()
    ctx = codec.decode_context({"_context_request_id": "req-late"})
    notifier.select_destinations("start", ctx, request_spec())
    await notifier.close()
    assert notifier.health()["sent"] == 1
    listener = await asyncio.to_thread(NotificationListener, amqp_url, ["versioned_notifications"])
    try:
        got = await asyncio.to_thread(listener.wait_for, 1)
    finally:
        await asyncio.to_thread(listener.close)
    assert [(c["request_id"], e) for c, _, e, _, _ in got] == [
        ("req-late", "scheduler.select_destinations.start")
    ]


async def test_unreachable_broker_is_logged_and_never_blocks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = load_string(
        "[oslo_messaging_notifications]\ndriver = messagingv2\nretry = 0\n"
        "transport_url = rabbit://guest:guest@127.0.0.1:1/\n"
        "[notifications]\nnotification_format = versioned\n"
    )
    notifier = build_notifier(config)
    await notifier.start()
    ctx = codec.decode_context({"_context_request_id": "req-x"})
    notifier.select_destinations("start", ctx, request_spec())
    # Queued, not sent on the caller's time: nothing was tried before the loop turns.
    assert notifier.health()["failed"] == 0
    for _ in range(500):
        if notifier.health()["failed"]:
            break
        await asyncio.sleep(0.02)
    await notifier.close()
    assert notifier.health()["failed"] == 1
    assert "not sent" in caplog.text
