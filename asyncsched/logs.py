"""Logging: one line per event, request ids on every line, secrets never written.

- :func:`request_context` binds ``request_id`` / ``global_request_id`` in a contextvar; every
  line logged while it is active (in that task and the tasks it creates) carries them, like
  oslo.log's ``[req-... greq-...]`` prefix. The RPC layer wraps each call in it.
- :class:`OneLineFormatter` folds tracebacks and multi-line messages into one line (journald
  and log shippers then keep an event together) and masks secrets in the final text: the
  ``_context_auth_token`` of a message, passwords in URLs, ``password=...`` pairs.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import queue
import sys
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TextIO

from asyncsched.conf.options import Config
from asyncsched.conf.redact import mask_secrets

LOG_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s [%(request_ids)s] %(message)s"
ROOT_LOGGER = "asyncsched"


@dataclass(frozen=True, slots=True)
class RequestIds:
    """The ids of the request being handled; either may be unknown."""

    request_id: str | None = None
    global_request_id: str | None = None

    def render(self) -> str:
        parts = [self.request_id or "-"]
        if self.global_request_id:
            parts.append(self.global_request_id)
        return " ".join(parts)


_current: ContextVar[RequestIds | None] = ContextVar("asyncsched_request_ids", default=None)


@contextlib.contextmanager
def request_context(
    request_id: str | None, global_request_id: str | None = None
) -> Iterator[RequestIds]:
    """Tag every log line emitted inside the block with these request ids."""
    ids = RequestIds(request_id, global_request_id)
    token = _current.set(ids)
    try:
        yield ids
    finally:
        _current.reset(token)


def ids_from_context(context: Mapping[str, Any]) -> RequestIds:
    """Request ids from an oslo message context, with or without the ``_context_`` prefix."""

    def pick(key: str) -> str | None:
        value = context.get(f"_context_{key}", context.get(key))
        return value if isinstance(value, str) and value else None

    return RequestIds(pick("request_id"), pick("global_request_id"))


@contextlib.contextmanager
def request_context_from(context: Mapping[str, Any]) -> Iterator[RequestIds]:
    """:func:`request_context` with the ids of an oslo message context (RPC layer helper)."""
    ids = ids_from_context(context)
    with request_context(ids.request_id, ids.global_request_id) as bound:
        yield bound


def current_request_ids() -> RequestIds | None:
    """The ids bound by the innermost active :func:`request_context`, if any."""
    return _current.get()


class RequestContextFilter(logging.Filter):
    """Puts ``record.request_ids`` on every record (``-`` outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = _current.get()
        record.request_ids = ids.render() if ids is not None else "-"
        return True


class OneLineFormatter(logging.Formatter):
    """Format, fold to one line, then mask secrets in the whole line (args and tracebacks too)."""

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "request_ids"):
            RequestContextFilter().filter(record)
        text = super().format(record)
        return mask_secrets(text.rstrip("\n").replace("\r", "").replace("\n", " | "))


def log_level(config: Config) -> int:
    """``[DEFAULT] debug = true`` wins over ``[asyncsched] log_level``."""
    if config.default.debug:
        return logging.DEBUG
    return logging.getLevelName(config.asyncsched.log_level)  # type: ignore[no-any-return]


class BackgroundHandler(logging.handlers.QueueHandler):
    """Lines formatted where they are logged (request ids, masking), written by a thread.

    The daemon logs from its event loop; a file write that waits on a busy disk, or a full
    journald pipe, would hold the loop (and every call) for that long. The listener thread
    writes instead; :meth:`close` writes what is queued, then stops it.
    """

    def __init__(self, writer: logging.Handler) -> None:
        self._queue: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        super().__init__(self._queue)
        writer.setFormatter(logging.Formatter("%(message)s"))  # the line is made already
        self.writer = writer
        self._listener = logging.handlers.QueueListener(self._queue, writer)
        self._listener.start()

    def close(self) -> None:
        listener, self._listener = self._listener, None  # type: ignore[assignment]
        if listener is not None:
            listener.stop()  # drains the queue first
            self.writer.close()
        super().close()


def setup_logging(
    config: Config, stream: TextIO | None = None, *, background: bool = False
) -> logging.Handler:
    """Configure the root logger once at start: one handler, our formatter and filters.

    Logs go to ``[DEFAULT] log_file`` if set (reopened when logrotate moves it), else to
    stderr (journald under systemd). With ``background`` (the daemon) a thread writes them
    (:class:`BackgroundHandler`). Returns the handler (tests inspect or remove it; close it
    at exit so queued lines are written).
    """
    handler: logging.Handler
    if config.default.log_file:
        handler = logging.handlers.WatchedFileHandler(config.default.log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    if background:
        handler = BackgroundHandler(handler)
    handler.setFormatter(OneLineFormatter(LOG_FORMAT))
    handler.addFilter(RequestContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_asyncsched", False):
            root.removeHandler(old)
            old.close()
    setattr(handler, "_asyncsched", True)  # noqa: B010 (marks the handler we own)
    root.addHandler(handler)
    apply_log_level(config)
    return handler


def apply_log_level(config: Config) -> None:
    """Set the level from the config; called at start and on SIGHUP."""
    logging.getLogger().setLevel(log_level(config))
    # Third-party chatter stays at WARNING unless we debug.
    for noisy in ("aio_pika", "aiormq", "asyncio"):
        logging.getLogger(noisy).setLevel(
            logging.DEBUG if config.default.debug else logging.WARNING
        )
    # aiormq logs an ERROR for every failed connection attempt, several a second while a broker
    # is away; rpc.broker.BrokerLink reports those attempts itself, sparsely.
    logging.getLogger("aiormq.connection").setLevel(
        logging.DEBUG if config.default.debug else logging.CRITICAL
    )
