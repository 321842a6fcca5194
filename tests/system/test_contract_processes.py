"""The contract's checks that need a process of their own: what importing the public names
pulls in, seen in a fresh interpreter, and the committed JSON schemas against a fresh
generation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from distbuild import ROOT

import mcs_host


def test_public_names_resolve_and_import_is_lazy() -> None:
    for name in vars(mcs_host)["__all__"]:
        assert getattr(mcs_host, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = mcs_host.nothing  # type: ignore[attr-defined]
    code = (
        "import sys, mcs_host, mcs_host.discovery, mcs_host.cli._launch, mcs_host.cli.app; "
        "print(sorted(m for m in ('pydantic', 'mcs_host.contract') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_loading_without_mcp_imports_neither_the_bridge_nor_asyncio() -> None:
    # load, verify and list import the bridge (the SDK, asyncio) only when a mount needs it
    code = (
        "import sys, mcs_host.loading.host, mcs_host.loading.verify, mcs_host.cli.drivers; "
        "print(sorted(m for m in ('asyncio', 'mcs_host.bridge', 'mcp') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_committed_json_schemas_are_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_schemas.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    committed = json.loads((ROOT / "mcs_host" / "schemas" / "DriverMeta.schema.json").read_text())
    assert committed["$id"] == "urn:mcs:contract:0.6:DriverMeta"
    assert set(committed["required"]) == {"id", "name", "version"}
    assert committed["properties"]["version"]["pattern"].startswith("^(0|[1-9]")


def test_a_public_name_imports_only_the_module_that_defines_it() -> None:
    code = (
        "import sys; from mcs_host import discover, Candidate; "
        "print(sorted(m for m in sys.modules if m.startswith(('mcs_host', 'pydantic'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # discovery reads metadata through the bounded reader, a private stdlib-only module
    assert done.stdout.strip() == "['mcs_host', 'mcs_host._files', 'mcs_host.discovery']"
