"""The admin endpoint facing a hostile network (issue #21 item 4) and bounded dry runs (item 5).

Over real sockets: raw HTTP bytes for headers aiohttp's client would not send, a self-signed
certificate made with the openssl CLI for TLS, a client that hangs up mid-run.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import ssl
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from asyncsched.admin import explain_api
from asyncsched.admin.explain_api import ExplainAPI
from asyncsched.admin.readiness import ReadyLimits
from asyncsched.admin.report import capacity_text
from asyncsched.admin.server import AdminServer, check_exposure, tls_context, token_matches
from asyncsched.cli import EX_CONFIG, main
from asyncsched.common.health import ServiceHealth
from asyncsched.conf.listen import ListenAddress, parse_listen
from asyncsched.exceptions import ConfigError
from asyncsched.scheduling.capacity import capacity as REAL_CAPACITY
from asyncsched.scheduling.manager import SchedulerManager
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import NOW, config, host

TOKEN = "s3cret-t0ken"


def server(listen: ListenAddress, token: str | None = TOKEN, **kw: Any) -> AdminServer:
    return AdminServer(
        listen,
        health=lambda: ServiceHealth("running", {}),
        limits=ReadyLimits(max_state_age=30.0),
        registry=CollectorRegistry(),
        token=token,
        **kw,
    )


# ---------------------------------------------------------------- where it may listen


@pytest.mark.parametrize(
    "listen", ["0.0.0.0:9105", ":9105", "[::]:9105", "10.1.2.3:9105", "admin.example:9105"]
)
def test_a_non_loopback_endpoint_without_a_token_is_refused(listen: str) -> None:
    with pytest.raises(ConfigError, match="admin_token_file"):
        server(parse_listen(listen), token=None)


def test_the_empty_host_means_every_address_not_loopback() -> None:
    assert parse_listen(":9105").host == "0.0.0.0"
    assert "every address" not in (check_exposure(parse_listen(":9105"), TOKEN, True) or "")
    warning = check_exposure(parse_listen(":9105"), TOKEN, False)
    assert warning is not None and "in clear" in warning


@pytest.mark.parametrize(
    "listen", ["127.0.0.1:9105", "[::1]:9105", "localhost:9105", "127.9.9.9:1"]
)
def test_loopback_without_a_token_starts_with_a_warning(listen: str) -> None:
    warning = check_exposure(parse_listen(listen), None, False)
    assert warning is not None and "open to every local user" in warning
    assert check_exposure(parse_listen(listen), TOKEN, False) is None


async def test_the_open_endpoint_warns_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    admin = server(ListenAddress("127.0.0.1", 0), token=None)
    with caplog.at_level(logging.WARNING, logger="asyncsched.admin.server"):
        await admin.start()
        await admin.close()
    assert any("open to every local user" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- malformed headers


async def raw_request(
    port: int, header_lines: list[bytes], tls: ssl.SSLContext | None = None
) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=tls)
    head = b"GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    writer.write(head + b"".join(line + b"\r\n" for line in header_lines) + b"\r\n")
    await writer.drain()
    data = await reader.read()
    writer.close()
    status = int(data.split(b" ", 2)[1])
    return status, data


@pytest.fixture
async def guarded() -> AsyncIterator[int]:
    admin = server(ListenAddress("127.0.0.1", 0))
    await admin.start()
    assert admin.port is not None
    try:
        yield admin.port
    finally:
        await admin.close()


@pytest.mark.parametrize(
    "header",
    [
        b"Authorization: Bearer \xff\xfe\xfd",  # not UTF-8 (the issue's 500)
        "Authorization: Bearer ключ-токен".encode(),  # UTF-8, not latin-1
        b"Authorization: Bearer s3cret-t0ken\xff",
        b"Authorization: Basic czNjcmV0LXQwa2Vu",
        b"Authorization: s3cret-t0ken",
        b"Authorization: Bearer",
        b"Authorization: Bearer " + b"A" * 60000,  # huge, still under the line limit
        b"Authorization: Bearer x\r\nAuthorization: Bearer s3cret-t0ken",  # two: which one?
        b"Authorization: Bearer s3cret-t0ken\r\nAuthorization: Bearer s3cret-t0ken",
    ],
)
async def test_a_malformed_authorization_gets_401(guarded: int, header: bytes) -> None:
    status, data = await raw_request(guarded, [header])
    assert status == 401, data[:200]
    assert b"Traceback" not in data


@pytest.mark.parametrize(
    "header",
    [
        b"Authorization: Bearer " + b"A" * 200_000,  # past the 64 KiB line limit
        b"Authorization: \x00\x01",  # bytes HTTP forbids in a header
    ],
)
async def test_bad_http_is_refused_by_the_parser_without_a_500(guarded: int, header: bytes) -> None:
    status, data = await raw_request(guarded, [header])
    assert 400 <= status < 500 and b"Traceback" not in data


async def test_the_right_token_still_opens(guarded: int) -> None:
    status, _ = await raw_request(guarded, [b"Authorization: Bearer " + TOKEN.encode()])
    assert status == 200


def test_token_comparison_is_a_yes_or_no_for_any_input() -> None:
    token = TOKEN.encode()
    assert token_matches(f"Bearer {TOKEN}", token)
    assert token_matches(f"bearer  {TOKEN} ", token)
    for header in (
        "",
        "Bearer",
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        "Bearer \udcff",
        "x" * 10**6,
    ):
        assert not token_matches(header, token)


# ---------------------------------------------------------------- TLS


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[str, str]:
    openssl = shutil.which("openssl")
    assert openssl is not None, "the openssl CLI makes the test certificate"
    cert, key = tmp_path / "admin.crt", tmp_path / "admin.key"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return str(cert), str(key)


async def test_tls_serves_https_with_the_configured_certificate(
    self_signed: tuple[str, str],
) -> None:
    cert, key = self_signed
    admin = server(ListenAddress("127.0.0.1", 0), tls=tls_context(cert, key))
    await admin.start()
    try:
        client = ssl.create_default_context(cafile=cert)
        url = f"https://127.0.0.1:{admin.port}/v1/status"
        async with aiohttp.ClientSession() as s:
            async with s.get(url, ssl=client, headers={"Authorization": f"Bearer {TOKEN}"}) as r:
                assert r.status == 200 and (await r.json())["state"] == "running"
            with pytest.raises(aiohttp.ClientError):  # plain HTTP is not spoken
                async with s.get(f"http://127.0.0.1:{admin.port}/healthz") as r:
                    await r.read()
        assert admin.health()["tls"] is True
    finally:
        await admin.close()


def test_tls_options_go_together_and_must_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="go together"):
        tls_context(str(tmp_path / "c.pem"), None)
    (tmp_path / "c.pem").write_text("not a certificate")
    with pytest.raises(ConfigError, match="admin_cert_file"):
        tls_context(str(tmp_path / "c.pem"), str(tmp_path / "c.pem"))
    assert tls_context(None, None) is None


# ---------------------------------------------------------------- bounded dry runs


class Gate:
    """A capacity run that holds until released, and notes a cancellation."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = 0

    async def __call__(self, *args: Any, **kw: Any) -> Any:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return await REAL_CAPACITY(*args, **kw)


@pytest.fixture
def options() -> dict[str, Any]:
    return {"capacity_max_instances": 500}


@pytest.fixture
async def dry_runs(options: dict[str, Any]) -> AsyncIterator[tuple[str, ExplainAPI]]:
    hosts = [host(f"cmp{i}") for i in range(3)]
    conf = config(asyncsched=options)
    mgr = SchedulerManager(conf, FakeCache(hosts), FakePlacement(hosts), clock=lambda: NOW)
    api = ExplainAPI(mgr)
    admin = server(ListenAddress("127.0.0.1", 0), token=None, extra_routes=api.routes())
    await admin.start()
    try:
        yield f"http://127.0.0.1:{admin.port}", api
    finally:
        await admin.close()


async def test_the_issue_s_unbounded_capacity_is_answered_bounded(
    dry_runs: tuple[str, ExplainAPI],
) -> None:
    url, api = dry_runs
    async with aiohttp.ClientSession() as s, s.get(f"{url}/v1/capacity?vcpus=0&ram=1&disk=0") as r:
        assert r.status == 200
        out = await r.json()
    assert out["total"] == 500 and "capacity_max_instances" in out["bounded"]
    assert api.stats["bounded"] == 1
    assert "at least 500 more instances fit" in capacity_text(out, "tiny")


async def gated_run(
    s: aiohttp.ClientSession, url: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Gate, asyncio.Task[aiohttp.ClientResponse]]:
    """A capacity request whose run has started and holds at the gate."""
    gate = Gate()
    monkeypatch.setattr(explain_api, "capacity", gate)
    running = asyncio.create_task(s.get(f"{url}/v1/capacity?ram=512"))
    await asyncio.wait_for(gate.started.wait(), 10)
    return gate, running


async def test_a_second_run_while_one_runs_gets_429(
    dry_runs: tuple[str, ExplainAPI], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, api = dry_runs
    async with aiohttp.ClientSession() as s:
        gate, first = await gated_run(s, url, monkeypatch)
        async with s.post(f"{url}/v1/explain", json={"ram": 512}) as r:
            assert r.status == 429 and r.headers["Retry-After"] == "1"
            assert "another dry run" in (await r.json())["error"]
        gate.release.set()
        async with await first as r:
            assert r.status == 200 and (await r.json())["total"] > 0
    assert api.stats["busy"] == 1 and api.stats["answered"] == 1


async def test_a_client_that_goes_away_cancels_its_run(
    dry_runs: tuple[str, ExplainAPI], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, api = dry_runs
    async with aiohttp.ClientSession() as s:
        gate, hanging = await gated_run(s, url, monkeypatch)
        hanging.cancel()  # the client hangs up
        with pytest.raises(asyncio.CancelledError):
            await hanging
    for _ in range(200):
        if api.stats["cancelled"]:
            break
        await asyncio.sleep(0.01)
    assert gate.cancelled == 1 and api.stats["cancelled"] == 1
    gate.release.set()
    async with aiohttp.ClientSession() as s, s.get(f"{url}/v1/capacity?ram=512") as r:
        assert r.status == 200  # the slot was given back


@pytest.mark.parametrize("options", [{"admin_dry_run_timeout": 0.1}])
@pytest.mark.parametrize("what", ["capacity", "explain"])
async def test_a_run_past_the_deadline_is_answered_503(
    dry_runs: tuple[str, ExplainAPI], monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    url, api = dry_runs
    monkeypatch.setattr(explain_api, what, Gate())  # never released
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{url}/v1/{what}", json={"ram": 512}) as r:
            assert r.status == 503 and "admin_dry_run_timeout" in (await r.json())["error"]
    assert api.stats["timed_out"] == 1


@pytest.mark.parametrize("command", ["serve", "check-config"])
@pytest.mark.parametrize("listen", [":9105", "0.0.0.0:9105"])
def test_serve_refuses_an_exposed_endpoint_without_a_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], listen: str, command: str
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(
        "[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:1/\n"
        "[api_database]\nconnection = postgresql://nova@127.0.0.1:1/nova_api\n"
        "[placement]\nauth_type = none\nendpoint_override = http://127.0.0.1:1\n"
        f"[asyncsched]\nadmin_listen = {listen}\n"
    )
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        assert main([command, "--config-file", str(conf)]) == EX_CONFIG
    finally:  # serve installs its log handler before it builds the daemon: take it out
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)
    err = capsys.readouterr().err
    assert "configuration error" in err and "admin_token_file" in err


def test_the_cli_reaches_an_https_endpoint_with_its_ca_file(
    self_signed: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, key = self_signed
    hosts = [host(f"cmp{i}") for i in range(2)]
    mgr = SchedulerManager(config(), FakeCache(hosts), FakePlacement(hosts), clock=lambda: NOW)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    admin = server(
        ListenAddress("127.0.0.1", 0),
        tls=tls_context(cert, key),
        extra_routes=ExplainAPI(mgr).routes(),
    )
    asyncio.run_coroutine_threadsafe(admin.start(), loop).result(10)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    try:
        url = f"https://127.0.0.1:{admin.port}"
        args = ["capacity", "--url", url, "--token-file", str(token_file), "--ram", "512"]
        assert main(args) == 1  # the self-signed certificate is not trusted by default
        assert "cannot reach" in capsys.readouterr().err
        assert main([*args, "--ca-file", cert]) == 0
        assert "more instances fit" in capsys.readouterr().out
    finally:
        asyncio.run_coroutine_threadsafe(admin.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
