"""Prompting: tools rendered as JSON, XML or compact text, and the texts around them.

The texts live in a TOML data file (``mcs_host/prompts/default.toml``); a project overrides
them with a file of its own, table by table. Which rendering and which native tool shape a
model gets is decided from its name by the patterns in the same file.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mcs_host._files import CONFIG_LIMIT, InputError, read_bytes

from .messages import Provider

if TYPE_CHECKING:
    from mcs_host.contract import Tool

__all__ = ["Prompts", "render_tools"]

Rendering = Literal["json", "xml", "compact"]


@dataclass(frozen=True, slots=True)
class Prompts:
    """The prompt texts and the model-name patterns that choose among them."""

    formats: Mapping[str, tuple[str, ...]]
    providers: Mapping[str, tuple[str, ...]]
    system: Mapping[str, str]
    retry: Mapping[str, str]
    source: str

    @classmethod
    def load(cls, path: str | Path | None = None, sha256: str | None = None) -> Prompts:
        """The defaults, with the tables of ``path`` (if given) laid over them; with
        ``sha256`` (an approval's), other bytes at ``path`` are refused as a file that
        changed (``ValueError``)."""
        from importlib import resources  # noqa: PLC0415 - not when the module is imported

        default = resources.files("mcs_host").joinpath("prompts/default.toml").read_text("utf-8")
        data = tomllib.loads(default)
        source = "mcs_host/prompts/default.toml"
        if path is not None:
            try:
                raw = read_bytes(path, "prompts file", CONFIG_LIMIT)
                changed = sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256
                override = {} if changed else tomllib.loads(raw.decode("utf-8"))
            except FileNotFoundError:
                raise ValueError(f"prompts file {path}: no such file") from None
            except InputError as exc:
                raise ValueError(str(exc)) from None
            except RecursionError:
                raise ValueError(f"prompts file {path}: nested too deeply") from None
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise ValueError(f"prompts file {path}: {exc}") from None
            if changed:
                raise ValueError(
                    f"prompts file {path}: changed since its directory's approval was "
                    "checked: these are not the bytes approved; run the command again"
                )
            for table, values in override.items():
                if table not in data or not isinstance(values, dict):
                    raise ValueError(f"prompts file {path}: unknown table [{table}]")
                data[table] = {**data[table], **values}
            source = str(path)
        return cls(
            {k: tuple(v) for k, v in data["formats"].items()},
            {k: tuple(v) for k, v in data["providers"].items()},
            {k: str(v).strip("\n") for k, v in data["system"].items()},
            {k: str(v).strip("\n") for k, v in data["retry"].items()},
            source,
        )

    def rendering_for(self, model_name: str | None) -> Rendering:
        if model_name:
            name = model_name.lower()
            for rendering in ("xml", "compact"):
                if any(fnmatch.fnmatchcase(name, p) for p in self.formats.get(rendering, ())):
                    return rendering
        return "json"

    def provider_for(self, model_name: str | None) -> Provider:
        if model_name:
            name = model_name.lower()
            for provider, patterns in self.providers.items():
                if any(fnmatch.fnmatchcase(name, p) for p in patterns):
                    return provider  # type: ignore[return-value]
        return "openai"

    def text(self, table: Mapping[str, str], key: str, **values: str) -> str:
        out = table[key]
        for name, value in values.items():
            out = out.replace("{" + name + "}", value)
        return out


def render_tools(tools: Sequence[Tool], rendering: Rendering) -> str:
    """The tools as the model family reads them best."""
    if rendering == "xml":
        return "\n".join(_xml_tool(tool) for tool in tools)
    if rendering == "compact":
        return "\n".join(_compact_tool(tool) for tool in tools)
    described = [
        {"name": t.name, "description": t.description, "parameters": t.input_schema()}
        for t in tools
    ]
    return json.dumps(described, indent=2, ensure_ascii=False)


def _xml_tool(tool: Tool) -> str:
    lines = [f"<tool name={_quoteattr(tool.name)}>"]
    lines.append(f"  <description>{_escape(tool.description or '')}</description>")
    for parameter in tool.parameters:
        schema: Mapping[str, Any] = parameter.schema or {}
        attributes = [f"name={_quoteattr(parameter.name)}"]
        if "type" in schema:
            attributes.append(f"type={_quoteattr(_type_name(schema))}")
        attributes.append(f"required={_quoteattr('true' if parameter.required else 'false')}")
        if "enum" in schema:
            attributes.append(f"enum={_quoteattr('|'.join(str(v) for v in schema['enum']))}")
        if "default" in schema:
            attributes.append(f"default={_quoteattr(json.dumps(schema['default']))}")
        lines.append(
            f"  <parameter {' '.join(attributes)}>{_escape(parameter.description)}</parameter>"
        )
    lines.append("</tool>")
    return "\n".join(lines)


def _compact_tool(tool: Tool) -> str:
    arguments = []
    for parameter in tool.parameters:
        schema: Mapping[str, Any] = parameter.schema or {}
        kind = (
            "|".join(json.dumps(v) for v in schema["enum"])
            if "enum" in schema
            else _type_name(schema)
        )
        arguments.append(f"{parameter.name}{'' if parameter.required else '?'}: {kind}")
    summary = next(iter((tool.title or tool.description or "").strip().splitlines()), "")
    signature = f"{tool.name}({', '.join(arguments)})"
    return f"{signature} - {summary}" if summary else signature


def _type_name(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"array of {_type_name(schema['items'])}"
    if "anyOf" in schema:
        return "|".join(_type_name(option) for option in schema["anyOf"])
    return str(kind)


def _escape(text: str) -> str:
    """``text`` as XML character data."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _quoteattr(text: str) -> str:
    """``text`` as a quoted XML attribute value (the rules of ``xml.sax.saxutils``, whose
    import pulls in ``urllib.request``)."""
    text = _escape(text).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' not in text:
        return f'"{text}"'
    if "'" not in text:
        return f"'{text}'"
    return '"{}"'.format(text.replace('"', "&quot;"))
