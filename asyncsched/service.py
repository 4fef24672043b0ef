"""The service shell: ordered start, systemd readiness and watchdog, drain on SIGTERM,
reload on SIGHUP.

A :class:`Service` owns a list of :class:`Component` objects and knows nothing of what they do.
Start order is the list order (host state -> Placement -> AMQP consumers), so by the time the
consumers take messages everything they need is up; stop order is the reverse, so the consumers
stop taking messages first and the in-flight requests can still use the rest while they finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import inspect
import json
import logging
import os
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from asyncsched.common import heap
from asyncsched.common.health import HealthFailed, ServiceHealth, Snapshot
from asyncsched.common.systemd import SystemdNotifier
from asyncsched.common.tasks import cancel_and_wait
from asyncsched.conf.loader import ConfigSources, load
from asyncsched.conf.options import SECTIONS, Config
from asyncsched.conf.redact import mask_tree
from asyncsched.exceptions import AsyncschedError, ConfigError
from asyncsched.logs import apply_log_level

LOG = logging.getLogger(__name__)

# The daemon's cyclic-GC thresholds once the start-up heap is frozen (issue #24). With the
# default (700, 10, 10) the refreshes' steady churn (at 100,000 hosts, 10 cells: 10,000
# services rows a second, each pass's rows alive together as driver records) ran a young
# collection every 700 objects and a full one every 70,000, each over every object created
# since the freeze: a quarter of the daemon's CPU with no boots (py-spy --native). A young
# generation of 50,000 lets a pass's rows come and go between collections; cyclic garbage
# (rare: the state is values and dicts) waits a little longer.
DAEMON_GC_THRESHOLDS = (50_000, 10, 10)


def freeze_start_up_heap() -> None:
    """Move what start-up built (the loaded host table and Placement's providers: 4.4 million
    objects at 100,000 hosts) out of the collector's reach, then collect young objects less
    often. No collection first: the daemon holds the collector off while it loads, so a
    collection here would walk every object in one piece (3.2 to 3.7 s at 100,000 hosts, a
    stall every refresh running then waited for) to find almost nothing (27 objects at
    100,000 hosts: the state is values and dicts, freed by reference counts). Called once,
    before the first consumer starts; process-wide, so only the daemon asks for it
    (``freeze_gc``). From then on, what the scheduler's large builds keep is frozen in turn
    (``common.heap``)."""
    began = time.perf_counter()
    gc.freeze()
    gc.set_threshold(*DAEMON_GC_THRESHOLDS)
    heap.KEEPER.enabled = True  # and what large builds keep later (common/heap.py)
    LOG.info(
        "start-up heap frozen: %d objects out of the collector's reach in %.3f s",
        gc.get_freeze_count(),
        time.perf_counter() - began,
    )


CLOSE_TIMEOUT = 10.0  # seconds one component may take to close before we move on


@runtime_checkable
class Component(Protocol):
    """A long-lived part of the daemon with an explicit lifecycle.

    Optional extras, found with :class:`Drainable` / :class:`Reconfigurable`:
    ``async drain(timeout)`` = stop taking new work and wait (at most ``timeout`` s) for the
    work in flight; ``reconfigure(config)`` (sync or async) = apply the reloadable options of a
    new Config on SIGHUP without dropping work.
    """

    name: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def health(self) -> Snapshot: ...


@runtime_checkable
class Drainable(Protocol):
    async def drain(self, timeout: float) -> None: ...  # noqa: ASYNC109 (a budget, not a wait)


@runtime_checkable
class Reconfigurable(Protocol):
    def reconfigure(self, config: Config) -> Awaitable[None] | None: ...


def component_name(comp: object) -> str:
    """``comp.name``, or the class name for a component that does not declare one."""
    name = getattr(comp, "name", None)
    return name if isinstance(name, str) and name else type(comp).__name__


def health_snapshot(state: str, components: Sequence[Component]) -> ServiceHealth:
    """The state and each component's snapshot by name (JSON: ``{"state": ...,
    "components": {name: health}}``); a failing health() becomes a ``HealthFailed``."""
    comps: dict[str, Snapshot] = {}
    for comp in components:
        try:
            comps[component_name(comp)] = comp.health()
        except Exception as exc:  # a broken health() must not break the caller
            comps[component_name(comp)] = HealthFailed(repr(exc))
    return ServiceHealth(state, comps)


class ServiceStartError(AsyncschedError):
    """A component failed to start; what had started was closed again."""


def changed_options(old: Config, new: Config) -> list[tuple[str, str, bool]]:
    """(section, option, mutable) of every option whose value differs between the configs."""
    out: list[tuple[str, str, bool]] = []
    for ini_name, attr in SECTIONS.items():
        before, after = getattr(old, attr), getattr(new, attr)
        for f in dataclasses.fields(before):
            if getattr(before, f.name) != getattr(after, f.name):
                out.append((ini_name, f.name, bool(f.metadata.get("mutable"))))
    return out


def apply_mutable(old: Config, new: Config) -> Config:
    """``old`` with only the reloadable (mutable=True) options taken from ``new``."""
    sections: dict[str, Any] = {}
    for attr in SECTIONS.values():
        before, after = getattr(old, attr), getattr(new, attr)
        updates = {
            f.name: getattr(after, f.name)
            for f in dataclasses.fields(before)
            if f.metadata.get("mutable") and getattr(before, f.name) != getattr(after, f.name)
        }
        sections[attr] = dataclasses.replace(before, **updates) if updates else before
    return Config(**sections)


class Service:
    """Run components under the signal and systemd contract of ``asyncsched serve``."""

    def __init__(
        self,
        config: Config,
        components: Sequence[Component],
        notifier: SystemdNotifier | None = None,
        config_files: ConfigSources | Sequence[str] = (),
        *,
        loader: Callable[[ConfigSources], Config] | None = None,
        freeze_gc: bool = False,
    ) -> None:
        self._config = config
        self._freeze_gc = freeze_gc
        self._components = list(components)
        self._notifier = notifier if notifier is not None else SystemdNotifier(None)
        self._sources = (
            config_files
            if isinstance(config_files, ConfigSources)
            else ConfigSources.of(config_files)
        )
        self._loader = loader if loader is not None else (lambda s: load(s).config)
        self._started: list[Component] = []
        self._state = "new"
        self._stop = asyncio.Event()
        self._force = asyncio.Event()
        self._reload_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._watchdog: asyncio.Task[None] | None = None
        self._health_writer: asyncio.Task[None] | None = None

    # ---------------------------------------------------------------- public API

    @property
    def config(self) -> Config:
        """The configuration in force (reloadable options updated by SIGHUP)."""
        return self._config

    @property
    def state(self) -> str:
        """new, starting, running, stopping, stopped or failed."""
        return self._state

    def health(self) -> ServiceHealth:
        """State of the service and of each component, for a health endpoint or file."""
        return health_snapshot(self._state, self._components)

    def request_stop(self) -> None:
        """Begin a graceful stop (SIGTERM/SIGINT); a second request skips the drain wait."""
        if self._stop.is_set():
            LOG.warning("second stop request: not waiting for in-flight work any longer")
            self._force.set()
        self._stop.set()

    def request_reload(self) -> None:
        """Schedule a reload of the config files (SIGHUP)."""
        if self._state != "running":
            LOG.warning("SIGHUP ignored: service is %s", self._state)
            return
        self._spawn(self.reload())

    async def run(self) -> int:
        """Start, serve until SIGTERM/SIGINT, drain and stop. Returns the exit code."""
        loop = asyncio.get_running_loop()
        installed = self._install_signals(loop)
        loop.set_exception_handler(_log_loop_exception)
        try:
            try:
                await self.start()
            except ServiceStartError as exc:
                LOG.error("start-up failed: %s", exc)
                return 1
            if not self._stop.is_set():
                await self._stop.wait()
            await self.stop()
            return 0
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    async def start(self) -> None:
        """Start the components in order; READY=1 when all are up.

        A stop request during start-up cancels the component being started. On any failure
        the components already started are closed in reverse order and ServiceStartError is
        raised.
        """
        self._state = "starting"
        if self._freeze_gc:
            gc.disable()  # the load builds what lives on: no collection walks it as it grows
        try:
            await self._start_each()
        finally:
            gc.enable()
        if self._stop.is_set():
            return
        self._state = "running"
        names = ", ".join(component_name(c) for c in self._components) or "no components"
        self._notifier.ready(status=f"ready: {names}")
        LOG.info("asyncsched ready (%s)", names)
        interval = self._notifier.watchdog_interval
        if interval is not None:
            self._watchdog = asyncio.create_task(self._ping_watchdog(interval))
        if self._config.asyncsched.health_file:
            self._health_writer = asyncio.create_task(self._write_health_periodically())

    async def _start_each(self) -> None:
        total = len(self._components)
        frozen = not self._freeze_gc
        for index, comp in enumerate(self._components, start=1):
            if self._stop.is_set():
                return
            if not frozen and isinstance(comp, Drainable):  # before the first consumer
                freeze_start_up_heap()
                frozen = True
            self._notifier.status(f"starting {component_name(comp)} ({index}/{total})")
            LOG.info("starting %s (%d/%d)", component_name(comp), index, total)
            starting = asyncio.ensure_future(comp.start())
            stopping = asyncio.ensure_future(self._stop.wait())
            try:
                await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
            if not starting.done():
                await cancel_and_wait(starting, quiet=True)
                LOG.warning("stop requested while starting %s", component_name(comp))
                self._started.append(comp)  # it may hold half-open resources: close it
                return
            exc = starting.exception()
            if exc is not None:
                self._state = "failed"
                self._notifier.status(f"failed to start {component_name(comp)}: {exc}")
                await self._close_all()
                self._notifier.close()
                raise ServiceStartError(f"{component_name(comp)} failed to start: {exc!r}") from exc
            self._started.append(comp)
        if not frozen:
            freeze_start_up_heap()

    async def stop(self) -> None:
        """STOPPING=1, drain in reverse order within drain_timeout, close in reverse order."""
        if self._state == "stopped":
            return
        self._state = "stopping"
        timeout = self._config.asyncsched.drain_timeout
        self._notifier.stopping(status=f"draining in-flight requests (up to {timeout:g} s)")
        LOG.info("stopping: draining for up to %g s", timeout)
        await self._drain_all(timeout)
        self._notifier.status("closing connections")
        await self._close_all()
        for task in (self._watchdog, self._health_writer):
            await cancel_and_wait(task)
        for task in list(self._tasks):
            task.cancel()
        self._state = "stopped"
        self.write_health_file()
        self._notifier.close()
        LOG.info("asyncsched stopped")

    async def reload(self) -> bool:
        """Re-read the config files; apply the reloadable options or keep the old config.

        Returns True when the new configuration was applied.
        """
        async with self._reload_lock:
            self._notifier.reloading()
            LOG.info("SIGHUP: reloading configuration")
            try:
                new = await asyncio.to_thread(self._loader, self._sources)
            except ConfigError as exc:
                LOG.error("reload failed, keeping the running configuration: %s", exc)
                self._notifier.ready(status=f"running; last reload failed: {exc}")
                return False
            except Exception as exc:
                LOG.exception("reload failed, keeping the running configuration: %r", exc)
                self._notifier.ready(status="running; last reload failed")
                return False
            changes = changed_options(self._config, new)
            for section, option, mutable in changes:
                if not mutable:
                    LOG.warning(
                        "[%s] %s changed in the config files but needs a restart; "
                        "keeping the running value",
                        section,
                        option,
                    )
            effective = apply_mutable(self._config, new)
            self._config = effective
            apply_log_level(effective)
            for comp in self._started:
                if isinstance(comp, Reconfigurable):
                    try:
                        result = comp.reconfigure(effective)
                        if inspect.isawaitable(result):
                            await result
                    except Exception:
                        LOG.exception(
                            "%s failed to apply the reloaded configuration", component_name(comp)
                        )
            applied = [f"[{s}] {o}" for s, o, m in changes if m]
            LOG.info(
                "configuration reloaded: %s",
                ", ".join(applied) if applied else "no reloadable option changed",
            )
            self._notifier.ready(status=f"ready; reloaded ({len(applied)} options changed)")
            return True

    # ---------------------------------------------------------------- internals

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> list[int]:
        installed: list[int] = []
        handlers: dict[int, Callable[[], None]] = {
            signal.SIGTERM: self.request_stop,
            signal.SIGINT: self.request_stop,
            signal.SIGHUP: self.request_reload,
        }
        for sig, handler in handlers.items():
            try:
                loop.add_signal_handler(sig, handler)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                LOG.debug("cannot handle signal %s here (not the main thread?)", sig)
        return installed

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ping_watchdog(self, interval: float) -> None:
        """WATCHDOG=1 from the event loop itself: a blocked loop stops the pings."""
        while True:
            self._notifier.watchdog()
            await asyncio.sleep(interval)

    def write_health_file(self) -> None:
        """Atomically replace ``[asyncsched] health_file`` with :meth:`health` as JSON."""
        path = self._config.asyncsched.health_file
        if path:
            _replace_file(path, self._health_json())

    async def _write_health_periodically(self) -> None:
        """The snapshot is taken on the loop; the file is written by a thread, so a slow disk
        never holds the loop (the health file is also how the fuzz and soak runs see it)."""
        while True:
            path = self._config.asyncsched.health_file
            if path:
                await asyncio.to_thread(_replace_file, path, self._health_json())
            await asyncio.sleep(self._config.asyncsched.refresh_interval)

    def _health_json(self) -> str:
        return json.dumps(mask_tree(self.health().as_json()), default=str, sort_keys=True)

    async def _drain_all(self, budget: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        for comp in reversed(self._started):
            if not isinstance(comp, Drainable):
                continue
            remaining = max(0.0, deadline - loop.time())
            draining = asyncio.ensure_future(comp.drain(remaining))
            forced = asyncio.ensure_future(self._force.wait())
            try:
                done, _ = await asyncio.wait(
                    {draining, forced}, timeout=remaining + 0.5, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                forced.cancel()
            if draining in done:
                exc = draining.exception()
                if exc is not None:
                    LOG.error("draining %s failed: %r", component_name(comp), exc)
                continue
            await cancel_and_wait(draining, quiet=True)
            LOG.warning(
                "%s still had work in flight when the drain %s; closing anyway",
                component_name(comp),
                "was cut short" if self._force.is_set() else f"timeout ({budget:g} s) expired",
            )

    async def _close_all(self) -> None:
        while self._started:
            comp = self._started.pop()
            try:
                await asyncio.wait_for(comp.close(), CLOSE_TIMEOUT)
            except TimeoutError:
                LOG.error(
                    "closing %s took longer than %g s; abandoned",
                    component_name(comp),
                    CLOSE_TIMEOUT,
                )
            except Exception as exc:
                LOG.error("closing %s failed: %r", component_name(comp), exc)


def _log_loop_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Unhandled errors in stray tasks are logged (masked, one line), never fatal."""
    exc = context.get("exception")
    LOG.error(
        "unhandled error in the event loop: %s",
        context.get("message", "-"),
        exc_info=exc if isinstance(exc, BaseException) else None,
    )


def _replace_file(path: str, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path``."""
    tmp: str | None = None
    try:
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".health-", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        LOG.warning("cannot write health file %s: %s", path, exc)
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
