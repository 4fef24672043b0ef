"""The systemd notify protocol (sd_notify), spoken directly on ``$NOTIFY_SOCKET``.

One datagram per state change, ``KEY=VALUE`` lines, on a unix datagram socket given by path
or as an abstract name (leading ``@``). No libsystemd. When ``NOTIFY_SOCKET`` is unset the
notifier is a no-op, so the same code runs under systemd, in a container and in a terminal.
Sending never raises: a lost notification must not take the scheduler down.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping

LOG = logging.getLogger(__name__)


class SystemdNotifier:
    """Send sd_notify messages; ``enabled`` is False (and every call a no-op) outside systemd."""

    def __init__(self, address: str | None, watchdog_usec: int | None = None) -> None:
        self._address: str | None = None
        if address:
            self._address = "\0" + address[1:] if address.startswith("@") else address
        self._sock: socket.socket | None = None
        self.watchdog_usec = watchdog_usec if watchdog_usec and watchdog_usec > 0 else None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SystemdNotifier:
        """Read ``NOTIFY_SOCKET`` and ``WATCHDOG_USEC`` (honouring ``WATCHDOG_PID``)."""
        env = os.environ if environ is None else environ
        usec: int | None = None
        raw = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        if raw.isdigit() and (not pid or pid == str(os.getpid())):
            usec = int(raw)
        return cls(env.get("NOTIFY_SOCKET") or None, usec)

    @property
    def enabled(self) -> bool:
        return self._address is not None

    @property
    def watchdog_interval(self) -> float | None:
        """Seconds between WATCHDOG=1 pings: half of ``WATCHDOG_USEC``, as systemd advises."""
        if not self.enabled or self.watchdog_usec is None:
            return None
        return self.watchdog_usec / 2_000_000

    def send(self, **fields: str | int) -> bool:
        """Send one datagram ``KEY=value\\n...``; True if it was handed to the socket."""
        if self._address is None:
            return False
        payload = "".join(
            f"{key}={str(value).replace(chr(10), ' ')}\n" for key, value in fields.items()
        )
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.setblocking(False)
            self._sock.sendto(payload.encode("utf-8", "replace"), self._address)
        except OSError as exc:
            LOG.debug("sd_notify %s failed: %s", ",".join(fields), exc)
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        fields: dict[str, str | int] = {"READY": 1, "MAINPID": os.getpid()}
        if status:
            fields["STATUS"] = status
        return self.send(**fields)

    def reloading(self) -> bool:
        """RELOADING=1 with MONOTONIC_USEC (systemd >= 253 wants it); READY=1 ends the reload."""
        return self.send(
            RELOADING=1, MONOTONIC_USEC=time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        )

    def stopping(self, status: str | None = None) -> bool:
        fields: dict[str, str | int] = {"STOPPING": 1}
        if status:
            fields["STATUS"] = status
        return self.send(**fields)

    def status(self, text: str) -> bool:
        return self.send(STATUS=text)

    def watchdog(self) -> bool:
        return self.send(WATCHDOG=1)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
