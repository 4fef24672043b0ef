"""``HOST:PORT`` listen addresses (``[asyncsched] admin_listen``): one parser, loader and server."""

from __future__ import annotations

from dataclasses import dataclass

from asyncsched.exceptions import ConfigError


@dataclass(frozen=True, slots=True)
class ListenAddress:
    host: str
    port: int


def parse_listen(value: str) -> ListenAddress:
    """``127.0.0.1:9105``, ``[::1]:9105`` or ``:9105`` (every address, as ``0.0.0.0``: the
    admin server then requires a token, see ``admin.server.check_exposure``); port 0 = any
    free."""
    text = value.strip()
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ConfigError(f"{value!r} is not HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ConfigError(f"{value!r}: write an IPv6 address in brackets, e.g. [::1]:9105")
    port = int(port_text)
    if port > 65535:
        raise ConfigError(f"{value!r}: port {port} is out of range")
    return ListenAddress(host or "0.0.0.0", port)
