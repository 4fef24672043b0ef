"""A loopback TCP proxy a test can cut and restore: a peer's outage without stopping it.

The shared PostgreSQL serves everyone's tests, so a "cell database down" test points the
cell's connection at this proxy instead and cuts it: established connections are closed and
new ones are refused (the port stops listening), which is what a crashed or unreachable
server looks like to a client. It runs its own event loop in a thread, so it keeps relaying
while the test blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator


class TcpProxy:
    """``127.0.0.1:port`` relayed to ``upstream``; :meth:`cut` / :meth:`restore` it."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port: int = s.getsockname()[1]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def start(self) -> TcpProxy:
        self._thread.start()
        self.restore()
        return self

    def cut(self) -> None:
        """Stop listening and drop every relayed connection."""
        self._call(self._cut())

    def restore(self) -> None:
        """Listen again on the same port."""
        self._call(self._listen())

    def close(self) -> None:
        if self._thread.is_alive():
            self.cut()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()

    def _call(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)  # type: ignore[arg-type]

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(
                self._relay, "127.0.0.1", self.port, reuse_address=True
            )

    async def _cut(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        if server is not None:
            with contextlib.suppress(Exception):
                await server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.transport.abort()

        try:
            await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        finally:
            self._writers.discard(writer)
            self._writers.discard(up_writer)


@contextlib.contextmanager
def tcp_proxy(upstream_host: str, upstream_port: int) -> Iterator[TcpProxy]:
    proxy = TcpProxy(upstream_host, upstream_port).start()
    try:
        yield proxy
    finally:
        proxy.close()
