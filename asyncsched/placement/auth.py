"""Authentication to Placement: keystone v3 (password, application credential) or noauth.

Tokens are fetched with the client's own aiohttp session, cached, renewed shortly before
``expires_at`` and again after a 401. Credentials and tokens are never logged or put in
exception messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import aiohttp

from asyncsched.conf.dsn import redact_url
from asyncsched.conf.options import PlacementOptions
from asyncsched.exceptions import ConfigError, PlacementError

LOG = logging.getLogger(__name__)

#: Renew a token this many seconds before keystone says it expires.
RENEW_MARGIN = 60.0
NOAUTH_TYPES = (None, "none", "noauth")
PASSWORD_TYPES = ("password", "v3password")
APPCRED_TYPES = ("applicationcredential", "v3applicationcredential")


class Auth(Protocol):
    """What the Placement client needs from an auth plugin."""

    async def token(self, session: aiohttp.ClientSession) -> str | None: ...
    async def endpoint(self, session: aiohttp.ClientSession) -> str: ...
    def invalidate(self) -> None: ...


@dataclass(frozen=True, slots=True)
class NoAuth:
    """``auth_type = none``: a fixed endpoint and a fixed token (noauth2 wants 'admin')."""

    url: str
    noauth_token: str | None = "admin"

    async def token(self, session: aiohttp.ClientSession) -> str | None:
        return self.noauth_token

    async def endpoint(self, session: aiohttp.ClientSession) -> str:
        return self.url

    def invalidate(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class _Token:
    value: str
    expires_at: float  # monotonic deadline after which we renew
    catalog: tuple[dict[str, Any], ...]


class KeystoneAuth:
    """Keystone v3 password or application-credential auth, done with aiohttp."""

    def __init__(self, options: PlacementOptions, *, timeout: float = 30.0) -> None:
        if not options.auth_url:
            raise ConfigError("[placement] auth_url is required for keystone authentication")
        self._options = options
        base = options.auth_url.rstrip("/")
        self._tokens_url = (base if base.endswith("/v3") else base + "/v3") + "/auth/tokens"
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._token: _Token | None = None
        self._lock = asyncio.Lock()
        self._body = self._auth_body(options)
        self.fetch_count = 0

    @staticmethod
    def _auth_body(o: PlacementOptions) -> dict[str, Any]:
        identity: dict[str, Any]
        if o.auth_type in APPCRED_TYPES:
            cred: dict[str, Any] = {"secret": o.application_credential_secret}
            if o.application_credential_id:
                cred["id"] = o.application_credential_id
            elif o.application_credential_name:
                cred["name"] = o.application_credential_name
                cred["user"] = _user(o)
            else:
                raise ConfigError(
                    "[placement] application_credential_id or _name is required for "
                    "application-credential auth"
                )
            if not o.application_credential_secret:
                raise ConfigError("[placement] application_credential_secret is required")
            return {
                "auth": {
                    "identity": {
                        "methods": ["application_credential"],
                        "application_credential": cred,
                    }
                }
            }
        if o.auth_type not in PASSWORD_TYPES:
            raise ConfigError(f"[placement] auth_type {o.auth_type!r} is not supported")
        if not (o.username or o.user_id) or o.password is None:
            raise ConfigError("[placement] username (or user_id) and password are required")
        user = _user(o)
        user["password"] = o.password
        identity = {"methods": ["password"], "password": {"user": user}}
        body: dict[str, Any] = {"auth": {"identity": identity}}
        scope = _scope(o)
        if scope is not None:
            body["auth"]["scope"] = scope
        return body

    def invalidate(self) -> None:
        """Forget the cached token (after a 401) so the next call fetches a new one."""
        self._token = None

    async def _current(self, session: aiohttp.ClientSession) -> _Token:
        tok = self._token
        if tok is not None and time.monotonic() < tok.expires_at:
            return tok
        async with self._lock:
            tok = self._token
            if tok is not None and time.monotonic() < tok.expires_at:
                return tok
            tok = await self._fetch(session)
            self._token = tok
            return tok

    async def _fetch(self, session: aiohttp.ClientSession) -> _Token:
        where = redact_url(self._tokens_url)
        try:
            async with session.post(
                self._tokens_url, json=self._body, timeout=self._timeout
            ) as resp:
                self.fetch_count += 1
                if resp.status != 201:
                    text = (await resp.text())[:200]
                    raise PlacementError(
                        f"Keystone at {where} refused the token request: HTTP {resp.status} {text}"
                    )
                value = resp.headers.get("X-Subject-Token")
                data = await resp.json(content_type=None)
        except PlacementError:
            raise
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise PlacementError(
                f"Keystone at {where} unreachable or invalid: {type(exc).__name__}: {exc}"
            ) from exc
        if not value or not isinstance(data, dict) or "token" not in data:
            raise PlacementError(f"Keystone at {where} returned no token")
        token = data["token"]
        lifetime = _lifetime(token.get("expires_at"))
        LOG.info("placement: keystone token obtained, valid for %.0f s", lifetime)
        return _Token(
            value=value,
            expires_at=time.monotonic() + max(lifetime - RENEW_MARGIN, lifetime / 2),
            catalog=tuple(token.get("catalog") or ()),
        )

    async def token(self, session: aiohttp.ClientSession) -> str | None:
        return (await self._current(session)).value

    async def endpoint(self, session: aiohttp.ClientSession) -> str:
        o = self._options
        if o.endpoint_override:
            return o.endpoint_override
        tok = await self._current(session)
        url = find_endpoint(
            tok.catalog,
            service_type=o.service_type,
            service_name=o.service_name,
            interfaces=o.valid_interfaces,
            region=o.region_name,
        )
        if url is None:
            raise PlacementError(
                f"No {o.service_type} endpoint in the keystone catalog for interfaces "
                f"{list(o.valid_interfaces)} region {o.region_name!r}"
            )
        return url


def _user(o: PlacementOptions) -> dict[str, Any]:
    if o.user_id:
        return {"id": o.user_id}
    user: dict[str, Any] = {"name": o.username}
    if o.user_domain_id:
        user["domain"] = {"id": o.user_domain_id}
    else:
        user["domain"] = {"name": o.user_domain_name or "Default"}
    return user


def _scope(o: PlacementOptions) -> dict[str, Any] | None:
    if o.system_scope:
        return {"system": {o.system_scope: True}}
    if o.project_id:
        return {"project": {"id": o.project_id}}
    if o.project_name:
        domain = (
            {"id": o.project_domain_id}
            if o.project_domain_id
            else {"name": o.project_domain_name or "Default"}
        )
        return {"project": {"name": o.project_name, "domain": domain}}
    return None


def _lifetime(expires_at: Any) -> float:
    """Seconds until keystone's ISO ``expires_at``; one hour if it is missing or unreadable."""
    if not isinstance(expires_at, str):
        return 3600.0
    try:
        when = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
    except ValueError:
        return 3600.0
    return max(when.timestamp() - time.time(), 1.0)


def find_endpoint(
    catalog: Any,
    *,
    service_type: str,
    service_name: str | None,
    interfaces: tuple[str, ...],
    region: str | None,
) -> str | None:
    """The first catalog URL matching type (+name), in interface order, in the region."""
    services = [
        s
        for s in catalog
        if isinstance(s, dict)
        and s.get("type") == service_type
        and (service_name is None or s.get("name") == service_name)
    ]
    for interface in interfaces:
        wanted = interface.removesuffix("URL")
        for service in services:
            for ep in service.get("endpoints") or ():
                if ep.get("interface") != wanted:
                    continue
                if region and region not in (ep.get("region"), ep.get("region_id")):
                    continue
                url = ep.get("url")
                if isinstance(url, str):
                    return url
    return None


def make_auth(
    options: PlacementOptions, *, noauth_token: str | None = "admin", timeout: float = 30.0
) -> Auth:
    """The auth plugin ``[placement] auth_type`` asks for."""
    if options.auth_type in NOAUTH_TYPES:
        if not options.endpoint_override:
            raise ConfigError(
                "[placement] endpoint_override is required when auth_type is none/noauth"
            )
        return NoAuth(url=options.endpoint_override, noauth_token=noauth_token)
    return KeystoneAuth(options, timeout=timeout)
