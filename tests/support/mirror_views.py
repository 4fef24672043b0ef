"""Placement's providers as its own API shows them and as the mirror holds them, in one
comparable form; and Candidates normalised for comparison (order carries no meaning)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from asyncsched.placement.candidates import Candidates
from asyncsched.state.placement_mirror import MirrorState
from tests.support.placement_server import Seeder

View = dict[str, dict[str, Any]]


async def api_view(seeder: Seeder, concurrency: int = 16) -> View:
    """Every provider through Placement's API: tree, generation, inventories, traits,
    aggregates and usages."""
    _, data = await seeder.call("GET", "/resource_providers")
    sem = asyncio.Semaphore(concurrency)

    async def one(rp: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        u = rp["uuid"]
        async with sem:
            _, inv = await seeder.call("GET", f"/resource_providers/{u}/inventories")
            _, traits = await seeder.call("GET", f"/resource_providers/{u}/traits")
            _, aggs = await seeder.call("GET", f"/resource_providers/{u}/aggregates")
            _, usages = await seeder.call("GET", f"/resource_providers/{u}/usages")
        return u, {
            "name": rp["name"],
            "generation": rp["generation"],
            "parent": rp["parent_provider_uuid"],
            "root": rp["root_provider_uuid"],
            "inventories": {
                rc: {k: v for k, v in i.items() if k != "resource_provider_generation"}
                for rc, i in inv["inventories"].items()
            },
            "traits": sorted(traits["traits"]),
            "aggregates": sorted(aggs["aggregates"]),
            "usages": {rc: n for rc, n in usages["usages"].items() if n},
        }

    return dict(await asyncio.gather(*(one(rp) for rp in data["resource_providers"])))


def mirror_view(state: MirrorState) -> View:
    out: View = {}
    ps = state.providers
    for p in ps.values():
        out[p.uuid] = {
            "name": p.name,
            "generation": p.generation,
            "parent": ps[p.parent_id].uuid if p.parent_id is not None else None,
            "root": ps[p.root_id].uuid,
            "inventories": {
                rc: {
                    "total": i.total,
                    "reserved": i.reserved,
                    "min_unit": i.min_unit,
                    "max_unit": i.max_unit,
                    "step_size": i.step_size,
                    "allocation_ratio": i.allocation_ratio,
                }
                for rc, i in p.inventories.items()
            },
            "traits": sorted(p.traits),
            "aggregates": sorted(p.aggregates),
            "usages": {rc: n for rc, n in p.used.items() if n},
        }
    return out


def normalised(c: Candidates) -> tuple[set[str], dict[str, Any]]:
    """(allocation requests as canonical JSON, summaries with sorted traits)."""
    areqs = {
        json.dumps(
            {
                "allocations": ar["allocations"],
                "mappings": {k: sorted(v) for k, v in ar.get("mappings", {}).items()},
            },
            sort_keys=True,
        )
        for ar in c.allocation_requests
    }
    sums = {
        u: {**s, "traits": sorted(s.get("traits", []))} for u, s in c.provider_summaries.items()
    }
    return areqs, sums
