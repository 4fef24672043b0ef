"""``[asyncsched] admin_listen``: HOST:PORT parsed once, checked at load."""

from __future__ import annotations

import pytest

from asyncsched.conf.listen import ListenAddress, parse_listen
from asyncsched.conf.loader import load_string
from asyncsched.exceptions import ConfigError


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("127.0.0.1:9105", ListenAddress("127.0.0.1", 9105)),
        ("[::1]:9105", ListenAddress("::1", 9105)),
        (":9105", ListenAddress("0.0.0.0", 9105)),
        ("localhost:0", ListenAddress("localhost", 0)),
    ],
)
def test_parse(text: str, want: ListenAddress) -> None:
    assert parse_listen(text) == want


@pytest.mark.parametrize("text", ["9105", "host:", "host:port", "::1:9105", "h:70000"])
def test_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_listen(text)


def test_the_loader_checks_it() -> None:
    assert load_string("[asyncsched]\nadmin_listen = 127.0.0.1:9105\n").asyncsched.admin_listen
    with pytest.raises(ConfigError, match=r"admin_listen.*HOST:PORT"):
        load_string("[asyncsched]\nadmin_listen = 9105\n")
