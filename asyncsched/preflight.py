"""What ``asyncsched serve`` would refuse, found without starting anything (``check-config``).

The daemon is built exactly as ``serve`` builds it (filters, weighers, the Placement auth
plugin, the notifier ...) but nothing is started, so every refusal is the same one line.
Values that load but probably do not mean what the operator wrote come back as warnings.
"""

from __future__ import annotations

import os
from pathlib import Path

from asyncsched.conf.options import Config
from asyncsched.exceptions import ConfigError


def log_file_error(path: str, reason: str) -> ConfigError:
    """The one line both ``serve`` and ``check-config`` give for an unusable log file."""
    return ConfigError(f"[DEFAULT] log_file = {path!r}: cannot open: {reason}")


def check(config: Config) -> list[str]:
    """Raise ConfigError for anything ``serve`` refuses; return the warnings."""
    from asyncsched.app import build_daemon

    build_daemon(config)
    _check_log_file(config.default.log_file)
    return ratio_setting_warnings(config) + placement_warnings(config)


def placement_warnings(config: Config) -> list[str]:
    """``[placement]`` keys nothing reads (a typo, or an option of another auth plugin)."""
    from asyncsched.placement.auth import plugin_name, unread_options

    if config.placement.auth_section:  # a shared section (keystone_authtoken) has more keys
        return []
    name = plugin_name(config.placement)
    return [
        f"[placement] {key}: not an option of auth plugin {name} nor of keystoneauth's "
        "session/adapter; ignored"
        for key in unread_options(config.placement)
    ]


def _check_log_file(path: str | None) -> None:
    if path is None:
        return
    target = Path(path)
    if target.exists():
        if target.is_dir():
            raise log_file_error(path, "Is a directory")
        if not os.access(target, os.W_OK):
            raise log_file_error(path, "Permission denied")
        return
    if not target.parent.is_dir():
        raise log_file_error(path, "No such file or directory")
    if not os.access(target.parent, os.W_OK):
        raise log_file_error(path, "Permission denied")


def ratio_setting_warnings(config: Config) -> list[str]:
    """``name=ratio`` lists: nova takes the name as written, spaces included, and ignores
    malformed elements; both load fine and quietly weigh (or filter) nothing."""
    out: list[str] = []
    settings = (
        ("[metrics] weight_setting", config.metrics.weight_setting),
        (
            "[filter_scheduler] image_props_weight_setting",
            config.filter_scheduler.image_props_weight_setting,
        ),
    )
    for where, items in settings:
        for item in items:
            name, sep, ratio = item.partition("=")
            try:
                float(ratio)
            except ValueError:
                sep = ""
            if not (name and sep):
                out.append(f"{where}: {item!r} is not name=ratio; nova ignores it")
            elif name != name.strip():
                out.append(
                    f"{where}: {item!r} has spaces around the name; nova takes the name as "
                    f"written ({name!r}), which matches nothing named {name.strip()!r}"
                )
    return out
