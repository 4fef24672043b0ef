"""Read nova.conf-style INI files into a validated, frozen :class:`Config`.

Semantics follow oslo.config, not :mod:`configparser`, so a nova.conf written for
nova-scheduler loads unchanged:

- ``[DEFAULT]`` values do not leak into other sections;
- several files (``--config-file`` repeated, ``--config-dir`` = its ``*.conf`` sorted) merge in
  order, the last value of an option wins; a ``multi`` option (``available_filters``) collects
  every line instead;
- indented lines continue the previous value, matching quotes around a value are stripped,
  inline ``#`` is part of the value;
- ``$name``, ``${name}`` and ``${section.name}`` substitute other values, ``$$`` is a literal
  ``$``;
- sections and options asyncsched does not use are ignored (one debug line each).

Values are typed from the dataclass field types of :mod:`asyncsched.conf.options` and checked
against their metadata (bounds, choices). A bad value raises :class:`ConfigError` with one line
naming file, section, option, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from asyncsched.common.strings import closest
from asyncsched.conf import options as opts
from asyncsched.conf.dsn import normalize_db_url
from asyncsched.conf.listen import parse_listen
from asyncsched.conf.redact import mask_url_passwords
from asyncsched.conf.transport_url import parse_transport_url
from asyncsched.exceptions import AsyncschedError, ConfigError

LOG = logging.getLogger(__name__)

TRUE_WORDS = frozenset({"true", "1", "on", "yes"})
FALSE_WORDS = frozenset({"false", "0", "off", "no"})
VALID_INTERFACES = ("public", "internal", "admin")
_DB_URL_OPTIONS = frozenset(
    {
        ("database", "connection"),
        ("api_database", "connection"),
        ("placement_database", "connection"),
    }
)


@dataclass(frozen=True, slots=True)
class ConfigSources:
    """Where the configuration comes from, in command-line order (files and dirs interleaved)."""

    items: tuple[tuple[Literal["file", "dir"], str], ...] = ()

    @classmethod
    def of(cls, files: Iterable[str] = (), dirs: Iterable[str] = ()) -> ConfigSources:
        """Files first, then directories (the order when the flags are not interleaved)."""
        items: list[tuple[Literal["file", "dir"], str]] = [("file", f) for f in files]
        items += [("dir", d) for d in dirs]
        return cls(tuple(items))

    def files(self) -> list[Path]:
        """The files to read, in order; a directory contributes its ``*.conf`` sorted by name."""
        out: list[Path] = []
        for kind, name in self.items:
            path = Path(name)
            if kind == "file":
                if not path.is_file():
                    raise ConfigError(f"config file {name} not found (--config-file)")
                out.append(path)
            else:
                if not path.is_dir():
                    raise ConfigError(f"config directory {name} not found (--config-dir)")
                out.extend(sorted(p for p in path.glob("*.conf") if p.is_file()))
        return out


@dataclass(frozen=True, slots=True)
class RawValue:
    """One ``key = value`` line as read; ``seq`` orders lines across all files."""

    value: str
    source: str
    lineno: int
    seq: int


RawConfig = dict[str, dict[str, list[RawValue]]]

# "[section] option ...": how every option's message starts (bounded, linear).
_NAMED_OPTION = re.compile(r"\[([A-Za-z0-9_.-]{1,100})\] ([A-Za-z0-9_.-]{1,100})\b")
# How alike an unknown name must be to a known one to be called a typo of it (difflib ratio):
# host_subset_sise / host_subset_size is 0.94; nova's own options we do not read stay quiet.
TYPO_CUTOFF = 0.8
# Sections that are ours alone: any unknown name in them is a mistake, alike or not.
OWN_SECTIONS = frozenset({"asyncsched"})


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """The result of loading: the config, the files read, what was ignored (for debug), the
    warnings (a name that is probably a typo, with file:line and "did you mean"), and where
    each option was set (``(section, option)`` -> ``file:line`` of its last line)."""

    config: opts.Config
    files: tuple[str, ...]
    ignored: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    origins: Mapping[tuple[str, str], str] = dataclasses.field(default_factory=dict)

    def locate(self, message: str) -> str:
        """``message`` with the file:line of the option it starts with ("[section] name ...")
        in front, when that option was set in a file and the message has no location yet."""
        named = _NAMED_OPTION.match(message)
        where = named and self.origins.get((_normalize_section(named[1]), named[2]))
        return f"{where}: {message}" if where else message


# --------------------------------------------------------------------------- INI parsing


def parse_ini(
    text: str, source: str, raw: RawConfig | None = None, seq_start: int = 0
) -> RawConfig:
    """Parse one file's text into ``raw`` (section -> key -> lines), oslo iniparser style."""
    raw = {} if raw is None else raw
    section: str | None = None
    last: tuple[str, str] | None = None  # (section, key) a continuation line extends
    seq = seq_start
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            last = None
            continue
        if stripped[0] in "#;":
            continue
        if line[0].isspace() and last is not None:
            sec, key = last
            prev = raw[sec][key][-1]
            raw[sec][key][-1] = dataclasses.replace(
                prev, value=f"{prev.value}\n{_unquote(stripped)}"
            )
            continue
        if stripped.startswith("["):
            if not stripped.endswith("]") or len(stripped) < 3:
                raise ConfigError(f"{source}:{lineno}: invalid section header {stripped!r}")
            section = _normalize_section(stripped[1:-1].strip())
            raw.setdefault(section, {})
            last = None
            continue
        cut = min((i for i in (stripped.find("="), stripped.find(":")) if i > 0), default=-1)
        if cut < 0:
            raise ConfigError(
                f"{source}:{lineno}: cannot parse line {stripped!r} (expected 'name = value')"
            )
        if section is None:
            raise ConfigError(f"{source}:{lineno}: option outside of any [section]: {stripped!r}")
        key = stripped[:cut].strip()
        value = _unquote(stripped[cut + 1 :].strip())
        seq += 1
        raw[section].setdefault(key, []).append(RawValue(value, source, lineno, seq))
        last = (section, key)
    return raw


def _normalize_section(name: str) -> str:
    """oslo.config: ``DEFAULT`` is exact, every other group name is case-insensitive."""
    return name if name == "DEFAULT" else name.lower()


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def read_files(paths: Sequence[Path]) -> RawConfig:
    """Read and merge the files in order."""
    raw: RawConfig = {}
    seq = 0
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text ({exc.reason})") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
        parse_ini(text, str(path), raw, seq)
        seq = sum(len(v) for sec in raw.values() for v in sec.values())
    return raw


# --------------------------------------------------------------------------- typing


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _split_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); ``X`` -> (X, False)."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(tp))
    return tp, False


def describe_type(tp: Any, meta: Mapping[str, Any]) -> str:
    """What is allowed, in words, for error messages and the sample."""
    base, optional = _split_optional(tp)
    if meta.get("choices"):
        text = "one of " + ", ".join(meta["choices"])
    elif base is bool:
        text = "a boolean (true/false, yes/no, on/off, 1/0)"
    elif base is int or base is float:
        text = "an integer" if base is int else "a number"
        lo, hi = meta.get("min"), meta.get("max")
        if lo is not None and hi is not None:
            text += f" between {_num(lo)} and {_num(hi)}"
        elif lo is not None:
            text += f" >= {_num(lo)}"
        elif hi is not None:
            text += f" <= {_num(hi)}"
    elif typing.get_origin(base) is tuple:
        text = (
            "one value per line (the option may be repeated)"
            if meta.get("multi")
            else "a comma-separated list"
        )
    else:
        text = "a string"
    if optional:
        text += ", empty = unset"
    return text


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


class _BadValue(AsyncschedError, ValueError):
    """A value that does not fit; the message says what is allowed."""


def convert(value: str, tp: Any, meta: Mapping[str, Any]) -> Any:
    """Turn one raw string into the field's type, checking bounds and choices."""
    base, optional = _split_optional(tp)
    allowed = describe_type(tp, meta)
    text = value.strip()
    if typing.get_origin(base) is tuple:
        return tuple(item.strip() for item in text.split(",") if item.strip())
    if text == "":
        if optional:
            return None
        if base is str:
            return ""
        raise _BadValue(f"{allowed} (an empty value is not allowed)")
    if base is bool:
        low = text.lower()
        if low in TRUE_WORDS:
            return True
        if low in FALSE_WORDS:
            return False
        raise _BadValue(allowed)
    if base is int or base is float:
        try:
            number: float = int(text) if base is int else float(text)
        except ValueError:
            raise _BadValue(allowed) from None
        if number != number or number in (float("inf"), float("-inf")):
            raise _BadValue(allowed)
        lo, hi = meta.get("min"), meta.get("max")
        if (lo is not None and number < lo) or (hi is not None and number > hi):
            raise _BadValue(allowed)
        return number
    choices = meta.get("choices")
    if choices:
        for choice in choices:
            if text == choice or text.lower() == choice.lower():
                return choice
        raise _BadValue(allowed)
    return text


# --------------------------------------------------------------------------- substitution

_TEMPLATE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<named>[_a-zA-Z][._a-zA-Z0-9]*))"
)


def _substitute(
    raw_value: RawValue,
    section: str,
    raw: RawConfig,
    where: str,
    depth: int = 0,
) -> str:
    """Expand ``$name`` / ``${section.name}`` / ``$$`` as oslo.config does."""
    if "$" not in raw_value.value:
        return raw_value.value
    if depth > 10:
        raise ConfigError(f"{where}: substitution nests too deep (a ${{...}} loop?)")

    def lookup(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name = match["braced"] if match["braced"] is not None else match["named"]
        sec, key = section, name
        if "." in name:
            sec, key = name.split(".", 1)
            sec = _normalize_section(sec)
        for candidate in (sec, "DEFAULT"):
            lines = raw.get(candidate, {}).get(key)
            if lines:
                return _substitute(lines[-1], candidate, raw, where, depth + 1)
        default = _known_default(sec, key)
        if default is not None:
            return default
        raise ConfigError(
            f"{where}: ${name} refers to an option that is not set (write $$ for a literal '$')"
        )

    return _TEMPLATE.sub(lookup, raw_value.value)


def _known_default(section: str, key: str) -> str | None:
    attr = opts.SECTIONS.get(section)
    for sec_name in ([attr] if attr else []) + ["default"]:
        cls = _SECTION_CLASSES[sec_name]
        for f in dataclasses.fields(cls):
            if f.name == key and f.default is not None:
                return str(f.default)
    return None


# --------------------------------------------------------------------------- building Config

_SECTION_CLASSES: dict[str, type] = {
    f.name: typing.get_type_hints(opts.Config)[f.name] for f in dataclasses.fields(opts.Config)
}


def build_config(raw: RawConfig) -> tuple[opts.Config, list[str]]:
    """Type and validate ``raw`` into a Config; also return the ignored-option notes."""
    ignored: list[str] = []
    sections: dict[str, Any] = {}
    for ini_name, attr in opts.SECTIONS.items():
        cls = _SECTION_CLASSES[attr]
        sections[attr] = _build_section(ini_name, cls, raw.get(ini_name, {}), raw, ignored)
    sections["placement"], auth_section = _with_auth_section(sections["placement"], raw)
    for ini_name in raw:
        if ini_name not in opts.SECTIONS and ini_name != auth_section:
            ignored.append(f"ignoring section [{ini_name}]: not used by asyncsched")
    return opts.Config(**sections), ignored


def _build_section(
    ini_name: str, cls: type, given: dict[str, list[RawValue]], raw: RawConfig, ignored: list[str]
) -> Any:
    """One section's dataclass from its lines; unknown keys noted in ``ignored``."""
    hints = _field_types(cls)
    used: set[str] = set()
    kwargs: dict[str, Any] = {}
    rest_field: str | None = None
    for f in dataclasses.fields(cls):
        if f.metadata.get("rest"):
            rest_field = f.name
            continue
        names = (f.name, *f.metadata.get("deprecated_names", ()))
        lines = sorted((rv for n in names for rv in given.get(n, [])), key=lambda rv: rv.seq)
        used.update(n for n in names if n in given)
        if not lines:
            continue
        kwargs[f.name] = _value_of(ini_name, f, hints[f.name], lines, raw)
    if rest_field is not None:
        kwargs[rest_field] = _rest_of(ini_name, given, used, raw)
        used.update(given)
    for key, lines in given.items():
        if key not in used:
            ignored.append(
                f"ignoring option [{ini_name}] {key} ({lines[-1].source}:{lines[-1].lineno}):"
                " not used by asyncsched"
            )
    return cls(**kwargs)


def _with_auth_section(
    placement: opts.PlacementOptions, raw: RawConfig
) -> tuple[opts.PlacementOptions, str | None]:
    """keystoneauth's ``auth_section``: auth_type and the plugin's options come from that
    section; the session and catalog options stay those of ``[placement]``."""
    if not placement.auth_section:
        return placement, None
    name = _normalize_section(placement.auth_section)
    if name not in raw:
        raise ConfigError(
            f"[placement] auth_section = {placement.auth_section!r}: no section [{name}] in the "
            "configuration files"
        )
    auth = _build_section(name, opts.PlacementOptions, raw[name], raw, [])
    keep = {
        f.name: getattr(placement, f.name)
        for f in dataclasses.fields(opts.PlacementOptions)
        if f.name in opts.KEYSTONE_SESSION_OPTIONS or f.name == "auth_section"
    }
    return dataclasses.replace(auth, **keep), name


def _rest_of(
    section: str, given: dict[str, list[RawValue]], used: set[str], raw: RawConfig
) -> tuple[tuple[str, str], ...]:
    """The section's keys no field took, as (name, substituted last value), sorted by name.

    An empty value means unset, as for the typed options.
    """
    values = (
        (key, _substitute(lines[-1], section, raw, _where(lines[-1], section, key)).strip())
        for key, lines in sorted(given.items())
        if key not in used
    )
    return tuple((key, value) for key, value in values if value)


def _value_of(
    section: str,
    f: dataclasses.Field[Any],
    tp: Any,
    lines: list[RawValue],
    raw: RawConfig,
) -> Any:
    meta = f.metadata
    if meta.get("multi"):
        values = []
        for rv in lines:
            text = _substitute(rv, section, raw, _where(rv, section, f.name)).strip()
            if text:
                values.append(text)
        return tuple(values)
    rv = lines[-1]
    where = _where(rv, section, f.name)
    text = _substitute(rv, section, raw, where)
    try:
        value = convert(text, tp, meta)
        return _check_special(section, f.name, value)
    except (_BadValue, ConfigError) as exc:
        shown = mask_url_passwords(text) if meta.get("secret") and "://" in text else text
        if meta.get("secret") and "://" not in text:
            shown = "***"
        raise ConfigError(f"{where} = {shown!r}: invalid value; allowed: {exc}") from None


def _where(rv: RawValue, section: str, name: str) -> str:
    return f"{rv.source}:{rv.lineno}: [{section}] {name}"


def _check_special(section: str, name: str, value: Any) -> Any:
    """Checks beyond type/bounds/choices, for options whose value has inner structure."""
    if value is None:
        return value
    if (section, name) in _DB_URL_OPTIONS:
        try:
            return normalize_db_url(value)
        except ConfigError as exc:
            raise _BadValue(f"a PostgreSQL or MySQL URL ({exc})") from None
    if section in ("DEFAULT", "oslo_messaging_notifications") and name == "transport_url":
        _check_transport_url(value)
    if section == "asyncsched" and name == "admin_listen":
        try:
            parse_listen(value)
        except ConfigError:
            raise _BadValue("HOST:PORT, e.g. 127.0.0.1:9105 or [::1]:9105") from None
    if section == "placement" and name in ("auth_url", "endpoint_override"):
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise _BadValue("an http:// or https:// URL")
    if section == "placement" and name == "valid_interfaces":
        bad = [i for i in value if i not in VALID_INTERFACES]
        if bad or not value:
            raise _BadValue("a comma-separated list of " + ", ".join(VALID_INTERFACES))
    return value


def _check_transport_url(value: str) -> None:
    """Validate with the parser the RPC server uses, so what loads is what it can connect to."""
    try:
        parse_transport_url(value)
    except ConfigError as exc:
        # The value is already on the line: the reason need not say it again.
        shown = f"transport_url {mask_url_passwords(value)!r}"
        reason = mask_url_passwords(str(exc)).replace(f" in {shown}", "").replace(shown, "it")
        raise _BadValue(f"rabbit://user:pass@host:port/vhost ({reason})") from None


def unknown_name_warnings(raw: RawConfig) -> list[str]:
    """Sections and options asyncsched does not know that look like a typo of one it does
    (or sit in a section of ours): one line each, ``file:line: ...; did you mean ...?``."""
    auth = raw.get("placement", {}).get("auth_section")
    auth_section = _normalize_section(auth[-1].value.strip()) if auth else None
    out: list[str] = []
    for section, keys in raw.items():
        lines = sorted((rv for values in keys.values() for rv in values), key=lambda rv: rv.seq)
        attr = opts.SECTIONS.get(section)
        if attr is None:
            near = closest(section, opts.SECTIONS, n=1, cutoff=TYPO_CUTOFF)
            if near and lines and section != auth_section:
                out.append(
                    f"{_at(lines[0])}: unknown section [{section}]; did you mean [{near[0]}]?"
                )
            continue
        fields = dataclasses.fields(_SECTION_CLASSES[attr])
        if any(f.metadata.get("rest") for f in fields):  # its other keys are read (plugins)
            continue
        known = {n for f in fields for n in (f.name, *f.metadata.get("deprecated_names", ()))}
        for key, values in keys.items():
            if key in known:
                continue
            near = closest(key, known, n=1, cutoff=TYPO_CUTOFF)
            if not near and section in OWN_SECTIONS:
                near = closest(key, known, n=1)
            if near:
                out.append(
                    f"{_at(values[-1])}: unknown option [{section}] {key}; did you mean {near[0]}?"
                )
    return out


def _at(rv: RawValue) -> str:
    return f"{rv.source}:{rv.lineno}"


def origins_of(raw: RawConfig) -> dict[tuple[str, str], str]:
    """``(section, option)`` -> ``file:line`` of the line whose value counts (the last)."""
    return {(section, key): _at(lines[-1]) for section, keys in raw.items()
            for key, lines in keys.items() if lines}  # fmt: skip


def load(sources: ConfigSources) -> LoadedConfig:
    """Read, merge, type and validate; raises ConfigError with one explanatory line."""
    paths = sources.files()
    raw = read_files(paths)
    config, ignored = build_config(raw)
    return LoadedConfig(
        config,
        tuple(str(p) for p in paths),
        tuple(ignored),
        tuple(unknown_name_warnings(raw)),
        origins_of(raw),
    )


def load_config(files: Iterable[str] = (), dirs: Iterable[str] = ()) -> opts.Config:
    """Convenience: load files then dirs, log ignored options at debug, return the Config."""
    loaded = load(ConfigSources.of(files, dirs))
    for note in loaded.ignored:
        LOG.debug(note)
    return loaded.config


def load_string(text: str, source: str = "<string>") -> opts.Config:
    """Build a Config from INI text (tests, embedding)."""
    config, _ = build_config(parse_ini(text, source))
    return config
