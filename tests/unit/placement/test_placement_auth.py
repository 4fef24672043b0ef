"""[placement] auth through keystoneauth1 plugins, against keystoneauth's own fixtures.

A local aiohttp server answers as keystone does (``keystoneauth1.fixture`` discovery documents
and tokens with a catalog); Placement is a small aiohttp stand-in that checks the headers. The
keystone server runs on the test's event loop, so a keystone call made on the loop thread
instead of a worker thread would hang the test.
"""

from __future__ import annotations

import base64
import datetime
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from keystoneauth1 import fixture

from asyncsched.conf import load_string
from asyncsched.conf.options import PlacementOptions
from asyncsched.exceptions import ConfigError, PlacementError
from asyncsched.placement.auth import load_plugin, make_auth
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.query import ResourceRequest

VERSIONS = {"versions": [{"id": "v1.0", "max_version": "1.39", "min_version": "1.0"}]}


class Keystone:
    """Keystone v3 as keystoneauth sees it: discovery, POST /v3/auth/tokens with a catalog."""

    def __init__(self) -> None:
        self.lifetime = datetime.timedelta(hours=1)
        self.issued: list[str] = []
        self.bodies: list[dict[str, Any]] = []
        self.placement_url = ""
        self.server: TestServer | None = None

    def url(self, path: str = "") -> str:
        assert self.server is not None
        return str(self.server.make_url(path))

    async def root(self, request: web.Request) -> web.Response:
        doc = fixture.DiscoveryList(href=self.url("/"), v2=False, v3_id="v3")
        return web.json_response(doc, status=300)

    async def v3(self, request: web.Request) -> web.Response:
        return web.json_response({"version": fixture.V3Discovery(self.url("/v3"))})

    async def tokens(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        ident = body["auth"]["identity"]
        if "password" in ident and ident["password"]["user"].get("password") != "s3cret":
            return web.json_response({"error": {"code": 401, "message": "nope"}}, status=401)
        token = fixture.V3Token(expires=datetime.datetime.now(datetime.UTC) + self.lifetime)
        token.set_project_scope(name="service")
        svc = token.add_service("placement", name="placement")
        svc.add_endpoint("public", "http://public-wrong", region="R1")
        svc.add_endpoint("internal", "http://other-region", region="R2")
        svc.add_endpoint("internal", self.placement_url, region="R1")
        value = f"tok-{len(self.issued) + 1}"
        self.issued.append(value)
        return web.json_response(token, status=201, headers={"X-Subject-Token": value})


class Placement:
    """Answers GET / and /allocation_candidates when the request carries an accepted token."""

    def __init__(self) -> None:
        self.valid: set[str] = set()
        self.accept_any = True
        self.seen: list[dict[str, str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(dict(request.headers))
        token = request.headers.get("X-Auth-Token", "")
        if not self.accept_any and token not in self.valid:
            return web.json_response({"error": "unauthorized"}, status=401)
        if request.path.endswith("allocation_candidates"):
            return web.json_response({"allocation_requests": [], "provider_summaries": {}})
        return web.json_response(VERSIONS)


@pytest.fixture
async def peers() -> AsyncIterator[tuple[Keystone, Placement]]:
    ks, pl = Keystone(), Placement()
    papp = web.Application()
    papp.router.add_get("/placement/", pl.handle)
    papp.router.add_get("/placement/allocation_candidates", pl.handle)
    psrv = TestServer(papp, host="127.0.0.1")
    await psrv.start_server()
    kapp = web.Application()
    kapp.router.add_get("/", ks.root)
    kapp.router.add_get("/v3", ks.v3)
    kapp.router.add_post("/v3/auth/tokens", ks.tokens)
    ksrv = TestServer(kapp, host="127.0.0.1")
    await ksrv.start_server()
    ks.server = ksrv
    ks.placement_url = str(psrv.make_url("/placement"))
    yield ks, pl
    await ksrv.close()
    await psrv.close()


def placement_options(text: str) -> PlacementOptions:
    return load_string("[placement]\n" + text).placement


async def test_generic_password_discovers_v3_finds_endpoint_and_renews_after_401(
    peers: tuple[Keystone, Placement],
) -> None:
    ks, pl = peers
    opts = placement_options(
        f"auth_type = password\nauth_url = {ks.url('/')}\nusername = nova\npassword = s3cret\n"
        "user_domain_name = Default\nproject_name = service\nproject_domain_name = Default\n"
        "region_name = R1\nvalid_interfaces = internal,public\n"
    )
    async with PlacementClient(opts) as client:
        assert client.endpoint == ks.placement_url  # internal before public, region R1
        scope = ks.bodies[0]["auth"]["scope"]
        assert scope == {"project": {"name": "service", "domain": {"name": "Default"}}}
        await client.get_allocation_candidates(ResourceRequest())
        assert ks.issued == ["tok-1"]  # cached across calls
        pl.accept_any = False
        pl.valid = {"tok-2"}  # tok-1 revoked: one 401, one re-authentication, success
        await client.get_allocation_candidates(ResourceRequest())
        assert ks.issued == ["tok-1", "tok-2"]
        assert pl.seen[-1]["X-Auth-Token"] == "tok-2"
        pl.valid = set()  # a second 401 in a row is an error, not a loop
        with pytest.raises(PlacementError, match="HTTP 401"):
            await client.get_allocation_candidates(ResourceRequest())
        assert ks.issued == ["tok-1", "tok-2", "tok-3"]


async def test_admin_token_with_endpoint_as_nova_scheduler_serves(
    peers: tuple[Keystone, Placement],
) -> None:
    ks, pl = peers
    opts = placement_options(
        f"auth_type = admin_token\nendpoint = {ks.placement_url}\ntoken = the-admin-token\n"
    )
    assert opts.plugin_options == (("endpoint", ks.placement_url), ("token", "the-admin-token"))
    async with PlacementClient(opts) as client:
        assert client.endpoint == ks.placement_url
        await client.get_allocation_candidates(ResourceRequest())
    assert {h["X-Auth-Token"] for h in pl.seen} == {"the-admin-token"}
    assert ks.bodies == []  # no keystone involved


async def test_renewed_when_the_token_is_about_to_expire(
    peers: tuple[Keystone, Placement],
) -> None:
    ks, _ = peers
    ks.lifetime = datetime.timedelta(seconds=30)  # inside keystoneauth's 120 s minimum life
    opts = placement_options(
        f"auth_type = v3applicationcredential\nauth_url = {ks.url('/v3')}\n"
        "application_credential_id = ac-1\napplication_credential_secret = very-secret\n"
        f"endpoint_override = {ks.placement_url}\n"
    )
    async with PlacementClient(opts) as client:
        await client.get_allocation_candidates(ResourceRequest())
        await client.get_allocation_candidates(ResourceRequest())
    assert ks.bodies[0]["auth"]["identity"] == {
        "methods": ["application_credential"],
        "application_credential": {"id": "ac-1", "secret": "very-secret"},
    }
    assert len(ks.issued) == 3  # start + each call: never sent a token about to expire


async def test_v3totp_sends_the_passcode(peers: tuple[Keystone, Placement]) -> None:
    ks, pl = peers
    opts = placement_options(
        f"auth_type = v3totp\nauth_url = {ks.url('/v3')}\nuser_id = u1\npasscode = 123456\n"
        "project_id = p1\nregion_name = R1\n"
    )
    async with PlacementClient(opts) as client:
        assert client.endpoint == ks.placement_url  # internal first, in R1
    assert ks.bodies[0]["auth"]["identity"]["totp"]["user"] == {"id": "u1", "passcode": "123456"}
    assert pl.seen[0]["X-Auth-Token"] == "tok-1"


async def test_http_basic(peers: tuple[Keystone, Placement]) -> None:
    ks, pl = peers
    opts = placement_options(
        f"auth_type = http_basic\nendpoint = {ks.placement_url}\nusername = a\npassword = b\n"
    )
    async with PlacementClient(opts):
        pass
    assert pl.seen[0]["Authorization"] == "Basic " + base64.b64encode(b"a:b").decode()


async def test_none_sends_the_noauth_token(peers: tuple[Keystone, Placement]) -> None:
    _, pl = peers
    for text in (
        f"auth_type = none\nendpoint_override = {peers[0].placement_url}\n",
        f"auth_type = noauth\nendpoint = {peers[0].placement_url}\n",
    ):
        async with PlacementClient(placement_options(text), noauth_token="admin"):
            pass
    assert [h["X-Auth-Token"] for h in pl.seen] == ["admin", "admin"]


async def test_wrong_password_is_an_error_without_the_password(
    peers: tuple[Keystone, Placement], caplog: pytest.LogCaptureFixture
) -> None:
    ks, _ = peers
    opts = placement_options(
        f"auth_type = v3password\nauth_url = {ks.url('/v3')}\nusername = nova\n"
        "password = WRONG-pw\nuser_domain_id = default\n"
    )
    client = PlacementClient(opts)
    with caplog.at_level(logging.DEBUG), pytest.raises(PlacementError) as err:
        await client.start()
    await client.close()
    assert "Unauthorized" in str(err.value)
    assert "WRONG-pw" not in str(err.value) and "WRONG-pw" not in caplog.text


def test_unknown_plugin_and_missing_options_are_config_errors() -> None:
    with pytest.raises(
        ConfigError, match=r"no keystoneauth plugin of that name; closest installed: v3totp, "
    ):
        make_auth(placement_options("auth_type = v3tot\n"))
    with pytest.raises(ConfigError, match=r"v3password: missing required option\(s\) auth_url"):
        make_auth(placement_options("auth_type = v3password\nuser_id = u\npassword = p\n"))
    with pytest.raises(ConfigError, match=r"endpoint_override \(or endpoint\) is required"):
        make_auth(placement_options("auth_type = none\n"))
    # Every plugin nova's docs name loads from [placement] keys without touching the network.
    for text in (
        "auth_type = token\nauth_url = http://k/v3\ntoken = t\n",
        "auth_type = v3token\nauth_url = http://k/v3\ntoken = t\n",
        "auth_type = v3oidcpassword\nauth_url = http://k/v3\nidentity_provider = idp\n"
        "protocol = openid\nclient_id = c\nclient_secret = s\nusername = u\npassword = p\n"
        "discovery_endpoint = http://idp/.well-known/openid-configuration\n",
        "auth_type = v3oidcaccesstoken\nauth_url = http://k/v3\nidentity_provider = idp\n"
        "protocol = openid\naccess_token = at\n",
    ):
        assert load_plugin(placement_options(text)) is not None


def test_plugin_options_are_masked_when_secret() -> None:
    from asyncsched.conf.render import render_effective

    config = load_string("[placement]\nauth_type = admin_token\nendpoint = http://p\ntoken = T0K\n")
    text = render_effective(config)
    assert "endpoint = http://p" in text and "token = ***" in text and "T0K" not in text


THIRD_PARTY = """
from keystoneauth1 import loading, plugin


class SiteToken(plugin.BaseAuthPlugin):
    def __init__(self, endpoint, site_secret):
        super().__init__()
        self.endpoint = endpoint
        self.site_secret = site_secret
        self.calls = 0

    def get_headers(self, session, **kwargs):
        self.calls += 1
        return {"X-Auth-Token": f"{self.site_secret}-{self.calls}"}

    def get_endpoint(self, session, **kwargs):
        return self.endpoint


class SiteTokenLoader(loading.BaseLoader):
    @property
    def plugin_class(self):
        return SiteToken

    def get_options(self):
        return [
            loading.Opt("endpoint", required=True),
            loading.Opt("site-secret", secret=True, required=True),
        ]
"""


async def test_a_third_party_entry_point_plugin(
    peers: tuple[Keystone, Placement], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin installed as a keystoneauth1.plugin entry point, like any site plugin; one we
    know nothing about is asked for headers on every request (in the worker thread)."""
    ks, pl = peers
    (tmp_path / "sitetoken.py").write_text(THIRD_PARTY)
    dist = tmp_path / "sitetoken-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sitetoken\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[keystoneauth1.plugin]\nsitetoken = sitetoken:SiteTokenLoader\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # stevedore remembers the entry points it scanned; forget them for this test only
    from stevedore import ExtensionManager

    monkeypatch.delitem(ExtensionManager.ENTRY_POINT_CACHE, "keystoneauth1.plugin", raising=False)
    opts = placement_options(
        f"auth_type = sitetoken\nendpoint = {ks.placement_url}\nsite_secret = s3\n"
    )
    async with PlacementClient(opts) as client:
        await client.get_allocation_candidates(ResourceRequest())
    assert [h["X-Auth-Token"] for h in pl.seen] == ["s3-1", "s3-2"]


async def test_auth_section_reads_the_plugin_from_another_section(
    peers: tuple[Keystone, Placement],
) -> None:
    """``[placement] auth_section = keystone_authtoken``: auth_type and credentials there (with
    keystonemiddleware's own keys beside them), region and interfaces from [placement]."""
    ks, _ = peers
    config = load_string(
        "[placement]\nauth_section = keystone_authtoken\nregion_name = R1\n"
        "valid_interfaces = internal\n"
        f"[keystone_authtoken]\nauth_type = password\nauth_url = {ks.url('/')}\n"
        "username = nova\npassword = s3cret\nuser_domain_name = Default\n"
        "project_name = service\nproject_domain_name = Default\n"
        "www_authenticate_uri = http://keystone:5000\nmemcached_servers = 127.0.0.1:11211\n"
        "region_name = R2\n"
    )
    opts = config.placement
    assert (opts.auth_type, opts.username, opts.region_name) == ("password", "nova", "R1")
    async with PlacementClient(opts) as client:
        assert client.endpoint == ks.placement_url  # R1 internal, not keystone_authtoken's R2
    assert ks.issued == ["tok-1"]
    with pytest.raises(ConfigError, match=r"auth_section = 'nowhere': no section \[nowhere\]"):
        load_string("[placement]\nauth_section = nowhere\n")
