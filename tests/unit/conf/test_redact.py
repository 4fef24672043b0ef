"""The masking rule (``conf/redact.py``): linear on hostile text, and no URL form leaks.

Issue #21 item 2: a 65,000-character ``token...`` instance uuid in a logged request held the
event loop 24 s in the old backtracking patterns. The timing tests compare N with 8N in the
same run (a linear rule takes about 8 times the CPU time, a quadratic one 64 times), never a
fixed time.
"""

from __future__ import annotations

import string
import time
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncsched.conf.redact import MASK, mask_secrets, mask_tree, mask_url_passwords

N = 8000  # characters; the old patterns took ~0.4 s here and ~25 s at 8N
SCALE = 8  # a linear rule takes ~8 times as long on SCALE x N, a quadratic one ~64 times


def _cpu_seconds(text: str) -> float:
    """CPU time of this thread (other processes on a loaded machine do not count)."""
    t0 = time.thread_time()
    mask_secrets(text)
    return time.thread_time() - t0


def _ratio(small: str, big: str, reps: int = 7) -> float:
    """Best big over best small, measured interleaved so a slow moment hits both alike."""
    _cpu_seconds(small)  # warm up
    best_small = best_big = float("inf")
    for _ in range(reps):
        best_small = min(best_small, _cpu_seconds(small))
        best_big = min(best_big, _cpu_seconds(big))
    return best_big / max(best_small, 1e-6)


HOSTILE = {
    "token run (the issue's uuid)": "token",
    "password run": "password",
    "backslashes": "\\",
    "quoted secret key, no closing quote": "'password': '",
    "quoted keys": "'a':'",
    "userinfo fragments": "a,a:",
    "nested schemes": "x://?",
    "query pairs": "?password=",
    "equals": "=a",
    "at signs": "@:",
}


@pytest.mark.parametrize("unit", list(HOSTILE.values()), ids=list(HOSTILE))
def test_masking_is_linear(unit: str) -> None:
    small = unit * (N // len(unit))
    ratio = _ratio(small, small * SCALE)
    assert ratio < 3 * SCALE, f"{SCALE}x the input took {ratio:.1f}x as long (linear ~{SCALE})"


def test_a_huge_token_value_in_a_log_line_is_masked_whole() -> None:
    line = f"select_destinations instance_uuid=token{'token' * 13000} auth_token=abc"
    out = mask_secrets(line)
    assert "abc" not in out and out.endswith(f"auth_token={MASK}")


# ---------------------------------------------------------------- URL forms (property tests)

_USER = st.text(string.ascii_lowercase + string.digits + "_.-", min_size=1, max_size=8)
# Raw password characters a URL's user info can carry: not / ? # or white space, and not ','
# (oslo splits the hosts at every comma: a raw one must be percent-encoded).
_RAW_PW = st.text(
    string.ascii_letters + string.digits + "'\"@:;=&%!$*()[]~+-._", min_size=1, max_size=16
)
_ANY_PW = st.text(min_size=1, max_size=16)  # percent-encoded: anything at all
_HOST = st.sampled_from(
    ["db", "rabbit-1.example.org", "10.0.0.7", "[::1]", "[fe80::1%25eth0]", "[2001:db8::5]"]
)
_PORT = st.sampled_from(["", ":5672", ":5432"])
_SECRET_PARAM = st.sampled_from(["password", "sslpassword", "auth_token", "PASSWD", "secret"])
_QUERY_VALUE = st.text(
    string.ascii_letters + string.digits + "'\"@,:=%!$*()~+-._/", min_size=1, max_size=16
)


@st.composite
def _hosts(draw: st.DrawFn) -> tuple[str, str]:
    """One host of a URL: (as written, as masked)."""
    user = draw(_USER)
    host = draw(_HOST) + draw(_PORT)
    form = draw(st.sampled_from(["raw", "encoded", "user only", "none"]))
    if form == "raw":
        pw = draw(_RAW_PW)
        return f"{user}:{pw}@{host}", f"{user}:{MASK}@{host}"
    if form == "encoded":
        pw = quote(draw(_ANY_PW), safe="")
        return f"{user}:{pw}@{host}", f"{user}:{MASK}@{host}"
    if form == "user only":
        return f"{user}@{host}", f"{user}@{host}"
    return host, host


@st.composite
def _urls(draw: st.DrawFn) -> tuple[str, str]:
    """A URL with passwords (several hosts, query secrets): (as written, as masked)."""
    scheme = draw(st.sampled_from(["rabbit", "postgresql+psycopg2", "mysql+pymysql", "amqps"]))
    hosts = draw(st.lists(_hosts(), min_size=1, max_size=3))
    path = draw(st.sampled_from(["/", "/nova", "/vhost%2F1", ""]))
    written = f"{scheme}://{','.join(h for h, _ in hosts)}{path}"
    masked = f"{scheme}://{','.join(m for _, m in hosts)}{path}"
    params = draw(st.lists(st.booleans(), max_size=3))
    sep = "?"
    for secret in params:
        if secret:
            key = draw(_SECRET_PARAM)
            value = draw(_QUERY_VALUE)
            written += f"{sep}{key}={value}"
            masked += f"{sep}{key}={MASK}"
        else:
            written += f"{sep}sslmode=require"
            masked += f"{sep}sslmode=require"
        sep = "&"
    return written, masked


@settings(max_examples=400, deadline=None)
@given(_urls())
def test_every_url_form_is_masked_exactly(url: tuple[str, str]) -> None:
    written, masked = url
    assert mask_url_passwords(written) == masked


@settings(max_examples=200, deadline=None)
@given(_urls())
def test_a_url_in_free_text_is_masked_the_same(url: tuple[str, str]) -> None:
    written, masked = url
    line = f"cannot connect to {written} (timeout); retrying"
    assert mask_secrets(line) == f"cannot connect to {masked} (timeout); retrying"


_SECRET = st.text(string.ascii_letters + string.digits + "-_.", min_size=6, max_size=24).map(
    lambda s: "S3CR3T" + s
)
_TEMPLATES = [
    "{{'_context_auth_token': '{s}', 'x': 1}}",
    '{{"password": "{s}", "other": 2}}',
    "password={s} next",
    "admin_password: {s}",
    "X-Auth-Token: {s}",
    "rabbit://guest:{s}@h1:5672,guest:{s}@h2/",
    "postgresql://nova@db/nova?sslmode=require&password={s}",
    "msg: \"{{'password': '{s}'}}\"",
    "http://h/?next=http://u:{s}@h2/",
]


@settings(max_examples=300, deadline=None)
@given(_SECRET, st.sampled_from(_TEMPLATES))
def test_masked_text_never_contains_the_secret(secret: str, template: str) -> None:
    assert secret not in mask_secrets(template.format(s=secret))


def test_mask_tree_masks_every_string_and_secret_keys() -> None:
    doc = {
        "placement_mirror": {"database": "postgresql://p@db/placement?password=S3CR3Tq"},
        "errors": ["rabbit://u:S3CR3Tr@h/ refused"],
        "password": "S3CR3Ts",
        "token_required": True,
        "count": 3,
    }
    out = mask_tree(doc)
    assert "S3CR3T" not in repr(out)
    assert out["token_required"] is True and out["count"] == 3
    assert out["placement_mirror"]["database"] == f"postgresql://p@db/placement?password={MASK}"
