"""The ``asyncsched`` command: ``serve``, ``check-config``, ``generate-sample``, and the
operator's ``explain`` and ``capacity`` (clients of the admin endpoint).

Configuration sources follow oslo.config: ``--config-file`` may be repeated and
``--config-dir`` adds a directory's ``*.conf`` (sorted); they merge in command-line order.
A configuration error prints one line and exits with status 78 (EX_CONFIG, which the systemd
unit lists in RestartPreventExitStatus so a typo does not restart in a loop).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import ssl
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from asyncsched import __version__, preflight
from asyncsched.conf.loader import ConfigSources, LoadedConfig, load
from asyncsched.conf.redact import mask_secrets, mask_url_passwords
from asyncsched.conf.render import generate_sample, render_effective
from asyncsched.exceptions import ConfigError
from asyncsched.preflight import log_file_error

LOG = logging.getLogger("asyncsched.cli")

EX_OK = 0
EX_FAILURE = 1
EX_CONFIG = 78
DEFAULT_CONFIG_FILES = ("/etc/nova/nova.conf", "/etc/asyncsched/asyncsched.conf")
DEFAULT_ADMIN_URL = "http://127.0.0.1:9105"  # the admin_listen the option's help suggests
ADMIN_TIMEOUT = 120.0  # a capacity run on a large cloud takes seconds, not minutes


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
    explain = sub.add_parser(
        "explain", help="what select_destinations would do now for a request, and why (dry run)"
    )
    _add_request_flags(explain)
    explain.add_argument("--host", metavar="NAME", help="also say where this host stands")
    explain.add_argument("--num-instances", type=int, default=1, metavar="N")
    explain.add_argument("--top", type=int, default=10, metavar="N", help="best hosts shown")
    capacity = sub.add_parser(
        "capacity", help="how many more instances of a flavor fit, and where (dry run)"
    )
    _add_request_flags(capacity)
    capacity.add_argument("--host", metavar="NAME", help="also say how many fit on this host")
    return parser


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def _add_request_flags(parser: argparse.ArgumentParser) -> None:
    """The openstack CLI's flavor words, and where the admin endpoint is."""
    parser.add_argument(
        "--url", default=DEFAULT_ADMIN_URL, help=f"admin endpoint (default {DEFAULT_ADMIN_URL})"
    )
    parser.add_argument("--token-file", metavar="PATH", help="file with the admin bearer token")
    parser.add_argument(
        "--ca-file",
        metavar="PATH",
        help="CA certificate(s) to trust for an https:// --url (e.g. the admin_cert_file itself)",
    )
    parser.add_argument("--vcpus", type=int, default=1)
    parser.add_argument("--ram", type=int, default=512, metavar="MiB")
    parser.add_argument("--disk", type=int, default=0, metavar="GB")
    for flag, what in (("--extra-spec", "flavor extra spec"), ("--image-prop", "image property"),
                       ("--hint", "scheduler hint")):  # fmt: skip
        parser.add_argument(flag, type=_pair, action="append", default=[], metavar="K=V", help=what)
    parser.add_argument("--az", metavar="ZONE", help="availability zone")
    parser.add_argument("--json", action="store_true", help="print the JSON answer")


def sources_from_args(args: argparse.Namespace) -> ConfigSources:
    """The sources given on the command line, or the default files that exist."""
    items = getattr(args, "sources", None)
    if items:
        return ConfigSources(tuple(items))
    return ConfigSources.of(f for f in DEFAULT_CONFIG_FILES if Path(f).is_file())


def _config_error(exc: object) -> None:
    """A configuration error on stderr, the URLs it quotes masked (the loader already shows
    other secret values as ``***``; prose such as "v3password: missing ..." stays readable)."""
    print(f"asyncsched: configuration error: {mask_url_passwords(str(exc))}", file=sys.stderr)


def _load_or_report(args: argparse.Namespace) -> LoadedConfig | None:
    try:
        return load(sources_from_args(args))
    except ConfigError as exc:
        _config_error(exc)
        return None


def cmd_serve(args: argparse.Namespace) -> int:
    from asyncsched.app import build_service
    from asyncsched.logs import setup_logging

    loaded = _load_or_report(args)
    if loaded is None:
        return EX_CONFIG
    try:
        handler = setup_logging(loaded.config, background=True)
    except OSError as exc:
        err = log_file_error(str(loaded.config.default.log_file), str(exc.strerror))
        _config_error(loaded.locate(str(err)))
        return EX_CONFIG
    LOG.info(
        "asyncsched %s starting; config files: %s",
        __version__,
        ", ".join(loaded.files) or "(none: defaults)",
    )
    for note in loaded.ignored:
        LOG.debug(note)
    for typo in loaded.warnings:
        LOG.warning(typo)
    try:
        try:
            service = build_service(loaded.config, sources_from_args(args))
        except ConfigError as exc:  # a component refusing its options at construction
            handler.close()  # the queued "starting" line first, never inside this one
            _config_error(loaded.locate(str(exc)))
            return EX_CONFIG
        try:
            return asyncio.run(service.run())
        except KeyboardInterrupt:  # only before the signal handlers are installed
            return EX_FAILURE
    finally:
        handler.close()  # the log lines still queued are written before the process ends


def cmd_check_config(args: argparse.Namespace) -> int:
    loaded = _load_or_report(args)
    if loaded is None:
        return EX_CONFIG
    for typo in loaded.warnings:  # up front: the likeliest reason for what follows
        print(f"asyncsched: warning: {typo}", file=sys.stderr)
    try:
        warnings = preflight.check(loaded.config)  # what serve would refuse, same line
    except ConfigError as exc:
        _config_error(loaded.locate(str(exc)))
        return EX_CONFIG
    sys.stdout.write(render_effective(loaded.config, loaded.files))
    if loaded.ignored:
        sys.stdout.write(
            f"\n# {len(loaded.ignored)} sections/options in the files are not used by asyncsched"
            " and were ignored:\n"
        )
        sys.stdout.writelines(f"#   {mask_secrets(note)}\n" for note in loaded.ignored)
    for warning in warnings:
        print(f"asyncsched: warning: {mask_secrets(str(warning))}", file=sys.stderr)
    print("# configuration OK", file=sys.stderr)
    return EX_OK


def cmd_generate_sample(args: argparse.Namespace) -> int:
    text = generate_sample()
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EX_OK


def _request_fields(args: argparse.Namespace) -> dict[str, Any]:
    from asyncsched.admin.explain_api import PAIR_PARAMS

    fields: dict[str, Any] = {"vcpus": args.vcpus, "ram": args.ram, "disk": args.disk}
    for param, key in PAIR_PARAMS.items():  # --extra-spec K=V lands in args.extra_spec
        if getattr(args, param):
            fields[key] = dict(getattr(args, param))
    if args.az:
        fields["availability_zone"] = args.az
    return fields


async def _admin_call(
    url: str, headers: dict[str, str], method: str, path: str, **kw: Any
) -> tuple[int, Any]:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=ADMIN_TIMEOUT)
    async with (
        aiohttp.ClientSession(timeout=timeout, headers=headers) as session,
        session.request(method, url.rstrip("/") + path, **kw) as resp,
    ):
        try:
            body = await resp.json(content_type=None)
        except ValueError:
            body = {"error": (await resp.text()).strip()}
        return resp.status, body


def _ask(args: argparse.Namespace, method: str, path: str, **kw: Any) -> Any | None:
    """The admin endpoint's JSON answer, or None after printing why there is none."""
    import aiohttp

    headers = {}
    if args.token_file:
        try:
            token = Path(args.token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            print(f"asyncsched: --token-file {args.token_file}: {exc.strerror}", file=sys.stderr)
            return None
        headers["Authorization"] = f"Bearer {token}"
    try:
        if args.ca_file:
            kw["ssl"] = ssl.create_default_context(cafile=args.ca_file)
        status, body = asyncio.run(_admin_call(args.url, headers, method, path, **kw))
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        reason = mask_secrets(str(exc) or type(exc).__name__)
        print(
            f"asyncsched: cannot reach {mask_url_passwords(args.url)}: {reason} (is the admin "
            "endpoint on? set [asyncsched] admin_listen, and give its address with --url)",
            file=sys.stderr,
        )
        return None
    if status != 200:
        error = body.get("error") if isinstance(body, dict) else body
        where = mask_url_passwords(f"{args.url}{path}")
        print(f"asyncsched: {where}: HTTP {status}: {error}", file=sys.stderr)
        return None
    return body


def _show(args: argparse.Namespace, answer: Any, text: Callable[[Any], str]) -> int:
    if answer is None:
        return EX_FAILURE
    sys.stdout.write(json.dumps(answer, indent=2) + "\n" if args.json else text(answer))
    return EX_OK


def cmd_explain(args: argparse.Namespace) -> int:
    from asyncsched.admin.report import explain_text, request_words

    fields = _request_fields(args)
    body = {**fields, "num_instances": args.num_instances, "top": args.top}
    if args.host:
        body["host"] = args.host
    answer = _ask(args, "POST", "/v1/explain", json=body)
    return _show(args, answer, lambda a: explain_text(a, request_words(fields)))


def cmd_capacity(args: argparse.Namespace) -> int:
    from asyncsched.admin.explain_api import query_from_fields
    from asyncsched.admin.report import capacity_text, request_words

    fields = _request_fields(args)
    answer = _ask(args, "GET", "/v1/capacity", params=query_from_fields(fields))
    return _show(args, answer, lambda a: capacity_text(a, request_words(fields), args.host))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``asyncsched`` console script and ``python -m asyncsched``."""
    args = build_parser().parse_args(argv)
    commands = {
        "serve": cmd_serve,
        "check-config": cmd_check_config,
        "generate-sample": cmd_generate_sample,
        "explain": cmd_explain,
        "capacity": cmd_capacity,
    }
    return commands[args.command](args)
