"""A real unix datagram socket standing where systemd's notify socket would be (test helper)."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from types import TracebackType


class NotifyListener:
    """Bind a datagram socket in a short temp dir (sun_path is limited to 108 bytes)."""

    def __init__(self, abstract: bool = False) -> None:
        self._dir = tempfile.mkdtemp(prefix="sdn-", dir="/tmp")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = os.path.basename(self._dir)
            self.sock.bind("\0" + name)
            self.address = "@" + name
        else:
            self.address = os.path.join(self._dir, "notify")
            self.sock.bind(self.address)
        self.messages: list[dict[str, str]] = []

    def recv(self, timeout: float = 10.0) -> dict[str, str]:
        """The next datagram as a dict; raises TimeoutError."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            raise TimeoutError(f"no notification in {timeout} s; got {self.messages}") from None
        fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
        self.messages.append(fields)
        return fields

    def wait_for(self, key: str, value: str | None = None, timeout: float = 20.0) -> dict[str, str]:
        """Read datagrams until one has ``key`` (and ``value`` if given)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no {key}={value or '*'} in {timeout} s; got {self.messages}")
            msg = self.recv(remaining)
            if key in msg and (value is None or msg[key] == value):
                return msg

    def close(self) -> None:
        self.sock.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> NotifyListener:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
