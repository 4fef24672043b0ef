"""A minimal valid nova.conf and a check-config run, shared by the check-config tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from asyncsched.cli import main

BASE = (
    "[api_database]\nconnection = postgresql://nova@127.0.0.1:1/nova_api\n"
    "[placement]\nauth_type = admin_token\nendpoint = http://127.0.0.1:1\ntoken = admin\n"
)


def check_config(conf: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["check-config", "--config-file", str(conf)])
    return code, capsys.readouterr().err.strip().splitlines()
