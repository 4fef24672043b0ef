"""[placement] auth against the REAL keystone and the REAL Placement validating its tokens.

keystone 30 (PyPI) runs from ``.venv-keystone`` (``tools/keystone_venv.sh``) on SQLite with
fernet tokens; Placement runs with ``auth_strategy = keystone`` (keystonemiddleware, no token
cache), and its endpoint is in keystone's catalog. Nothing here is a stand-in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from asyncsched.conf import load_string
from asyncsched.conf.options import Config, PlacementOptions
from asyncsched.objects.models import Flavor, RequestSpec
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.query import build_resource_request
from tests.support import keystone_server
from tests.support.keystone_server import ADMIN_PASSWORD, KeystoneServer
from tests.support.placement_server import PlacementServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not keystone_server.available(), reason="no .venv-keystone: run tools/keystone_venv.sh"
    ),
]


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[KeystoneServer, PlacementServer]]:
    keystone = KeystoneServer().start()
    placement = PlacementServer(workers=1, keystone_authtoken=keystone.authtoken_section())
    try:
        placement.start()
        keystone.add_endpoint("placement", placement.url, ("internal", "public"))
        yield keystone, placement
    finally:
        placement.stop()
        keystone.stop()


ONE_VCPU = build_resource_request(RequestSpec(flavor=Flavor(memory_mb=64, vcpus=1)), Config())


def options(text: str) -> PlacementOptions:
    return load_string("[placement]\n" + text).placement


async def test_password_catalog_and_renewal_after_revocation(
    stack: tuple[KeystoneServer, PlacementServer],
) -> None:
    keystone, placement = stack
    opts = options(
        f"auth_type = password\nauth_url = {keystone.url}\nusername = admin\n"
        f"password = {ADMIN_PASSWORD}\nuser_domain_name = Default\nproject_name = admin\n"
        "project_domain_name = Default\nregion_name = RegionOne\n"
        "valid_interfaces = internal,public\n"
    )
    async with PlacementClient(opts) as client:
        assert client.endpoint == placement.url  # found in keystone's catalog
        await client.get_allocation_candidates(ONE_VCPU)  # Placement accepted it
        auth: Any = client._auth
        assert auth.fetch_count == 1
        first = (await auth.headers())["X-Auth-Token"]
        await asyncio.to_thread(keystone.revoke, first)
        # Placement answers 401 for the revoked token; one re-authentication, then success.
        await client.get_allocation_candidates(ONE_VCPU)
        assert auth.fetch_count == 2
        assert (await auth.headers())["X-Auth-Token"] != first


async def test_admin_token_plugin_with_a_real_keystone_token(
    stack: tuple[KeystoneServer, PlacementServer],
) -> None:
    keystone, placement = stack
    token = await asyncio.to_thread(keystone.admin_token)
    opts = options(f"auth_type = admin_token\nendpoint = {placement.url}\ntoken = {token}\n")
    async with PlacementClient(opts) as client:
        await client.get_allocation_candidates(ONE_VCPU)


async def test_wrong_password_fails_start_with_keystones_answer(
    stack: tuple[KeystoneServer, PlacementServer],
) -> None:
    keystone, _ = stack
    opts = options(
        f"auth_type = v3password\nauth_url = {keystone.auth_url}\nusername = admin\n"
        "password = wrong-one\nuser_domain_id = default\nproject_name = admin\n"
        "project_domain_id = default\nregion_name = RegionOne\n"
    )
    client = PlacementClient(opts)
    try:
        with pytest.raises(Exception, match="Unauthorized") as err:
            await client.start()
        assert "wrong-one" not in str(err.value)
    finally:
        await client.close()
