"""oslo ``[DEFAULT] transport_url`` parsing: several brokers for failover, a vhost, optional TLS.

Lives in conf so the loader validates the option with the same parser the RPC server connects
with; it imports nothing above conf.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, quote, unquote, urlsplit

from asyncsched.conf.redact import mask_url_passwords
from asyncsched.exceptions import ConfigError

_SCHEMES = {"rabbit", "amqp", "kombu", "kombu+rabbit", "kombu+amqp", "amqps"}
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True, slots=True)
class BrokerHost:
    host: str
    port: int = 5672
    username: str = "guest"
    password: str = field(default="guest", repr=False)

    def redacted(self) -> str:
        return f"{self.username}:***@{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class TransportURL:
    hosts: tuple[BrokerHost, ...]
    virtual_host: str = "/"
    ssl: bool = False  # ``?ssl=1`` in the URL; [oslo_messaging_rabbit] ssl also turns it on

    def redacted(self) -> str:
        hosts = ",".join(h.redacted() for h in self.hosts)
        return f"rabbit://{hosts}/{quote(self.virtual_host, safe='')}"


def _split_host(item: str, url: str) -> BrokerHost:
    creds, _, hostport = item.rpartition("@")
    username, password = "guest", "guest"
    if creds:
        user, sep, pwd = creds.partition(":")
        username = unquote(user) or "guest"
        password = unquote(pwd) if sep else ""
    port = 5672
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise ConfigError(f"bad IPv6 host in transport_url {mask_url_passwords(url)!r}")
        host = hostport[1:end]
        rest = hostport[end + 1 :]
        if rest.startswith(":") and rest[1:]:
            port = _port(rest[1:], url)
    else:
        host, sep, p = hostport.partition(":")
        if sep and p:
            port = _port(p, url)
    if not host:
        raise ConfigError(f"transport_url {mask_url_passwords(url)!r} has an empty host")
    return BrokerHost(host=host, port=port, username=username, password=password)


def _port(text: str, url: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise ConfigError(
            f"bad port {text!r} in transport_url {mask_url_passwords(url)!r}"
        ) from None
    if not 0 < port < 65536:
        raise ConfigError(f"bad port {port} in transport_url {mask_url_passwords(url)!r}")
    return port


def parse_transport_url(url: str) -> TransportURL:
    """``rabbit://u:p@h1:5672,u:p@h2:5672/vhost?ssl=1`` -> hosts in failover order."""
    text = url.strip()
    scheme, sep, rest = text.partition("://")
    if not sep or scheme.lower() not in _SCHEMES:
        raise ConfigError(
            f"transport_url {mask_url_passwords(text)!r} is not rabbit://, the only driver"
        )
    netloc, _, path_query = rest.partition("/")
    parts = urlsplit("x://h/" + path_query)
    hosts = tuple(_split_host(item, text) for item in netloc.split(",") if item)
    if not hosts:
        raise ConfigError(f"transport_url {mask_url_passwords(text)!r} names no broker host")
    vhost = unquote(parts.path[1:]) or "/"
    query = parse_qs(parts.query)
    ssl = scheme.lower() == "amqps" or any(
        v.lower() in _TRUE for v in query.get("ssl", []) + query.get("ssl_enable", [])
    )
    return TransportURL(hosts=hosts, virtual_host=vhost, ssl=ssl)
