"""Authentication to Placement through keystoneauth1, as nova loads ``[placement]``.

``auth_type`` names any keystoneauth plugin (admin_token, password, v3token, v3totp, v3oidc*,
http_basic, none, third-party entry points ...). The plugin's own loader says which options it
reads; they come from ``[placement]`` under the same names nova uses. keystoneauth obtains and
renews tokens and looks the endpoint up in the catalog; aiohttp stays the data path.

keystoneauth is synchronous, so anything that may talk to keystone runs in a worker thread.
Headers are cached while the plugin says its token is still good, so the request path does
not hop threads for every call. Credentials and tokens never reach a log line or an error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import http_basic, noauth, token_endpoint
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import plugin as ks_plugin
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import base as ks_identity

from asyncsched.common.strings import closest
from asyncsched.conf.loader import FALSE_WORDS, TRUE_WORDS
from asyncsched.conf.options import KEYSTONE_SESSION_OPTIONS, PlacementOptions
from asyncsched.exceptions import ConfigError, PlacementError

LOG = logging.getLogger(__name__)

#: ``auth_type`` unset, ``none`` or our historical ``noauth``: no keystone at all.
NOAUTH_TYPES = (None, "none", "noauth")
#: Names asyncsched accepted before it loaded keystoneauth plugins -> the plugin's name.
ALIASES = {"noauth": "none", "applicationcredential": "v3applicationcredential"}
#: Plugins whose headers never change once built (no token to renew).
_STATIC_PLUGINS = (token_endpoint.Token, noauth.NoAuth, http_basic.HTTPBasicAuth)


class Auth(Protocol):
    """What the Placement client needs from authentication."""

    async def headers(self) -> Mapping[str, str]: ...
    async def endpoint(self) -> str | None: ...
    def invalidate(self) -> None: ...


@dataclass(frozen=True, slots=True)
class KeystoneSettings:
    """The keystoneauth objects ``[placement]`` describes, built without any network call."""

    plugin_name: str
    plugin: ks_plugin.BaseAuthPlugin
    session: ks_session.Session
    adapter: ks_adapter.Adapter


def plugin_name(options: PlacementOptions) -> str:
    """The keystoneauth plugin ``auth_type`` names (aliases resolved; unset = none)."""
    name = options.auth_type or "none"
    return ALIASES.get(name, name)


def _option_value(options: PlacementOptions, opt: ks_loading.Opt) -> Any:
    """A plugin option's value from ``[placement]``: typed field, else the raw plugin option."""
    raw = dict(options.plugin_options)
    names = [opt.dest, *(d.dest for d in opt.deprecated)]
    for name in names:
        if name in PlacementOptions.__dataclass_fields__ and name != "plugin_options":
            value = getattr(options, name)
            if value is not None:
                return value
        if name in raw and raw[name] != "":
            return _typed(raw[name], opt)
    return None


def _typed(text: str, opt: ks_loading.Opt) -> Any:
    """Raw INI text as the opt's type; booleans read the way oslo.config reads them."""
    if opt.type is bool:
        low = text.strip().lower()
        if low in TRUE_WORDS or low in FALSE_WORDS:
            return low in TRUE_WORDS
        raise ConfigError(f"[placement] {opt.dest} = {text!r}: invalid value; allowed: a boolean")
    try:
        return opt.type(text)
    except (TypeError, ValueError):
        shown = "***" if opt.secret else repr(text)
        raise ConfigError(
            f"[placement] {opt.dest} = {shown}: invalid value for auth plugin option"
        ) from None


def unread_options(options: PlacementOptions) -> list[str]:
    """The ``[placement]`` keys neither the plugin nor keystoneauth's session/adapter read."""
    try:
        loader: ks_loading.BaseLoader[Any] = ks_loading.get_plugin_loader(plugin_name(options))
    except ks_exc.NoMatchingPlugin:
        return []
    read = {n for o in loader.get_options() for n in (o.dest, *(d.dest for d in o.deprecated))}
    read |= KEYSTONE_SESSION_OPTIONS | {"auth_type", "auth_section", "plugin_options"}
    typed = [
        name
        for name in PlacementOptions.__dataclass_fields__
        if name not in read and getattr(options, name) is not None
    ]
    return sorted(typed + [k for k, _ in options.plugin_options if k not in read])


def load_plugin(options: PlacementOptions) -> ks_plugin.BaseAuthPlugin:
    """The auth plugin ``[placement]`` configures; ConfigError with one line if it cannot load."""
    name = plugin_name(options)
    try:
        loader: ks_loading.BaseLoader[Any] = ks_loading.get_plugin_loader(name)
    except ks_exc.NoMatchingPlugin:
        near = ", ".join(closest(name, ks_loading.get_available_plugin_names()))
        raise ConfigError(
            f"[placement] auth_type = {options.auth_type!r}: no keystoneauth plugin of that "
            f"name; closest installed: {near}"
        ) from None
    getter: Callable[[ks_loading.Opt], Any] = lambda opt: _option_value(options, opt)  # noqa: E731
    try:
        plugin: ks_plugin.BaseAuthPlugin = loader.load_from_options_getter(getter)
        return plugin
    except ks_exc.MissingRequiredOptions as exc:
        missing = ", ".join(o.dest for o in exc.options)
        raise ConfigError(
            f"[placement] auth_type = {name}: missing required option(s) {missing}"
        ) from None
    except (ks_exc.ClientException, TypeError, ValueError) as exc:
        raise ConfigError(
            f"[placement] auth_type = {name}: the plugin refused its options: "
            f"{type(exc).__name__}: {exc}"
        ) from None


def load_keystone(options: PlacementOptions, *, timeout: float) -> KeystoneSettings:
    """Plugin, session (TLS, timeout) and adapter (catalog lookup) for ``[placement]``."""
    name = plugin_name(options)
    plugin = load_plugin(options)
    verify: bool | str = False if options.insecure else (options.cafile or True)
    cert: tuple[str, str] | str | None = None
    if options.certfile:
        cert = (options.certfile, options.keyfile) if options.keyfile else options.certfile
    session = ks_session.Session(
        auth=plugin,
        verify=verify,
        cert=cert,
        timeout=timeout,
        collect_timing=options.collect_timing,
        split_loggers=options.split_loggers,
    )
    adapter = ks_adapter.Adapter(
        session,
        service_type=options.service_type,
        service_name=options.service_name,
        interface=list(options.valid_interfaces),
        region_name=options.region_name,
        endpoint_override=options.endpoint_override,
    )
    return KeystoneSettings(name, plugin, session, adapter)


class KeystoneAuth:
    """Headers and endpoint from a keystoneauth plugin; keystone calls run in a thread."""

    def __init__(self, settings: KeystoneSettings, *, noauth_token: str | None = None) -> None:
        self._settings = settings
        # Placement's noauth2 wants a token ('admin' for an admin user); keystoneauth's
        # `none` plugin would send 'notused'.
        self._noauth_token = noauth_token if settings.plugin_name == "none" else None
        self._headers: dict[str, str] | None = None
        self._lock = asyncio.Lock()
        self.fetch_count = 0

    @property
    def plugin_name(self) -> str:
        return self._settings.plugin_name

    def _fresh(self) -> bool:
        """Cached headers are usable without asking the plugin (no network possible)."""
        if self._headers is None:
            return False
        plugin = self._settings.plugin
        if isinstance(plugin, _STATIC_PLUGINS):
            return True
        if isinstance(plugin, ks_identity.BaseIdentityPlugin):
            ref = plugin.auth_ref
            return ref is not None and not ref.will_expire_soon(plugin.MIN_TOKEN_LIFE_SECONDS)
        return False  # a plugin we know nothing about: ask it every time (in the thread)

    async def headers(self) -> Mapping[str, str]:
        headers = self._headers
        if headers is not None and self._fresh():
            return headers
        async with self._lock:
            if self._headers is not None and self._fresh():
                return self._headers
            got = await self._in_thread("authentication", self._settings.session.get_auth_headers)
            headers = dict(got or {})
            if self._noauth_token is not None:
                headers["X-Auth-Token"] = self._noauth_token
            self.fetch_count += 1
            self._headers = headers
            return headers

    async def endpoint(self) -> str | None:
        url = await self._in_thread("endpoint lookup", self._settings.adapter.get_endpoint)
        return url if isinstance(url, str) else None

    def invalidate(self) -> None:
        """After a 401: drop the cached headers and the plugin's token (if it has one)."""
        self._headers = None
        self._settings.plugin.invalidate()

    async def _in_thread(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return await asyncio.to_thread(call)
        except ks_exc.ClientException as exc:
            # keystoneauth's messages name the URL and status, never the credentials.
            raise PlacementError(
                f"keystone {what} for Placement failed (auth_type {self.plugin_name}): "
                f"{type(exc).__name__}: {exc}"
            ) from None


def make_auth(
    options: PlacementOptions, *, noauth_token: str | None = "admin", timeout: float = 30.0
) -> KeystoneAuth:
    """The authentication ``[placement]`` asks for; ConfigError if the plugin cannot load."""
    settings = load_keystone(options, timeout=timeout)
    if settings.plugin_name == "none" and not (
        options.endpoint_override or dict(options.plugin_options).get("endpoint")
    ):
        raise ConfigError(
            "[placement] endpoint_override (or endpoint) is required when auth_type is none"
        )
    return KeystoneAuth(settings, noauth_token=noauth_token)
