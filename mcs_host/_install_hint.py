"""Where a distribution was installed from, and the pip commands that install from there
again: mcs-host's own extras into the environment it runs in, a driver's project as a wheel.

Read from the distribution's ``direct_url.json`` (PEP 610), which pip and uv write for an
install from a local directory (editable or not), a file or URL of an archive, or a version
control checkout; a distribution without one came from a package index. Standard library
only, so every layer may use it; nothing is imported or run.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

__all__: list[str] = []

Kind = Literal["directory", "archive", "vcs", "index"]


@dataclass(frozen=True, slots=True)
class Source:
    """Where one installed distribution came from."""

    kind: Kind
    """``directory`` (a local project, ``editable`` or not), ``archive`` (a wheel or sdist,
    a local file or a URL), ``vcs`` (a checkout) or ``index`` (no ``direct_url.json``)."""
    location: str
    """The directory or file (a local path), the URL (``vcs+URL@commit`` for a checkout), or
    empty for an index."""
    editable: bool = False
    """Installed with ``pip install -e``."""


def source_of(direct_url: str | None) -> Source:
    """The source ``direct_url`` (the text of a ``direct_url.json``, ``None`` when there is
    none) names; one that cannot be read is taken as an index."""
    try:
        data = json.loads(direct_url) if direct_url else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return Source("index", "")
    url: str = data["url"]
    vcs = data.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        commit = vcs.get("commit_id")
        return Source("vcs", f"{vcs['vcs']}+{url}" + (f"@{commit}" if commit else ""))
    parts = urlsplit(url)
    local = _local_path(parts.path) if parts.scheme == "file" else url
    dir_info = data.get("dir_info")
    if isinstance(dir_info, dict):
        return Source("directory", local, bool(dir_info.get("editable")))
    return Source("archive", local)


def _local_path(path: str) -> str:
    """The local path of a ``file:`` URL's ``path`` (``/C:/x`` is ``C:/x`` on Windows)."""
    local = unquote(path)
    return local[1:] if re.match(r"^/[A-Za-z]:", local) else local


def installed_source(distribution: str) -> Source:
    """Where the installed ``distribution`` (of the running interpreter's path) came from."""
    from importlib import metadata  # noqa: PLC0415 - on first use: it costs milliseconds

    try:
        found = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return Source("index", "")
    return source_of(found.read_text("direct_url.json"))


def pip() -> str:
    """``pip`` of the running interpreter, as a shell command: ``PYTHON -m pip``."""
    return f"{shlex.quote(sys.executable)} -m pip"


def extra_command(extra: str, source: Source | None = None) -> str:
    """The shell command that installs mcs-host's ``extra`` into the environment mcs-host
    runs in, from where mcs-host was installed (``source``; read from its own
    ``direct_url.json`` when not given): its project directory or wheel file with the extra,
    the URL or checkout it came from, else the package index."""
    found = source or installed_source("mcs-host")
    if found.kind in ("directory", "archive") and "://" not in found.location:
        target = f"{found.location}[{extra}]"
    elif found.kind in ("archive", "vcs"):
        target = f"mcs-host[{extra}] @ {found.location}"
    else:
        target = f"mcs-host[{extra}]"
    return f"{pip()} install {shlex.quote(target)}"


def wheel_name(distribution: str) -> str:
    """``distribution`` as a wheel's file name spells it (PEP 427: runs of ``-_.`` become
    one ``_``; lower case, as the build backends write it)."""
    return re.sub(r"[-_.]+", "_", distribution).lower()
