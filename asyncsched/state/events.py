"""The five host-state casts (``rpc.interfaces.HostStateEvents``) applied to the host table.

nova's semantics (``HostManager.update_aggregates`` ... ``sync_instance_info``). A cast never
waits on a database: a host the cache does not know, or whose instance list differs from the
compute's, is re-read from its cell in the background (``Refresher.reload_host_instances``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from asyncsched.objects.models import Aggregate
from asyncsched.state.host_state import HostState
from asyncsched.state.refresher import Refresher
from asyncsched.state.table import Cell, HostTable

LOG = logging.getLogger(__name__)


class CastEvents:
    """What the RPC server calls for the casts (``HostStateCache.events``)."""

    def __init__(
        self,
        table: HostTable,
        refresher: Refresher,
        release: Callable[[HostState, str], Awaitable[None]],
    ) -> None:
        self._table = table
        self._refresher = refresher
        self._release = release  # HostStateCache.release: an assumption the cast ends

    async def update_aggregates(self, aggregates: Sequence[Aggregate]) -> None:
        """nova's semantics: replace each aggregate, add its id to the listed hosts and drop
        it from hosts no longer listed."""
        await self._table.set_aggregates(self._table.live.aggs.update(aggregates))

    async def delete_aggregate(self, aggregate: Aggregate) -> None:
        await self._table.set_aggregates(self._table.live.aggs.delete(aggregate))

    async def update_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        """Known host: add the instances. Unknown host: a list of more than one is taken as
        the full list; otherwise the host's instances are re-read from its cell DB."""
        cell = self._cell_for_host(host_name)
        if cell is None:
            return
        index = cell.index
        known = host_name in index.host_insts or host_name in index.nodes_by_host
        index.host_insts.setdefault(host_name, set())
        if not known and len(instance_uuids) <= 1:
            self._refresher.spawn(self._refresher.reload_host_instances(cell, host_name))
        touched = index.move_to_host(host_name, instance_uuids)
        await self._table.reconcile(cell, index.nodes_of(touched), confirm=False)

    async def delete_instance_info(self, host_name: str, instance_uuid: str) -> None:
        cell = self._cell_for_host(host_name)
        if cell is None:
            return
        index = cell.index
        if host_name not in index.host_insts and host_name not in index.nodes_by_host:
            self._refresher.spawn(self._refresher.reload_host_instances(cell, host_name))
            return
        if index.inst_host.get(instance_uuid) == host_name:
            index.move_instance(instance_uuid, None)
        else:
            index.host_insts.get(host_name, set()).discard(instance_uuid)
        # the instance is gone from the host: consumption we still assumed for it is too
        for hs in list(self._table.by_host.get(host_name, {}).values()):
            if instance_uuid in hs.assumed:
                await self._release(hs, instance_uuid)
        await self._table.reconcile(cell, index.nodes_of({host_name}), confirm=False)

    async def sync_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        """A mismatch (or an unknown host) re-reads the host's instances from its cell DB in
        the background; the cast handler never waits on a database."""
        cell = self._cell_for_host(host_name)
        if cell is None:
            return
        ours = cell.index.host_insts.get(host_name)
        if ours is None and host_name in cell.index.nodes_by_host:
            ours = set()  # a host we load from the DB that has no instances
        if ours is None or ours != set(instance_uuids):
            if ours is not None:
                LOG.info(
                    "instance list of host %s differs from the compute's; re-reading it",
                    host_name,
                )
            self._refresher.spawn(self._refresher.reload_host_instances(cell, host_name))

    def _cell_for_host(self, host: str) -> Cell | None:
        uuid = self._refresher.cell_of_host(host)
        if uuid is None:
            LOG.debug("instance info for host %s, which is in no known cell; ignored", host)
            return None
        return self._table.cells.get(uuid)
