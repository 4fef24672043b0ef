"""Small network helpers for tests."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port nothing listens on right now (the OS picks it; we close it again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
