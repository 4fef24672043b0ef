"""Service: start order, readiness, failures, drain and close order, reload, watchdog."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asyncsched.common import heap
from asyncsched.common.health import Snapshot
from asyncsched.common.systemd import SystemdNotifier
from asyncsched.conf import ConfigSources, load_config
from asyncsched.conf.options import Config
from asyncsched.service import (
    DAEMON_GC_THRESHOLDS,
    Service,
    ServiceStartError,
    apply_mutable,
    changed_options,
)
from tests.support.health import Up
from tests.support.notify_listener import NotifyListener

Events = list[tuple[Any, ...]]


class FakeComponent:
    """Records lifecycle calls; can fail, hang on start, or take long to drain."""

    def __init__(
        self,
        name: str,
        events: Events,
        *,
        fail: bool = False,
        hang: bool = False,
        drain_seconds: float = 0.0,
    ) -> None:
        self.name = name
        self.events = events
        self.fail = fail
        self.hang = hang
        self.drain_seconds = drain_seconds
        self.config_seen: Config | None = None
        self.entered_start = asyncio.Event()
        self.entered_drain = asyncio.Event()

    async def start(self) -> None:
        self.events.append(("start", self.name))
        self.entered_start.set()
        if self.hang:
            await asyncio.Event().wait()
        if self.fail:
            raise RuntimeError(f"{self.name} cannot connect")

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109
        self.events.append(("drain", self.name))
        self.entered_drain.set()
        await asyncio.sleep(self.drain_seconds)
        self.events.append(("drained", self.name))

    async def close(self) -> None:
        self.events.append(("close", self.name))

    def reconfigure(self, config: Config) -> None:
        self.config_seen = config
        self.events.append(("reconfigure", self.name))

    def health(self) -> Snapshot:
        return Up(ok=True)


class PlainComponent:
    """No drain, no reconfigure: both are optional."""

    def __init__(self, name: str, events: Events) -> None:
        self.name = name
        self.events = events

    async def start(self) -> None:
        self.events.append(("start", self.name))

    async def close(self) -> None:
        self.events.append(("close", self.name))

    def health(self) -> Snapshot:
        raise RuntimeError("broken health")


@pytest.fixture
def listener() -> Iterator[NotifyListener]:
    with NotifyListener() as lst:
        yield lst


def with_drain_timeout(seconds: float) -> Config:
    cfg = Config()
    return dataclasses.replace(
        cfg, asyncsched=dataclasses.replace(cfg.asyncsched, drain_timeout=seconds)
    )


async def test_start_in_order_ready_then_drain_and_close_in_reverse(
    listener: NotifyListener,
) -> None:
    events: Events = []
    comps = [FakeComponent(n, events) for n in ("hoststate", "placement", "amqp")]
    service = Service(Config(), comps, SystemdNotifier(listener.address))
    await service.start()
    assert service.state == "running"
    assert events == [("start", "hoststate"), ("start", "placement"), ("start", "amqp")]
    assert listener.recv() == {"STATUS": "starting hoststate (1/3)"}
    assert listener.recv() == {"STATUS": "starting placement (2/3)"}
    assert listener.recv() == {"STATUS": "starting amqp (3/3)"}
    ready = listener.recv()
    assert ready["READY"] == "1" and "hoststate, placement, amqp" in ready["STATUS"]
    assert service.health().as_json() == {
        "state": "running",
        "components": {n: {"ok": True} for n in ("hoststate", "placement", "amqp")},
    }
    events.clear()
    await service.stop()
    assert events == [
        ("drain", "amqp"),
        ("drained", "amqp"),
        ("drain", "placement"),
        ("drained", "placement"),
        ("drain", "hoststate"),
        ("drained", "hoststate"),
        ("close", "amqp"),
        ("close", "placement"),
        ("close", "hoststate"),
    ]
    assert listener.recv()["STOPPING"] == "1"
    assert service.state == "stopped"


async def test_failed_component_closes_what_started_and_never_reports_ready(
    listener: NotifyListener,
) -> None:
    events: Events = []
    comps = [
        FakeComponent("hoststate", events),
        FakeComponent("placement", events, fail=True),
        FakeComponent("amqp", events),
    ]
    service = Service(Config(), comps, SystemdNotifier(listener.address))
    with pytest.raises(ServiceStartError, match=r"placement failed to start.*cannot connect"):
        await service.start()
    assert events == [("start", "hoststate"), ("start", "placement"), ("close", "hoststate")]
    assert service.state == "failed"
    messages = [listener.recv() for _ in range(3)]
    assert messages[-1]["STATUS"].startswith("failed to start placement")
    assert all("READY" not in m for m in messages)


async def test_run_returns_1_when_a_component_fails() -> None:
    events: Events = []
    service = Service(Config(), [FakeComponent("amqp", events, fail=True)])
    assert await service.run() == 1


async def test_stop_requested_while_a_component_hangs_in_start() -> None:
    events: Events = []
    comps = [FakeComponent("hoststate", events), FakeComponent("placement", events, hang=True)]
    service = Service(Config(), comps)
    running = asyncio.create_task(service.run())
    await asyncio.wait_for(comps[1].entered_start.wait(), 10)
    service.request_stop()
    assert await asyncio.wait_for(running, 10) == 0
    assert ("close", "placement") in events and ("close", "hoststate") in events
    assert events.index(("close", "placement")) < events.index(("close", "hoststate"))


async def test_drain_is_bounded_by_drain_timeout(caplog: pytest.LogCaptureFixture) -> None:
    events: Events = []
    slow = FakeComponent("amqp", events, drain_seconds=3600)
    quick = FakeComponent("placement", events)
    service = Service(with_drain_timeout(0.2), [quick, slow])
    await service.start()
    with caplog.at_level(logging.WARNING):
        await asyncio.wait_for(service.stop(), 10)  # would hang for an hour without the bound
    assert ("drained", "amqp") not in events
    assert events[-2:] == [("close", "amqp"), ("close", "placement")]
    assert "amqp still had work in flight" in caplog.text


async def test_second_stop_request_cuts_the_drain_short() -> None:
    events: Events = []
    amqp = FakeComponent("amqp", events, drain_seconds=3600)
    service = Service(with_drain_timeout(3600), [amqp])
    await service.start()
    stopping = asyncio.create_task(service.stop())
    await asyncio.wait_for(amqp.entered_drain.wait(), 10)
    service.request_stop()
    service.request_stop()
    await asyncio.wait_for(stopping, 10)
    assert events[-1] == ("close", "amqp")


async def test_optional_methods_and_broken_health() -> None:
    events: Events = []
    service = Service(Config(), [PlainComponent("plain", events)])
    await service.start()
    assert "broken health" in service.health()["components"]["plain"]["error"]
    assert await service.reload() is True  # no files: defaults again, nothing to reconfigure
    await service.stop()
    assert events == [("start", "plain"), ("close", "plain")]


def test_changed_and_apply_mutable() -> None:
    old = Config()
    new = load_config_text(
        "[filter_scheduler]\nhost_subset_size = 4\n[scheduler]\nmax_attempts = 9\n"
    )
    assert changed_options(old, new) == [
        ("scheduler", "max_attempts", False),
        ("filter_scheduler", "host_subset_size", True),
    ]
    merged = apply_mutable(old, new)
    assert merged.filter_scheduler.host_subset_size == 4
    assert merged.scheduler.max_attempts == 3


def load_config_text(text: str) -> Config:
    from asyncsched.conf import load_string

    return load_string(text)


async def test_reload_applies_mutable_options_only(
    tmp_path: Path, listener: NotifyListener, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text("[filter_scheduler]\nhost_subset_size = 2\n[asyncsched]\nlog_level = INFO\n")
    events: Events = []
    comp = FakeComponent("scheduler", events)
    service = Service(
        load_config([str(conf)]),
        [comp],
        SystemdNotifier(listener.address),
        ConfigSources.of([str(conf)]),
    )
    await service.start()
    listener.wait_for("READY")
    conf.write_text(
        "[filter_scheduler]\nhost_subset_size = 5\nram_weight_multiplier = -1\n"
        "[scheduler]\nmax_attempts = 9\n[asyncsched]\nlog_level = WARNING\n"
    )
    root = logging.getLogger()
    level = root.level
    try:
        with caplog.at_level(logging.INFO):
            assert await service.reload() is True
            assert root.level == logging.WARNING  # log level applied on reload
    finally:
        root.setLevel(level)
    assert service.config.filter_scheduler.host_subset_size == 5
    assert service.config.filter_scheduler.ram_weight_multiplier == -1.0
    assert service.config.scheduler.max_attempts == 3  # immutable: needs a restart
    assert comp.config_seen is service.config
    assert "[scheduler] max_attempts changed in the config files but needs a restart" in caplog.text
    assert listener.recv()["RELOADING"] == "1"
    assert listener.recv()["READY"] == "1"
    await service.stop()


async def test_invalid_reload_keeps_the_old_config(
    tmp_path: Path, listener: NotifyListener, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text("[filter_scheduler]\nhost_subset_size = 2\n")
    events: Events = []
    service = Service(
        load_config([str(conf)]),
        [FakeComponent("scheduler", events)],
        SystemdNotifier(listener.address),
        [str(conf)],
    )
    await service.start()
    before = service.config
    conf.write_text("[filter_scheduler]\nhost_subset_size = 0\n")
    with caplog.at_level(logging.ERROR):
        assert await service.reload() is False
    assert service.config is before
    assert ("reconfigure", "scheduler") not in events
    assert "reload failed, keeping the running configuration" in caplog.text
    assert "host_subset_size = '0'" in caplog.text
    listener.wait_for("RELOADING")
    assert "last reload failed" in listener.wait_for("READY")["STATUS"]
    await service.stop()


async def test_watchdog_pings_at_half_the_interval(listener: NotifyListener) -> None:
    notifier = SystemdNotifier(listener.address, watchdog_usec=100_000)
    assert notifier.watchdog_interval == 0.05
    service = Service(Config(), [], notifier)
    await service.start()
    for _ in range(3):
        await asyncio.to_thread(listener.wait_for, "WATCHDOG", "1", 10)
    await service.stop()


async def test_health_file_written_while_running_and_at_stop(tmp_path: Path) -> None:
    path = tmp_path / "health.json"
    cfg = Config()
    cfg = dataclasses.replace(
        cfg, asyncsched=dataclasses.replace(cfg.asyncsched, health_file=str(path))
    )
    events: Events = []
    service = Service(cfg, [FakeComponent("hoststate", events)])
    await service.start()
    for _ in range(200):  # the writer task runs on the next loop iterations
        if path.exists():
            break
        await asyncio.sleep(0.01)
    assert json.loads(path.read_text()) == {
        "state": "running",
        "components": {"hoststate": {"ok": True}},
    }
    await service.stop()
    assert json.loads(path.read_text())["state"] == "stopped"
    assert os.listdir(tmp_path) == ["health.json"]  # no temp files left


async def test_unwritable_health_file_is_only_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = Config()
    bad = str(tmp_path / "missing-dir" / "health.json")
    cfg = dataclasses.replace(cfg, asyncsched=dataclasses.replace(cfg.asyncsched, health_file=bad))
    service = Service(cfg, [])
    await service.start()
    with caplog.at_level(logging.WARNING):
        await service.stop()
    assert "cannot write health file" in caplog.text


class Nameless:
    """A component written without a ``name``: the class name stands in."""

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def health(self) -> Snapshot:
        return Up(ok=True)


async def test_component_without_a_name_uses_its_class_name(listener: NotifyListener) -> None:
    service = Service(Config(), [Nameless()], SystemdNotifier(listener.address))  # type: ignore[list-item]
    await service.start()
    assert listener.recv() == {"STATUS": "starting Nameless (1/1)"}
    assert service.health()["components"] == {"Nameless": {"ok": True}}
    await service.stop()


class GCWatching:
    """A component that notes, when it starts, whether the collector runs and what is frozen."""

    def __init__(self, name: str, drains: bool) -> None:
        self.name = name
        self.seen: tuple[bool, int] | None = None
        if drains:
            self.drain = self._drain

    async def start(self) -> None:
        import gc

        self.seen = (gc.isenabled(), gc.get_freeze_count())

    async def _drain(self, timeout: float) -> None:  # noqa: ASYNC109
        return None

    async def close(self) -> None:
        return None

    def health(self) -> Up:
        return Up(ok=True)


async def test_daemon_holds_the_collector_off_while_loading_and_freezes_before_consumers() -> None:
    """While the state loads no collection walks the growing heap; the one full collection and
    the freeze come before the first consumer (a Drainable component) starts, so no request
    waits for them; afterwards the collector runs again."""
    import gc

    gc.unfreeze()
    thresholds = gc.get_threshold()
    state, consumer = GCWatching("hoststate", drains=False), GCWatching("rpc", drains=True)
    service = Service(Config(), [state, consumer], freeze_gc=True)
    try:
        await service.start()
        assert state.seen == (False, 0)  # collector off, nothing frozen yet
        assert consumer.seen is not None and consumer.seen[1] > 0  # frozen before it started
        assert gc.isenabled()
    finally:
        await service.stop()
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        heap.KEEPER.enabled = False
    assert gc.isenabled()


async def test_daemon_freezes_the_start_up_heap_only_when_asked() -> None:
    """The daemon moves the loaded host table out of the GC's reach and collects its young
    objects less often; tests' Services do not."""
    import gc

    gc.unfreeze()
    events: Events = []
    plain = Service(Config(), [FakeComponent("hoststate", events)])
    await plain.start()
    assert gc.get_freeze_count() == 0
    await plain.stop()
    assert gc.get_threshold() != DAEMON_GC_THRESHOLDS
    assert not heap.KEEPER.enabled
    thresholds = gc.get_threshold()
    frozen = Service(Config(), [FakeComponent("hoststate", events)], freeze_gc=True)
    try:
        await frozen.start()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == DAEMON_GC_THRESHOLDS  # a young generation of 50,000
        assert heap.KEEPER.enabled  # and what large builds keep is frozen in turn
    finally:
        await frozen.stop()
        gc.unfreeze()
        gc.set_threshold(*thresholds)
        heap.KEEPER.enabled = False
