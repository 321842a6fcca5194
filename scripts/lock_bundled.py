"""Pin the bundled drivers in registry.json: build each plugin's wheel, then lock it.

    python scripts/lock_bundled.py

Run it after changing anything in plugins/; a test fails while registry.json is stale. The
wheels are built with the plugins' pinned build backend (flit_core, from the test extras),
exactly as pip builds them when it installs plugins/ from source.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())


def build(plugin: Path, out: Path) -> Path:
    hook = "import sys, flit_core.buildapi as b; print(b.build_wheel(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", hook, str(out)],
        cwd=plugin,
        capture_output=True,
        text=True,
        check=True,
    )
    return out / done.stdout.strip().splitlines()[-1]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        wheels = [build(plugin, Path(tmp)) for plugin in PLUGINS]
        command = [
            sys.executable,
            "-m",
            "mcs_host",
            "lock",
            "--registry",
            str(ROOT / "registry.json"),
        ]
        command += ["--trust", "verified", "--replace"]
        for wheel in wheels:
            command += ["--wheel", str(wheel)]
        return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
