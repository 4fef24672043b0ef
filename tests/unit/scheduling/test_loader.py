"""Plugin name resolution: nova's names and paths, entry points, third-party paths, errors."""

from __future__ import annotations

import pytest

from asyncsched.exceptions import ConfigError
from asyncsched.scheduling import loader
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.scheduling.loader import load_filters, load_weighers
from tests.support.sched_helpers import config, spec


class ThirdPartyFilter(BaseHostFilter):
    """A plugin living outside asyncsched, loaded by dotted path."""

    name = "ThirdPartyFilter"

    def host_passes(self, host: HostCandidate, spec: object) -> str | None:
        return None


def _names(conf: object) -> list[str]:
    return [f.name for f in load_filters(conf)]  # type: ignore[arg-type]


def test_default_filters_in_order() -> None:
    assert _names(config()) == [
        "ComputeFilter",
        "ComputeCapabilitiesFilter",
        "ImagePropertiesFilter",
        "ServerGroupAntiAffinityFilter",
        "ServerGroupAffinityFilter",
    ]


def test_all_weighers_are_thirteen() -> None:
    names = {w.name for w in load_weighers(config())}
    assert len(names) == 13
    assert {"RAMWeigher", "CrossCellWeigher", "MetricsWeigher", "PCIWeigher"} <= names


@pytest.mark.parametrize(
    "name",
    [
        "nova.scheduler.filters.compute_filter.ComputeFilter",
        "nova.scheduler.filters.affinity_filter.ServerGroupAntiAffinityFilter",
        "nova.scheduler.filters.io_ops_filter.AggregateIoOpsFilter",
        "asyncsched.scheduling.filters.json_filter.JsonFilter",
        "JsonFilter",
    ],
)
def test_nova_dotted_paths_and_short_names(name: str) -> None:
    loaded = _names(config(filter_scheduler={"enabled_filters": (name,)}))
    assert loaded == [name.rsplit(".", 1)[-1]]


def test_weigher_by_nova_path_and_list() -> None:
    conf = config(
        filter_scheduler={
            "weight_classes": (
                "nova.scheduler.weights.ram.RAMWeigher",
                "nova.scheduler.weights.affinity.ServerGroupSoftAntiAffinityWeigher",
            )
        }
    )
    assert [w.name for w in load_weighers(conf)] == [
        "RAMWeigher",
        "ServerGroupSoftAntiAffinityWeigher",
    ]


def test_third_party_dotted_path() -> None:
    path = f"{__name__}.ThirdPartyFilter"
    conf = config(
        filter_scheduler={
            "available_filters": ("nova.scheduler.filters.all_filters", path),
            "enabled_filters": ("ComputeFilter", path),
        }
    )
    assert _names(conf) == ["ComputeFilter", "ThirdPartyFilter"]


def test_entry_point_group(monkeypatch: pytest.MonkeyPatch) -> None:
    class EP:
        name = "vendor_filter"

        def load(self) -> type:
            return ThirdPartyFilter

    monkeypatch.setattr(
        loader, "entry_points", lambda group: [EP()] if group == loader.FILTER_GROUP else []
    )
    conf = config(filter_scheduler={"enabled_filters": ("vendor_filter",)})
    assert _names(conf) == ["ThirdPartyFilter"]


@pytest.mark.parametrize(
    "names",
    [("ComputeFiltr",), ("nova.scheduler.filters.nope.NopeFilter",), ("os.path.join",)],
)
def test_unknown_filter_stops_start_up(names: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match="enabled_filters"):
        load_filters(config(filter_scheduler={"enabled_filters": names}))


def test_unknown_weigher_stops_start_up() -> None:
    with pytest.raises(ConfigError, match="weight_classes"):
        load_weighers(config(filter_scheduler={"weight_classes": ("RAMWeighr",)}))


def test_pending_numa_filter_refuses_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without issue 7's module the NUMA filter must refuse, never pass every host."""
    real = loader._discover

    def without_numa(package: object, base: type) -> tuple[dict, dict]:  # type: ignore[type-arg]
        found, broken = real(package, base)
        found.pop("NUMATopologyFilter", None)
        broken[loader.GUARDED_FILTERS["NUMATopologyFilter"]] = "ImportError: not built"
        return found, broken

    monkeypatch.setattr(loader, "_discover", without_numa)
    with pytest.raises(ConfigError, match="NUMATopologyFilter is not available"):
        load_filters(config(filter_scheduler={"enabled_filters": ("NUMATopologyFilter",)}))


def test_loaded_filters_are_usable() -> None:
    for f in load_filters(config(filter_scheduler={"enabled_filters": ("AllHostsFilter",)})):
        assert f.is_active(spec()) is False
