"""Hand-built mirror states for the candidates unit tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from asyncsched.objects.models import RequestGroup
from asyncsched.placement.query import ResourceRequest
from asyncsched.state.placement_mirror import Inventory, MirrorState, Provider

TRAITS = frozenset(
    {
        "OWNER_NOVA",
        "COMPUTE_STATUS_DISABLED",
        "CUSTOM_FAST",
        "CUSTOM_GOLD",
        "MISC_SHARES_VIA_AGGREGATE",
    }
)
CLASSES = frozenset({"VCPU", "MEMORY_MB", "DISK_GB", "PCPU", "CUSTOM_GPU", "SRIOV_NET_VF"})


def inv(
    total: int,
    *,
    reserved: int = 0,
    ratio: float = 1.0,
    min_unit: int = 1,
    max_unit: int | None = None,
    step: int = 1,
) -> Inventory:
    return Inventory(
        total, reserved, min_unit, total if max_unit is None else max_unit, step, ratio
    )


class Cloud:
    """Providers added one by one, then ``state()``."""

    def __init__(self) -> None:
        self.providers: dict[int, Provider] = {}

    def add(
        self,
        uuid: str,
        inventories: Mapping[str, Inventory] | None = None,
        *,
        parent: str | None = None,
        traits: Sequence[str] = ("OWNER_NOVA",),
        aggregates: Sequence[str] = (),
        used: Mapping[str, int] | None = None,
    ) -> int:
        rp_id = len(self.providers) + 1
        parent_id = None
        root_id = rp_id
        if parent is not None:
            parent_p = next(p for p in self.providers.values() if p.uuid == parent)
            parent_id, root_id = parent_p.id, parent_p.root_id
        self.providers[rp_id] = Provider(
            id=rp_id,
            uuid=uuid,
            name=uuid,
            generation=1,
            root_id=root_id,
            parent_id=parent_id,
            inventories=dict(inventories or {}),
            traits=frozenset(traits),
            aggregates=frozenset(aggregates),
            used=dict(used or {}),
        )
        return rp_id

    def use(self, rp_id: int, **used: int) -> None:
        """New usage for a provider (a new Provider value, as a refresh makes it)."""
        p = self.providers[rp_id]
        self.providers[rp_id] = replace(p, used={**p.used, **used})

    def compute(
        self, uuid: str, vcpu: int = 8, mem: int = 8192, disk: int = 100, **kw: object
    ) -> int:
        return self.add(
            uuid,
            {"VCPU": inv(vcpu), "MEMORY_MB": inv(mem), "DISK_GB": inv(disk)},
            **kw,  # type: ignore[arg-type]
        )

    def state(self) -> MirrorState:
        return MirrorState.build(dict(self.providers), TRAITS, CLASSES)


def request(
    resources: Mapping[str, int] | None = None,
    *,
    required: Sequence[str] = (),
    forbidden: Sequence[str] = (),
    member_of: Sequence[Sequence[str]] = (),
    not_in: Sequence[str] = (),
    in_tree: str | None = None,
    root_required: Sequence[str] = (),
    root_forbidden: Sequence[str] = (),
    extra_groups: Sequence[RequestGroup] = (),
) -> ResourceRequest:
    g = RequestGroup(
        use_same_provider=False,
        resources=dict(resources if resources is not None else {"VCPU": 1, "MEMORY_MB": 512}),
        required_traits=frozenset(required),
        forbidden_traits=frozenset(forbidden),
        aggregates=tuple(tuple(a) for a in member_of),
        forbidden_aggregates=frozenset(not_in),
        in_tree=in_tree,
    )
    return ResourceRequest(
        groups=(g, *extra_groups),
        limit=None,
        root_required=frozenset(root_required),
        root_forbidden=frozenset(root_forbidden),
    )
