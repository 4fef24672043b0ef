"""Logging: request ids on every line, one line per event, secrets never written."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from asyncsched.conf import load_string
from asyncsched.conf.options import Config
from asyncsched.logs import apply_log_level, current_request_ids, request_context, setup_logging


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """Install our handler on the root logger for the test, then restore the root logger."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    buf = io.StringIO()
    handler = setup_logging(Config(), stream=buf)
    try:
        yield buf
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(level)
        assert root.handlers == handlers


def lines(buf: io.StringIO) -> list[str]:
    return buf.getvalue().splitlines()


def test_request_ids_on_every_line_inside_the_context(stream: io.StringIO) -> None:
    log = logging.getLogger("asyncsched.test")
    log.info("before")
    with request_context("req-1111", "req-gggg"):
        log.info("selecting hosts")
        log.warning("no host in az")
    log.info("after")
    out = lines(stream)
    assert len(out) == 4
    assert "[-] before" in out[0]
    assert "[req-1111 req-gggg] selecting hosts" in out[1]
    assert "WARNING asyncsched.test [req-1111 req-gggg] no host in az" in out[2]
    assert "[-] after" in out[3]
    assert current_request_ids() is None


async def test_request_ids_follow_tasks_and_do_not_leak_between_requests(
    stream: io.StringIO,
) -> None:
    log = logging.getLogger("asyncsched.test")

    async def handle(rid: str) -> None:
        with request_context(rid):
            await asyncio.sleep(0)
            await asyncio.create_task(asyncio.to_thread(lambda: None))
            log.info("handled %s", rid)
            child = asyncio.create_task(asyncio.sleep(0, result=current_request_ids()))
            assert (await child) is not None

    await asyncio.gather(*(handle(f"req-{i}") for i in range(5)))
    for line in lines(stream):
        rid = line.rsplit("handled ", 1)[1]
        assert f"[{rid}] handled {rid}" in line


def test_secrets_never_reach_the_log(stream: io.StringIO) -> None:
    log = logging.getLogger("asyncsched.rpc")
    ctx = {"_context_auth_token": "gAAAAABsecrettoken", "_context_request_id": "req-1"}
    log.info("message context %s", ctx)
    log.info("connecting to %s", "rabbit://nova:RabbitPw@mq1:5672,nova:RabbitPw@mq2:5672/")
    log.warning("db url postgresql+psycopg2://nova:DbPw@db/nova failed")
    log.info("auth: password=Hunter2 user=nova")
    try:
        raise ValueError({"auth_token": "tok-in-exception"})
    except ValueError:
        log.exception("handling failed")
    text = stream.getvalue()
    for secret in ("gAAAAABsecrettoken", "RabbitPw", "DbPw", "Hunter2", "tok-in-exception"):
        assert secret not in text
    assert "'_context_request_id': 'req-1'" in text  # the rest stays readable


def test_one_line_per_event_even_with_a_traceback(stream: io.StringIO) -> None:
    log = logging.getLogger("asyncsched.test")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed\nsecond line")
    out = lines(stream)
    assert len(out) == 1
    assert "failed | second line | Traceback" in out[0]
    assert "RuntimeError: boom" in out[0]


def test_levels_from_config_and_reload(stream: io.StringIO) -> None:
    log = logging.getLogger("asyncsched.test")
    log.debug("hidden at INFO")
    apply_log_level(load_string("[DEFAULT]\ndebug = true\n"))
    log.debug("shown with debug")
    apply_log_level(load_string("[asyncsched]\nlog_level = ERROR\n"))
    log.warning("hidden at ERROR")
    log.error("shown at ERROR")
    out = stream.getvalue()
    assert "hidden" not in out
    assert "shown with debug" in out and "shown at ERROR" in out


def test_log_file(tmp_path: Path) -> None:
    root = logging.getLogger()
    level = root.level
    cfg = Config()
    path = tmp_path / "asyncsched.log"
    cfg = dataclasses.replace(cfg, default=dataclasses.replace(cfg.default, log_file=str(path)))
    handler = setup_logging(cfg)
    try:
        logging.getLogger("asyncsched.test").info("to the file password=abc")
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(level)
    text = path.read_text()
    assert "to the file password=***" in text


def test_request_context_from_an_oslo_message_context(stream: io.StringIO) -> None:
    from asyncsched.logs import ids_from_context, request_context_from

    ctx = {
        "_context_request_id": "req-aaaa",
        "_context_global_request_id": "req-gggg",
        "_context_auth_token": "gAAAAtoken",
    }
    with request_context_from(ctx):
        logging.getLogger("asyncsched.rpc").info("select_destinations for %s", ctx)
    line = lines(stream)[0]
    assert "[req-aaaa req-gggg] select_destinations" in line
    assert "gAAAAtoken" not in line
    assert ids_from_context({"request_id": "req-b", "global_request_id": None}).render() == "req-b"
    assert ids_from_context({}).render() == "-"


def test_the_daemons_lines_are_written_by_a_thread_the_same_as_inline() -> None:
    """serve logs through BackgroundHandler: the line (ids, one line, masked) is made where it
    is logged, the write happens on the listener thread, and close() writes what is queued."""
    import threading

    from asyncsched.logs import BackgroundHandler

    class Recording(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.writers: set[str] = set()

        def write(self, s: str) -> int:
            self.writers.add(threading.current_thread().name)
            return super().write(s)

    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    buf = Recording()
    handler = setup_logging(Config(), stream=buf, background=True)
    assert isinstance(handler, BackgroundHandler)
    try:
        log = logging.getLogger("asyncsched.test")
        with request_context("req-bg"):
            log.info("to rabbit://guest:s3cret@h:5672/ and\nbeyond")
            try:
                raise ValueError("boom")
            except ValueError:
                log.exception("failed")
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(level)
    assert root.handlers == handlers
    got = lines(buf)
    assert len(got) == 2, got
    assert "[req-bg]" in got[0] and "s3cret" not in got[0] and " | beyond" in got[0]
    assert "[req-bg]" in got[1] and "ValueError: boom" in got[1]
    assert threading.current_thread().name not in buf.writers  # written off the caller
