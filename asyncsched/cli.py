"""The ``asyncsched`` command: ``serve``, ``check-config`` and ``generate-sample``.

Configuration sources follow oslo.config: ``--config-file`` may be repeated and
``--config-dir`` adds a directory's ``*.conf`` (sorted); they merge in command-line order.
A configuration error prints one line and exits with status 78 (EX_CONFIG, which the systemd
unit lists in RestartPreventExitStatus so a typo does not restart in a loop).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from asyncsched import __version__, preflight
from asyncsched.conf.loader import ConfigSources, LoadedConfig, load
from asyncsched.conf.render import generate_sample, render_effective
from asyncsched.exceptions import ConfigError
from asyncsched.preflight import log_file_error

LOG = logging.getLogger("asyncsched.cli")

EX_OK = 0
EX_FAILURE = 1
EX_CONFIG = 78
DEFAULT_CONFIG_FILES = ("/etc/nova/nova.conf", "/etc/asyncsched/asyncsched.conf")


class _SourceAction(argparse.Action):
    """Collect --config-file / --config-dir into one list, keeping their relative order."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        kind: Literal["file", "dir"] = "dir" if option_string == "--config-dir" else "file"
        items = list(getattr(namespace, "sources", None) or [])
        items.append((kind, str(values)))
        namespace.sources = items


def _add_source_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config-file",
        action=_SourceAction,
        dest="sources",
        metavar="PATH",
        help="nova.conf-style file; repeat to merge several (later files win). Default: "
        + " and ".join(DEFAULT_CONFIG_FILES)
        + " where they exist.",
    )
    parser.add_argument(
        "--config-dir",
        action=_SourceAction,
        dest="sources",
        metavar="DIR",
        help="read DIR/*.conf in sorted order, merged at this point of the command line",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asyncsched",
        description="asyncio drop-in replacement for OpenStack nova-scheduler",
    )
    parser.add_argument("--version", action="version", version=f"asyncsched {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = sub.add_parser("serve", help="run the scheduler (systemd Type=notify aware)")
    _add_source_flags(serve)
    check = sub.add_parser(
        "check-config",
        help="validate as serve does (filters, weighers, auth plugin ...) and print the "
        "effective configuration, secrets masked",
    )
    _add_source_flags(check)
    sample = sub.add_parser(
        "generate-sample", help="write the commented sample configuration from the option schema"
    )
    sample.add_argument("--output", "-o", metavar="PATH", help="write here instead of stdout")
    return parser


def sources_from_args(args: argparse.Namespace) -> ConfigSources:
    """The sources given on the command line, or the default files that exist."""
    items = getattr(args, "sources", None)
    if items:
        return ConfigSources(tuple(items))
    return ConfigSources.of(f for f in DEFAULT_CONFIG_FILES if Path(f).is_file())


def _load_or_report(args: argparse.Namespace) -> LoadedConfig | None:
    try:
        return load(sources_from_args(args))
    except ConfigError as exc:
        print(f"asyncsched: configuration error: {exc}", file=sys.stderr)
        return None


def cmd_serve(args: argparse.Namespace) -> int:
    from asyncsched.app import build_service
    from asyncsched.logs import setup_logging

    loaded = _load_or_report(args)
    if loaded is None:
        return EX_CONFIG
    try:
        setup_logging(loaded.config)
    except OSError as exc:
        err = log_file_error(str(loaded.config.default.log_file), str(exc.strerror))
        print(f"asyncsched: configuration error: {err}", file=sys.stderr)
        return EX_CONFIG
    LOG.info(
        "asyncsched %s starting; config files: %s",
        __version__,
        ", ".join(loaded.files) or "(none: defaults)",
    )
    for note in loaded.ignored:
        LOG.debug(note)
    try:
        service = build_service(loaded.config, sources_from_args(args))
    except ConfigError as exc:  # a component refusing its options at construction
        print(f"asyncsched: configuration error: {exc}", file=sys.stderr)
        return EX_CONFIG
    try:
        return asyncio.run(service.run())
    except KeyboardInterrupt:  # only before the signal handlers are installed
        return EX_FAILURE


def cmd_check_config(args: argparse.Namespace) -> int:
    loaded = _load_or_report(args)
    if loaded is None:
        return EX_CONFIG
    try:
        warnings = preflight.check(loaded.config)  # what serve would refuse, same line
    except ConfigError as exc:
        print(f"asyncsched: configuration error: {exc}", file=sys.stderr)
        return EX_CONFIG
    sys.stdout.write(render_effective(loaded.config, loaded.files))
    if loaded.ignored:
        sys.stdout.write(
            f"\n# {len(loaded.ignored)} sections/options in the files are not used by asyncsched"
            " and were ignored:\n"
        )
        sys.stdout.writelines(f"#   {note}\n" for note in loaded.ignored)
    for warning in warnings:
        print(f"asyncsched: warning: {warning}", file=sys.stderr)
    print("# configuration OK", file=sys.stderr)
    return EX_OK


def cmd_generate_sample(args: argparse.Namespace) -> int:
    text = generate_sample()
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EX_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``asyncsched`` console script and ``python -m asyncsched``."""
    args = build_parser().parse_args(argv)
    commands = {
        "serve": cmd_serve,
        "check-config": cmd_check_config,
        "generate-sample": cmd_generate_sample,
    }
    return commands[args.command](args)
