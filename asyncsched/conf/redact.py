"""Masking of secrets: URLs with passwords, tokens, ``password=...``. One rule, written once.

Every output goes through here: the log formatter (``mask_secrets`` on each line), the
health file and ``GET /v1/status`` (``mask_tree`` on the snapshot), ``check-config``
(``mask_url_passwords`` on secret options) and error messages. The rule errs on the side of
masking too much: a log line with ``***`` costs nothing, a leaked keystone token does.

Untrusted text reaches this (a log line quoting a request), so every pattern is linear: each
quantifier is possessive over a class that the next token cannot start with, and the key names
are judged by a separate test on the matched word, never by a regex that backtracks into it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

MASK = "***"

# Names of secrets: _context_auth_token, auth_token, x-auth-token, password, admin_password,
# secret, application_credential_secret, token, sslpassword, passcode ...
_SECRET_WORD = re.compile(
    r"auth[_-]?token|password|passwd|passcode|secret|token|credential|api[_-]?key", re.IGNORECASE
)
_WORD = re.compile(r"[\w-]++")

# A URL: scheme "://", then the authority up to / ? # or white space.
_SCHEME_SEP = re.compile(r"://")
_AUTHORITY = re.compile(r"[^/?#\s]*+")
_TOKEN_END = re.compile(r"\S*+")
_HOST_PORT = re.compile(r"(?:\[[^\]]*+\]|[^:\[\]]*+)(?::\d*+)?")
_QUERY_PAIR = re.compile(r"(?<=[?&;])(?P<key>[^=&;?#\s]++)=(?P<value>[^&;#\s]*+)")

# Key/value pairs in dict reprs, JSON, INI lines, HTTP headers and query strings.
_QUOTED_KEY = re.compile(r"""(?P<q>['"])(?P<key>[\w-]++)(?P=q)\s*+[:=]\s*+(?P<vq>['"])""")
_QUOTED_VALUE = {
    "'": re.compile(r"(?:[^'\\]++|\\.)*+", re.DOTALL),
    '"': re.compile(r'(?:[^"\\]++|\\.)*+', re.DOTALL),
}
_BARE_KEY = re.compile(r"""(?<![\w'"-])(?P<key>[\w-]++)\s*+[:=]\s*+""")
_BARE_VALUE = re.compile(r"""(?!\*\*\*)[^\s,;&'"}\])]++""")


def is_secret_key(name: str) -> bool:
    """A name that holds a secret (token, password, client_secret, passcode ...)."""
    word = _WORD.fullmatch(name)
    return word is not None and _SECRET_WORD.search(name) is not None


def mask_url_passwords(text: str) -> str:
    """Mask the passwords of every URL in ``text``: ``user:PASSWORD@`` of each host (also the
    several hosts of ``rabbit://a:p@h1,b:q@h2/``, IPv6 hosts, percent-encoded or raw ``@ :``
    and quotes in the password; a raw ``,`` is a host separator, as to oslo) and the value of
    every secret-named query parameter (``?password=``, ``sslpassword=``, ``token=`` ...)."""
    out: list[str] = []
    pos = 0
    n = len(text)
    while pos < n:
        sep = _SCHEME_SEP.search(text, pos)
        if sep is None:
            break
        end = _end(_TOKEN_END, text, sep.end())  # the URL ends at white space
        out.append(text[pos : sep.end()])
        out.append(_mask_url_body(text[sep.end() : end]))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _end(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where ``pattern`` (one that matches the empty string too) stops from ``pos``."""
    m = pattern.match(text, pos)
    return pos if m is None else m.end()


def _mask_url_body(body: str) -> str:
    """What follows one ``://`` up to white space: its authority, the authorities of URLs
    nested in it (``?next=http://u:p@h``), and the secret-named parameters of its query."""
    out: list[str] = []
    pos = 0
    for start in (0, *(m.end() for m in _SCHEME_SEP.finditer(body))):
        if start < pos:
            continue
        end = _end(_AUTHORITY, body, start)
        out.append(body[pos:start])
        out.append(_mask_authority(body[start:end]))
        pos = end
    out.append(body[pos:])
    masked = "".join(out)
    query = masked.find("?")
    if query < 0:
        return masked
    return masked[:query] + _QUERY_PAIR.sub(_masked_query_pair, masked[query:])


def _masked_query_pair(m: re.Match[str]) -> str:
    if _SECRET_WORD.search(unquote(m["key"])) is None:
        return m.group(0)
    return f"{m['key']}={MASK}"


def _mask_authority(auth: str) -> str:
    """``a:p@h1,b:q@h2`` -> ``a:***@h1,b:***@h2``. Split at ``@``: every part but the last is
    ``[hosts,]userinfo`` (the hosts before it have no user info), or, with no comma, the rest
    of a password holding a raw ``@``; the last part is hosts."""
    parts = auth.split("@")
    out: list[str] = []
    for part in parts[:-1]:
        if out and out[-1].endswith(MASK) and "," not in part:
            continue  # "u:p@s:s@h": the mask already stands for the password's raw "@"
        out.append(_mask_userinfo_after_hosts(part))
    out.append(parts[-1])
    return "@".join(out)


def _mask_userinfo_after_hosts(part: str) -> str:
    """``h1:5672,[::1],u:p`` -> ``h1:5672,[::1],u:***``: the user info starts at the first
    item that is not ``host[:port]`` (a raw comma in a password stays inside the mask)."""
    items = part.split(",")
    hosts = 0
    while hosts < len(items) - 1 and _HOST_PORT.fullmatch(items[hosts]):
        hosts += 1
    userinfo = ",".join(items[hosts:])
    return ",".join([*items[:hosts], _mask_userinfo(userinfo)])


def _mask_userinfo(userinfo: str) -> str:
    user, sep, _ = userinfo.partition(":")
    return f"{user}:{MASK}" if sep else userinfo


def _mask_pairs(
    text: str, key: re.Pattern[str], value_for: Callable[[re.Match[str]], re.Pattern[str]]
) -> str:
    """Mask the value after every ``key`` match that names a secret. The key pattern consumes
    only the key, so a value that is not secret is still scanned for pairs inside it."""
    out: list[str] = []
    pos = 0
    while (m := key.search(text, pos)) is not None:
        if not is_secret_key(m["key"]):
            out.append(text[pos : m.end()])
            pos = m.end()
            continue
        v = value_for(m).match(text, m.end())
        out.append(text[pos : m.end()])
        pos = m.end()
        if v is not None and v.group(0):
            out.append(MASK)
            pos = v.end()
    out.append(text[pos:])
    return "".join(out)


def mask_secrets(text: str) -> str:
    """Mask URL passwords, token values and ``password=...`` style pairs in ``text``."""
    if not text:
        return text
    text = mask_url_passwords(text)
    text = _mask_pairs(text, _QUOTED_KEY, lambda m: _QUOTED_VALUE[m["vq"]])
    return _mask_pairs(text, _BARE_KEY, lambda m: _BARE_VALUE)


def mask_tree(value: Any) -> Any:
    """A JSON-like snapshot with every string masked, and the string value of every
    secret-named key replaced: what the health file and ``/v1/status`` publish."""
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {
            k: MASK if isinstance(v, str) and is_secret_key(str(k)) else mask_tree(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_tree(v) for v in value]
    return value
