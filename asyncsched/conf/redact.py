"""Masking of secrets in free text: URLs with passwords, tokens, ``password=...``.

Used by the log formatter (so no secret reaches a log line) and by ``check-config``. The
patterns err on the side of masking too much: a log line with ``***`` costs nothing, a leaked
keystone token does.
"""

from __future__ import annotations

import re

MASK = "***"

# scheme://user:password@host  and the further hosts of a failover transport URL
# (rabbit://u:p@h1:5672,u2:p2@h2:5672/).
_URL_PASSWORD = re.compile(r"(?P<pre>(?://|,)[^:/@,\s'\"]*:)(?P<secret>[^@/\s'\"]*)(?P<post>@)")

# Key/value pairs in dict reprs, JSON, INI lines, HTTP headers and query strings, where the key
# names a secret: _context_auth_token, auth_token, x-auth-token, password, admin_password,
# secret, application_credential_secret, token ...
_SECRET_KEYS = r"[\w-]*(?:auth[_-]?token|password|passwd|secret|token|credential|api[_-]?key)[\w-]*"
_QUOTED_PAIR = re.compile(
    rf"""(?P<pre>(?P<q>['"])(?P<key>{_SECRET_KEYS})(?P=q)\s*[:=]\s*(?P<vq>['"]))"""
    r"""(?P<secret>(?:\\.|(?!(?P=vq)).)*)(?P=vq)""",
    re.IGNORECASE,
)
_BARE_PAIR = re.compile(
    rf"""(?P<pre>(?<![\w'"-])(?P<key>{_SECRET_KEYS})\s*[:=]\s*)"""
    r"""(?P<secret>(?!\*\*\*)(?!['"])[^\s,;&'"}}\])]+)""",
    re.IGNORECASE,
)


def mask_url_passwords(text: str) -> str:
    """Replace the password of every ``scheme://user:password@host`` in ``text``."""
    return _URL_PASSWORD.sub(lambda m: f"{m['pre']}{MASK}{m['post']}", text)


def mask_secrets(text: str) -> str:
    """Mask URL passwords, token values and ``password=...`` style pairs in ``text``."""
    if not text:
        return text
    text = mask_url_passwords(text)
    text = _QUOTED_PAIR.sub(lambda m: f"{m['pre']}{MASK}{m['vq']}", text)
    return _BARE_PAIR.sub(lambda m: f"{m['pre']}{MASK}", text)


_SECRET_KEY = re.compile(rf"{_SECRET_KEYS}|[\w-]*passcode[\w-]*", re.IGNORECASE)


def is_secret_key(name: str) -> bool:
    """An option name that holds a secret (token, password, client_secret, passcode ...)."""
    return _SECRET_KEY.fullmatch(name) is not None
