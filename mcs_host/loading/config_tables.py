"""Tables added to a configuration file as text, and the constructor parameters to offer in one.

:func:`with_tables` appends ``[drivers.<label>]`` or ``[mcp_servers.<label>]`` tables to what
the file holds: every other line and comment is kept byte for byte, and the result is read
back and must be the old settings plus exactly these tables (a file whose layout would make
them mean something else, such as an inline ``drivers = {...}``, is refused rather than
rewritten). :func:`constructor_parameters` reads a driver class's keyword parameters from its
module's source with :mod:`ast`, and :func:`imported_from` where a module imports a class it
re-exports: no driver code is imported or run. Standard library only, but for the models that
check a table.
"""

from __future__ import annotations

import ast
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from .config_schema import ConfigError, DriverSettings, MCPServerSettings

# used by mcs-host add: Parameter, Table, constructor_parameters, driver_table,
# imported_from, parsed, server_table, toml_value, with_tables
__all__: list[str] = []

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_INT64 = range(-(2**63), 2**63)
_REQUIRED = "?"
_UNWRITTEN = "…"


@dataclass(frozen=True, slots=True)
class Table:
    """A table to add: its kind and label, its header comment, and its settings."""

    kind: Literal["drivers", "mcp_servers"]
    label: str
    comment: tuple[str, ...]
    """Comment lines written above its header (each without the ``#``)."""
    values: Mapping[str, Any]
    """Its keys and values, as TOML will read them back."""
    commented: tuple[str, ...] = ()
    """Comment lines written after its keys (each without the ``#``)."""

    @property
    def name(self) -> str:
        """``drivers.LABEL`` or ``mcp_servers.LABEL``."""
        return f"{self.kind}.{self.label}"

    def text(self) -> str:
        """The table as TOML."""
        lines = [f"# {line}".rstrip() for line in self.comment]
        lines.append(f"[{self.kind}.{_key(self.label)}]")
        lines += [f"{_key(key)} = {toml_value(value)}" for key, value in self.values.items()]
        lines += [f"# {line}".rstrip() for line in self.commented]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class Parameter:
    """A keyword parameter of a driver's constructor."""

    name: str
    required: bool
    """Whether it has no default."""
    default: str | None
    """Its default as TOML; ``None`` when it has none, or one TOML cannot write (``None``, or
    not a constant)."""

    def shown(self) -> str:
        """``name = default`` (``?`` when required, ``…`` for a default TOML cannot write)."""
        value = _REQUIRED if self.required else self.default or _UNWRITTEN
        return f"{_key(self.name)} = {value}"


def driver_table(
    label: str,
    driver: str,
    settings: Mapping[str, Any] | None,
    parameters: Sequence[Parameter] | None,
    comment: Sequence[str],
) -> Table:
    """``[drivers.<label>]`` mounting the installed driver ``driver`` (named only when it is
    not ``label``) with ``settings``; without settings, a commented ``settings`` line offers
    the constructor's ``parameters`` (``None``: they could not be read)."""
    values: dict[str, Any] = {} if driver == label else {"driver": driver}
    commented: tuple[str, ...] = ()
    if settings is not None:
        values["settings"] = dict(settings)
    elif parameters:
        shown = ", ".join(parameter.shown() for parameter in parameters)
        commented = (
            f"settings = {{ {shown} }}",
            f"  its constructor's keyword arguments ({_REQUIRED}: no default, {_UNWRITTEN}: "
            "a default TOML cannot write): set them, then remove the #",
        )
    else:
        why = "it takes none" if parameters is not None else "they could not be read"
        commented = (f"settings = {{}}  # its constructor's keyword arguments ({why})",)
    return Table("drivers", label, tuple(comment), values, commented)


def server_table(
    label: str, distribution: str, script: str | None, comment: Sequence[str]
) -> Table:
    """``[mcp_servers.<label>]`` running the console script of ``distribution`` (``script``
    named when it has several)."""
    values: dict[str, Any] = {"distribution": distribution}
    if script is not None:
        values["script"] = script
    return Table("mcp_servers", label, tuple(comment), values)


def parsed(text: str, path: str) -> dict[str, Any]:
    """The settings of a configuration file's ``text``; a :class:`ConfigError` naming
    ``path`` when it is not TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path} is not valid TOML: {error}") from None


def with_tables(text: str, path: str, tables: Sequence[Table]) -> str:
    """``text`` (the file at ``path``) with ``tables`` appended, each line it had kept. A
    :class:`ConfigError` when the result would not read back as the old settings plus exactly
    these tables, or a table is not a valid one."""
    before = parsed(text, path)
    added = text if not text or text.endswith("\n") else text + "\n"
    for table in tables:
        added += ("\n" if added else "") + table.text()
    try:
        after = tomllib.loads(added)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(
            f"{path}: the tables {', '.join(t.name for t in tables)} cannot be added to it as "
            f"it is laid out ({error}): add them by hand"
        ) from None
    expected = _merged(before, tables)
    if after != expected:
        raise ConfigError(
            f"{path}: adding {', '.join(t.name for t in tables)} at its end would change "
            "other settings as it is laid out: add them by hand"
        )
    for table in tables:
        model = DriverSettings if table.kind == "drivers" else MCPServerSettings
        try:
            model.model_validate(after[table.kind][table.label])
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise ConfigError(f"[{table.name}] {where}: {first['msg']}") from None
    return added


def _merged(before: Mapping[str, Any], tables: Sequence[Table]) -> dict[str, Any]:
    """``before`` with each table set, as TOML reads them back (values normalised)."""
    merged = dict(before)
    for table in tables:
        group = merged.get(table.kind, {})
        if not isinstance(group, dict):
            raise ConfigError(f"[{table.kind}] is not a table of tables: add it by hand")
        merged[table.kind] = {
            **group,
            table.label: tomllib.loads(table.text())[table.kind][table.label],
        }
    return merged


def toml_value(value: Any) -> str:
    """``value`` (JSON's types but null) as a TOML value; a :class:`ConfigError` for a value
    TOML cannot hold (null, an integer beyond 64 bits)."""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        if value not in _INT64:
            raise ConfigError(f"{value} is beyond the integers TOML holds (64 bits)")
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    if value is None:
        raise ConfigError("TOML has no null: leave the setting out to use its default")
    raise ConfigError(f"{value!r} is not a value TOML holds")


def _key(key: object) -> str:
    """A TOML key: bare when it may be, else a quoted string."""
    text = str(key)
    return text if _BARE_KEY.fullmatch(text) else _string(text)


def _string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for character in text:
        if character in '"\\':
            out.append("\\" + character)
        elif character < " " or character == "\x7f":
            out.append(f"\\u{ord(character):04x}")
        else:
            out.append(character)
    return '"' + "".join(out) + '"'


def constructor_parameters(source: bytes, class_name: str) -> tuple[Parameter, ...] | None:
    """The keyword parameters of the ``__init__`` of the class ``class_name`` in a module's
    ``source`` (or of the first base class defined in that module that has one), read with
    :mod:`ast`, never run; ``None`` when the source does not show them."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    seen: set[str] = set()
    current = classes.get(class_name)
    while current is not None and current.name not in seen:
        seen.add(current.name)
        for node in current.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "__init__":
                return _parameters(node.args)
        bases = [b.id for b in current.bases if isinstance(b, ast.Name) and b.id in classes]
        current = classes[bases[0]] if bases else None
    return None


def imported_from(source: bytes, name: str) -> tuple[str, str] | None:
    """Where a module's ``source`` takes the name ``name`` from when a top-level ``from MODULE
    import ORIGINAL [as name]`` binds it (as a package's ``__init__.py`` re-exports its driver
    class): ``(MODULE, ORIGINAL)``, ``MODULE`` with the leading dots of a relative import;
    ``None`` when no such import binds it. Read with :mod:`ast`, never run."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found = None
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name and alias.name != "*":
                    found = ("." * node.level + (node.module or ""), alias.name)
    return found


def _parameters(arguments: ast.arguments) -> tuple[Parameter, ...]:
    """The parameters a caller may pass by keyword (``self`` and positional-only left out, and
    an optional one whose name starts with ``_``: private by convention, such as a test's
    injected adapter)."""
    positional = list(arguments.posonlyargs) + list(arguments.args)
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(arguments.defaults))
    defaults += list(arguments.defaults)
    found = [
        Parameter(arg.arg, default is None, _default(default))
        for index, (arg, default) in enumerate(zip(positional, defaults, strict=True))
        if index >= max(len(arguments.posonlyargs), 1)
    ]
    found += [
        Parameter(arg.arg, default is None, _default(default))
        for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    ]
    return tuple(p for p in found if p.required or not p.name.startswith("_"))


def _default(node: ast.expr | None) -> str | None:
    """A default written as a constant, as TOML; ``None`` when there is none or it is not a
    constant TOML can hold."""
    if node is None:
        return None
    try:
        return toml_value(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, ConfigError):
        return None
