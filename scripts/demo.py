"""Set up mcs-host with the bundled drivers and run the main job.

    python3.11 scripts/demo.py

Creates .venv (if missing), installs mcs-host (with its ``mcp`` extra, for ``serve``, and its
``attest`` extra, for ``add``) and the drivers in plugins/ into it the way a user would (pip,
not editable), then runs in it:

- ``mcs-host list``: discovery from installed metadata and what verification says of each,
  no driver imported;
- ``mcs-host verify csv files``: every installed file of the bundled drivers checked against
  the digests registry.json pins, still before any driver code runs (other drivers installed
  in .venv, such as the reference drivers, are listed but are not the demo's to verify);
- ``mcs-host load``: the whole pipeline with scripts/demo/mcs-host.toml (strict, both drivers
  required, their roots set to scripts/demo/data), and the tools the stack offers;
- ``mcs-host run``: a sample LLM answer holding a tool call, sent through the stack; prints the
  DriverResponse with the executed tool's result.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = Path("scripts") / "demo" / "mcs-host.toml"
SAMPLE_OUTPUT = """I'll summarise the units sold.
```json
{"tool": "summarize_column", "arguments": {"file": "sales.csv", "column": "units"}}
```"""
VENV = ROOT / ".venv"
PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())
BUNDLED = ("csv", "files")
"""The labels of the drivers in plugins/: the ones the demo verifies and loads."""


class _StepError(Exception):
    """A step of the demo exited with an error; its output is above."""


def run(*command: str | Path) -> None:
    shown = " ".join(_quoted(str(c)) for c in command).replace(str(ROOT) + os.sep, "")
    print(f"\n$ {shown}", flush=True)
    code = subprocess.run([str(c) for c in command], cwd=ROOT, check=False).returncode
    if code != 0:
        raise _StepError(f"demo: `{shown}` exited with status {code}; its output is above")


def _quoted(argument: str) -> str:
    return shlex.quote(argument) if any(c in argument for c in " \n\"'{") else argument


def main() -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 - the user may run any python3
        print("mcs-host needs Python 3.11 or newer", file=sys.stderr)
        return 1
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {VENV.name} with Python {sys.version.split()[0]}", flush=True)
        venv.create(VENV, with_pip=True)
    os.environ["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # pip's own progress (what it collects, download bars) on a terminal; quiet when piped
    shown = [] if sys.stdout.isatty() else ["-q", "--progress-bar", "off"]
    plugins = (p.relative_to(ROOT) for p in PLUGINS)
    run(python, "-m", "pip", "install", *shown, ".[mcp,attest]", *plugins)
    mcs_host = VENV / "bin" / "mcs-host"
    run(mcs_host, "--version")
    run(mcs_host, "list", "--registry", "registry.json")
    run(mcs_host, "verify", *BUNDLED, "--registry", "registry.json")
    run(mcs_host, "load", "--config", CONFIG)
    run(mcs_host, "run", "--config", CONFIG, SAMPLE_OUTPUT)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except _StepError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
