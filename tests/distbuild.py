"""Build real fixture distributions and install them with pip into real directories and venvs.

A :class:`Project` is written as a source tree with a ``pyproject.toml`` for flit_core, built
into a wheel by calling the PEP 517 hook in a subprocess (what pip and build do), and installed
with pip: into a ``--target`` directory or into a venv created with ``python -m venv``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "plugins"


@dataclass(frozen=True)
class Project:
    """A distribution to build: name, version, module files and entry points."""

    name: str
    version: str = "1.0.0"
    files: Mapping[str, str] = field(default_factory=dict)
    """Paths relative to the source root (``pkg/__init__.py``) -> file text."""
    entry_points: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    dependencies: Sequence[str] = ()
    module_name: str | None = None
    """The module flit packages, when not the name's (dotted: a PEP 420 namespace portion)."""

    @property
    def module(self) -> str:
        return self.module_name or self.name.replace("-", "_")

    def write(self, directory: Path) -> Path:
        """Write the source tree under ``directory`` and return its root."""
        src = directory / f"{self.module}-{self.version}-src"
        if src.exists():
            shutil.rmtree(src)
        src.mkdir(parents=True)
        lines = [
            "[build-system]",
            'requires = ["flit_core>=3.9,<5"]',
            'build-backend = "flit_core.buildapi"',
            "",
            "[project]",
            f'name = "{self.name}"',
            f'version = "{self.version}"',
            f'description = "mcs-host test fixture {self.name}"',
            f"dependencies = {list(self.dependencies)!r}".replace("'", '"'),
            "",
            "[tool.flit.module]",
            f'name = "{self.module}"',
        ]
        for group, entries in self.entry_points.items():
            # flit takes console scripts only as [project.scripts]
            table = "[project.scripts]" if group == "console_scripts" else None
            lines += ["", table or f'[project.entry-points."{group}"]']
            lines += [f'"{label}" = "{value}"' for label, value in entries.items()]
        (src / "pyproject.toml").write_text("\n".join(lines) + "\n", "utf-8")
        files = dict(self.files)
        if f"{self.module}.py" not in files and "." not in self.module:
            files.setdefault(f"{self.module}/__init__.py", "")
        for relative, text in files.items():
            path = src / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), "utf-8")
        return src


def build_wheel(source: Path, out: Path) -> Path:
    """Build the project at ``source`` into a wheel in ``out`` with its PEP 517 backend."""
    out.mkdir(parents=True, exist_ok=True)
    hook = "import sys, flit_core.buildapi as b; print(b.build_wheel(sys.argv[1]))"
    done = subprocess.run(
        [sys.executable, "-c", hook, str(out)],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"building {source} failed:\n{done.stderr}")
    return out / done.stdout.strip().splitlines()[-1]


def vendor_into_wheel(wheel: Path, files: Mapping[str, Path]) -> Path:
    """Add ``files`` (path in the wheel -> file) to ``wheel`` and its RECORD, as auditwheel's
    repair adds a ``NAME.libs/`` directory of shared libraries; returns the wheel."""
    with zipfile.ZipFile(wheel) as original:
        members = {info.filename: original.read(info) for info in original.infolist()}
    (record,) = [name for name in members if name.endswith(".dist-info/RECORD")]
    rows = [r for r in members[record].decode().splitlines() if r and not r.startswith(record)]
    for name, source in files.items():
        data = source.read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        members[name] = data
        rows.append(f"{name},sha256={digest},{len(data)}")
    members[record] = ("\n".join([*rows, f"{record},,"]) + "\n").encode()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as repaired:
        for name in sorted(members, key=lambda n: (n == record, n)):
            repaired.writestr(name, members[name])
    return wheel


def pip(*args: str, python: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run pip from the test environment, against ``python``'s environment if given."""
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    if python is not None:
        command += ["--python", str(python)]
    done = subprocess.run(
        [*command, *args], capture_output=True, text=True, check=False, env=_clean_env()
    )
    if done.returncode:
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def uv_pip(*args: str, python: Path) -> subprocess.CompletedProcess[str]:
    """Run ``uv pip`` against ``python``'s environment, offline, copying files (tests tamper
    with installed files, which must not reach uv's cache): a scene's set-up installs take
    a tenth of pip's second. Tests about what pip itself lays down use :func:`pip`."""
    env = _clean_env()
    env["UV_LINK_MODE"] = "copy"
    cache = os.environ.get("MCS_HOST_TEST_UV_CACHE")
    caching = ["--cache-dir", cache] if cache else ["--no-cache"]
    command = [sys.executable, "-m", "uv", "pip", args[0], "--python", str(python), "--offline"]
    done = subprocess.run(
        [*command, *caching, *args[1:]], capture_output=True, text=True, check=False, env=env
    )
    if done.returncode:
        raise RuntimeError(f"uv pip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def install_target(target: Path, wheels: Iterable[Path]) -> Path:
    """``pip install --target``: a plain directory of installed distributions."""
    pip("install", "--no-deps", "--no-index", "--target", str(target), *map(str, wheels))
    return target


@dataclass(frozen=True)
class Venv:
    """A virtual environment created with ``python -m venv``."""

    path: Path

    @classmethod
    def create(cls, path: Path) -> Venv:
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(path)],
            check=True,
            capture_output=True,
        )
        return cls(path)

    @property
    def bin(self) -> Path:
        return self.path / ("Scripts" if os.name == "nt" else "bin")

    @property
    def python(self) -> Path:
        return self.bin / ("python.exe" if os.name == "nt" else "python")

    @property
    def site_packages(self) -> Path:
        (found,) = self.path.glob("lib/python3*/site-packages")
        return found

    def install(self, *requirements: str | Path, wheelhouse: Path | None = None) -> None:
        """pip install ``requirements``, offline from ``wheelhouse`` when one is given."""
        args = ["install", "--no-cache-dir"]
        if wheelhouse is not None:
            args += ["--no-index", "--find-links", str(wheelhouse)]
        pip(*args, *map(str, requirements), python=self.python)

    def uv_install(self, *requirements: str | Path, wheelhouse: Path, cache: Path) -> None:
        """uv pip install ``requirements`` offline from ``wheelhouse``, copying files.

        Copies, not uv's default hard links into its cache: tests tamper with installed
        files, which must not reach the cache.
        """
        env = _clean_env()
        env.update({"UV_CACHE_DIR": str(cache), "UV_LINK_MODE": "copy"})
        command = [sys.executable, "-m", "uv", "pip", "install", "--python", str(self.python)]
        command += ["--offline", "--no-index", "--find-links", str(wheelhouse)]
        done = subprocess.run(
            [*command, *map(str, requirements)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"uv pip install failed:\n{done.stdout}\n{done.stderr}")

    def run(
        self,
        *command: str | Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``command`` with this venv's ``bin`` first on ``PATH``, in ``cwd`` (default:
        the venv's directory, so ``python -c`` imports what is installed, not this
        checkout); never raises."""
        environment = _clean_env()
        environment["PATH"] = f"{self.bin}{os.pathsep}{environment.get('PATH', '')}"
        environment["VIRTUAL_ENV"] = str(self.path)
        # the host's state lives with the venv, never in the developer's home; nor is the
        # developer's configuration read: the test's HOME when it gives one, else none
        environment["MCS_HOST_STATE_DIR"] = str(self.path / "mcs-host-state")
        given = env or {}
        environment["XDG_CONFIG_HOME"] = "" if "HOME" in given else str(self.path / "config")
        environment.update(given)
        return subprocess.run(
            [str(c) for c in command],
            capture_output=True,
            text=True,
            env=environment,
            check=False,
            timeout=120,
            cwd=cwd or self.path,
        )


def _clean_env() -> dict[str, str]:
    """The environment without variables that would leak the test venv or the developer's
    host settings into a child."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"):
        env.pop(name, None)
    for name in [n for n in env if n.startswith("MCS_HOST_")]:
        del env[name]  # the developer's host settings must not change what a test sees
    return env


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[Any], seconds: float = 60) -> None:
    """Return once something listens on ``port`` of 127.0.0.1; fail if ``process`` ends
    first or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as attempt:
            if attempt.connect_ex(("127.0.0.1", port)) == 0:
                return
        if process.poll() is not None:
            raise AssertionError(f"the server ended before listening: {process.communicate()}")
        time.sleep(0.1)
    raise AssertionError(f"nothing listened on port {port} within {seconds:g} s")
