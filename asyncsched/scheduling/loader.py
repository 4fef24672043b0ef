"""Resolve ``enabled_filters`` / ``weight_classes`` names to plugin classes.

Accepted spellings, so an operator's nova.conf works unchanged: nova's class names
(``ComputeFilter``), ``nova.scheduler.filters.all_filters`` /
``nova.scheduler.weights.all_weighers`` (and our ``asyncsched.scheduling.*.all_*``),
nova dotted class paths
(``nova.scheduler.filters.compute_filter.ComputeFilter`` -> ours by class name), entry points of
the groups ``asyncsched.filters`` / ``asyncsched.weighers`` and dotted paths of third-party
classes. Anything else is a ConfigError, so a typo stops start-up instead of silently filtering
less.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import TypeVar

from asyncsched.common.strings import closest
from asyncsched.conf.options import Config
from asyncsched.exceptions import ConfigError
from asyncsched.scheduling import filters as filters_pkg
from asyncsched.scheduling import weighers as weighers_pkg
from asyncsched.scheduling.filters.base import BaseHostFilter
from asyncsched.scheduling.weighers.base import BaseHostWeigher

FILTER_GROUP = "asyncsched.filters"
WEIGHER_GROUP = "asyncsched.weighers"
ALL_FILTERS = ("nova.scheduler.filters.all_filters", "asyncsched.scheduling.filters.all_filters")
ALL_WEIGHERS = (
    "nova.scheduler.weights.all_weighers",
    "asyncsched.scheduling.weighers.all_weighers",
)

#: Built-in filters whose module may fail to import (the NUMA/PCI fitting it needs is broken
#: or missing in a build): then naming them refuses to start instead of passing every host.
GUARDED_FILTERS = {
    "NUMATopologyFilter": "asyncsched.scheduling.filters.numa_topology",
    "PciPassthroughFilter": "asyncsched.scheduling.filters.pci_passthrough",
}

#: Filters nova removed, with the release (from nova's release notes and the commits that
#: deleted them): a nova.conf that still names one is refused with that reason, as nova is.
REMOVED_FILTERS = {
    "TrustedFilter": "17.0.0 (Queens)",
    "TypeAffinityFilter": "17.0.0 (Queens)",
    "ExactCoreFilter": "18.0.0 (Rocky)",
    "ExactDiskFilter": "18.0.0 (Rocky)",
    "ExactRamFilter": "18.0.0 (Rocky)",
    "CoreFilter": "20.0.0 (Train; Placement filters VCPU)",
    "DiskFilter": "20.0.0 (Train; Placement filters DISK_GB)",
    "RamFilter": "20.0.0 (Train; Placement filters MEMORY_MB)",
    "RetryFilter": "22.0.0 (Victoria; alternates replaced it)",
    "AggregateCoreFilter": "22.0.0 (Victoria; use allocation ratios)",
    "AggregateDiskFilter": "22.0.0 (Victoria; use allocation ratios)",
    "AggregateRamFilter": "22.0.0 (Victoria; use allocation ratios)",
    "AvailabilityZoneFilter": "28.0.0 (2023.2; Placement's AZ pre-filter does it)",
}

P = TypeVar("P", BaseHostFilter, BaseHostWeigher)


def _discover(package: object, base: type[P]) -> tuple[dict[str, type[P]], dict[str, str]]:
    """Built-in plugin classes by name, and modules that failed to import (name -> error)."""
    found: dict[str, type[P]] = {}
    broken: dict[str, str] = {}
    path = getattr(package, "__path__", [])
    prefix = getattr(package, "__name__", "") + "."
    for mod in pkgutil.iter_modules(path, prefix):
        if mod.name.rsplit(".", 1)[1] in ("base",) or mod.ispkg:
            continue
        try:
            module = importlib.import_module(mod.name)
        except Exception as exc:  # a broken optional module must not hide the others
            broken[mod.name] = f"{type(exc).__name__}: {exc}"
            continue
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(obj, base)
                and obj is not base
                and obj.__module__ == module.__name__
                and obj.name
                and not obj.__name__.startswith("_")
            ):
                found[obj.__name__] = obj
    return found, broken


def builtin_filters() -> dict[str, type[BaseHostFilter]]:
    return _discover(filters_pkg, BaseHostFilter)[0]


def builtin_weighers() -> dict[str, type[BaseHostWeigher]]:
    return _discover(weighers_pkg, BaseHostWeigher)[0]


def _import_dotted(path: str) -> object | None:
    module_name, _, attr = path.rpartition(".")
    if not module_name:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    return getattr(module, attr, None)


def _entry_point(group: str, name: str) -> object | None:
    for ep in entry_points(group=group):
        if ep.name == name:
            try:
                loaded: object = ep.load()
                return loaded
            except Exception as exc:
                raise ConfigError(f"entry point {group}:{name} failed to load: {exc}") from exc
    return None


def _resolve(
    names: Iterable[str],
    *,
    option: str,
    base: type[P],
    package: object,
    all_names: tuple[str, ...],
    group: str,
    nova_prefix: str,
) -> list[type[P]]:
    builtin, broken = _discover(package, base)
    out: list[type[P]] = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name in all_names:
            out.extend(c for c in builtin.values() if c not in out)
            continue
        short = name.rsplit(".", 1)[-1]
        if name.startswith(nova_prefix) or "." not in name:
            if short in builtin:
                out.append(builtin[short])
                continue
            if base is BaseHostFilter and short in GUARDED_FILTERS:
                err = broken.get(GUARDED_FILTERS[short], "module not present")
                raise ConfigError(
                    f"[filter_scheduler] {option}: {short} is not available in this build "
                    f"(its module failed to import: {err}); remove it from {option}"
                )
        found = _entry_point(group, name)
        if found is None and "." in name:
            found = _import_dotted(name)
        if isinstance(found, type) and issubclass(found, base):
            out.append(found)
            continue
        if base is BaseHostFilter and short in REMOVED_FILTERS:
            raise ConfigError(
                f"[filter_scheduler] {option}: {short} was removed in nova "
                f"{REMOVED_FILTERS[short]}; remove it"
            )
        near = ", ".join(closest(short, builtin))
        raise ConfigError(f"[filter_scheduler] {option}: unknown plugin {name!r}; closest: {near}")
    return out


def load_filters(config: Config) -> list[BaseHostFilter]:
    """Instantiate ``enabled_filters`` in order; raises ConfigError (unknown name, bad config)."""
    fs = config.filter_scheduler

    def resolve(names: Iterable[str], option: str) -> list[type[BaseHostFilter]]:
        return _resolve(
            names,
            option=option,
            base=BaseHostFilter,
            package=filters_pkg,
            all_names=ALL_FILTERS,
            group=FILTER_GROUP,
            nova_prefix="nova.scheduler.filters.",
        )

    available = resolve(fs.available_filters, "available_filters")
    by_name = {c.__name__: c for c in available}
    classes: list[type[BaseHostFilter]] = []
    for name in fs.enabled_filters:
        short = name.strip().rsplit(".", 1)[-1]
        if short in by_name:
            classes.append(by_name[short])
            continue
        classes.extend(resolve([name], "enabled_filters"))
    out: list[BaseHostFilter] = []
    for cls in classes:
        try:
            instance = cls(config)
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(f"filter {cls.__name__} failed to initialise: {exc}") from exc
        instance.check_config()
        out.append(instance)
    return out


def load_weighers(config: Config) -> list[BaseHostWeigher]:
    """Instantiate ``weight_classes``; raises ConfigError on an unknown name."""
    classes = _resolve(
        config.filter_scheduler.weight_classes,
        option="weight_classes",
        base=BaseHostWeigher,
        package=weighers_pkg,
        all_names=ALL_WEIGHERS,
        group=WEIGHER_GROUP,
        nova_prefix="nova.scheduler.weights.",
    )
    seen: list[type[BaseHostWeigher]] = []
    for cls in classes:
        if cls not in seen:
            seen.append(cls)
    out: list[BaseHostWeigher] = []
    for cls in seen:
        try:
            out.append(cls(config))
        except Exception as exc:
            raise ConfigError(f"weigher {cls.__name__} failed to initialise: {exc}") from exc
    return out
