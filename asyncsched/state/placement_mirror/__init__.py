"""A live, read-only mirror of Placement's database (providers, inventories, usage, traits,
aggregates), so allocation candidates can be answered without asking Placement.

- ``model``: frozen values (``Provider``, ``Inventory``, ``MirrorState``);
- ``reader``: the SQL of a full load and of a refresh, in one read-only transaction;
- ``mirror``: ``PlacementMirror``, the component (load before READY, background refresh,
  age and health, claims of this process not yet seen).
"""

from asyncsched.state.placement_mirror.mirror import PlacementMirror
from asyncsched.state.placement_mirror.model import Inventory, MirrorState, Provider

__all__ = ["Inventory", "MirrorState", "PlacementMirror", "Provider"]
