"""``asyncsched explain`` / ``capacity``: flags -> HTTP -> readable text, against a live app."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from asyncsched.cli import main
from tests.support.explain_stack import explain_manager, serve_explain


@pytest.fixture
def url() -> Iterator[str]:
    """The explain routes served from a thread of their own (the CLI runs its own loop)."""
    mgr, _ = explain_manager(ram_step_mb=1024)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, web.AppRunner | str] = {}

    async def up() -> None:
        box["runner"], box["url"] = await serve_explain(mgr)
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(up(), loop)
    assert ready.wait(10)
    try:
        url = box["url"]
        assert isinstance(url, str)
        yield url
    finally:
        runner = box["runner"]
        assert isinstance(runner, web.AppRunner)
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def test_explain_prints_the_funnel_the_ranking_and_the_named_host(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["explain", "--url", url, "--vcpus", "1", "--ram", "1024", "--disk", "10",
               "--host", "cmp1"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    assert "host cmp1: rejected by ComputeFilter (disabled)" in out
    assert "had it passed, the weighers would have given it: " in out
    assert "ComputeFilter" in out and "-1 (disabled 1)" in out
    assert "select_destinations would return:" in out and "cmp0" in out
    rc = main(["explain", "--url", url, "--ram", "1024", "--json", "--hint", "a=b"])
    answer = json.loads(capsys.readouterr().out)
    assert rc == 0 and answer["selections"][0]["host"] == "cmp0" and answer["claimed"] is False


def test_capacity_prints_counts_and_what_runs_out(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["capacity", "--url", url, "--ram", "1024", "--disk", "10",
               "--extra-spec", "quota:x=1"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    assert "16 more instances fit, on 2 of 3 hosts" in out
    assert "runs out first: Placement: MEMORY_MB" in out
    assert "hosts taking none: ComputeFilter: disabled 1" in out
    assert main(["capacity", "--url", url, "--ram", "1024", "--disk", "10", "--host", "cmp0"]) == 0
    assert "host cmp0: 8 more" in capsys.readouterr().out
    assert main(["capacity", "--url", url, "--ram", "1024", "--disk", "10", "--host", "cmp1"]) == 0
    assert "host cmp1: 0 more (explain --host says why)" in capsys.readouterr().out


def test_unreachable_endpoint_and_bad_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["capacity", "--url", "http://127.0.0.1:9"]) == 1
    assert "cannot reach http://127.0.0.1:9" in capsys.readouterr().err
    missing = str(tmp_path / "none")
    assert main(["explain", "--url", "http://127.0.0.1:9", "--token-file", missing]) == 1
    with pytest.raises(SystemExit):
        main(["explain", "--hint", "novalue"])
