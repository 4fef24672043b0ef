"""``asyncsched explain`` / ``capacity`` with no admin endpoint listening say how to turn it on."""

from __future__ import annotations

import pytest

from asyncsched.cli import EX_FAILURE, main
from tests.support.net import free_port


@pytest.mark.parametrize("command", ["explain", "capacity"])
def test_cannot_reach_names_admin_listen(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert main([command, "--url", url]) == EX_FAILURE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"asyncsched: cannot reach {url}: ")
    assert "[asyncsched] admin_listen" in line and "--url" in line
