"""Set up and run the whole test suite on Python 3.11, 3.12 and 3.13.

    python3.11 scripts/test.py              # every version found on this machine
    python3.11 scripts/test.py 3.12         # only the versions named
    python3.11 scripts/test.py -- -k list   # extra arguments after -- go to pytest

For each version: a venv in .venvs/py3.X, the host with its test, mcp, docs and attest extras (and
the agent frameworks' extras) and
the bundled plugins installed editable (by uv, which pip installs first: 5 s where pip took 44 s
here; by pip when uv cannot, as uv reads no pip settings), then mypy, then the wheelhouse the
tests install from (built once, for every worker) and pytest (one worker per core,
pytest-xdist, sharing one uv cache). ruff (lint and format check) runs once.
A version whose interpreter is missing is reported as skipped; any failure exits 1.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ("3.11", "3.12", "3.13")
PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").is_file())


def find_python(version: str) -> str | None:
    """An interpreter of ``version`` that runs: on PATH, under pyenv, or in the usual places."""
    candidates = [shutil.which(f"python{version}")]
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/{version}.*/bin/python{version}"))
    candidates += [f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]
    for candidate in candidates:
        if candidate and _reports_version(candidate, version):
            return candidate
    return None


def _reports_version(executable: str, version: str) -> bool:
    try:
        done = subprocess.run(
            [executable, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False  # e.g. a pyenv shim for a version that is not selected
    return done.returncode == 0 and done.stdout.strip() == version


def step(title: str, command: list[str], env: dict[str, str] | None = None) -> bool:
    print(f"\n==> {title}\n$ {' '.join(command)}", flush=True)
    started = time.monotonic()
    ok = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode == 0
    print(
        f"<== {title}: {'ok' if ok else 'FAILED'} ({time.monotonic() - started:.1f} s)", flush=True
    )
    return ok


def pip_output() -> list[str]:
    """pip's own progress (what it collects, download bars) on a terminal; quiet when piped."""
    return [] if sys.stdout.isatty() else ["-q", "--progress-bar", "off"]


def uv_output() -> list[str]:
    """uv's progress on a terminal; quiet when piped."""
    return [] if sys.stdout.isatty() else ["-q"]


def uv_requirement() -> str:
    """uv as the test extra asks for it (pyproject.toml)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    (found,) = (r for r in project["optional-dependencies"]["test"] if r.startswith("uv"))
    return str(found)


def venv_python(version: str, interpreter: str) -> Path:
    """The python of .venvs/py<version>, created if it is missing or broken."""
    venv = ROOT / ".venvs" / f"py{version}"
    python = venv / "bin" / "python"
    if not (python.exists() and _reports_version(str(python), version)):
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([interpreter, "-m", "venv", str(venv)], check=True)
    return python


def run_version(version: str, interpreter: str, pytest_args: list[str], lint: bool) -> bool:
    python = str(venv_python(version, interpreter))
    # children keep their bytecode: a fixture venv's host starts compile its modules once
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    editable = ["-e", ".[test,mcp,docs,attest,pydantic-ai,openai-agents,langchain,llm]"]
    for plugin in PLUGINS:
        editable += ["-e", str(plugin.relative_to(ROOT))]
    bootstrap = [python, "-m", "pip", "install", *pip_output(), uv_requirement()]
    install = [python, "-m", "uv", "pip", "install", "--python", python, *uv_output(), *editable]
    with_uv = step(f"{version}: uv", bootstrap, env) and step(f"{version}: install", install, env)
    # uv reads no pip configuration: where only pip's settings reach an index, pip installs
    fallback = [python, "-m", "pip", "install", *pip_output(), *editable]
    if not (with_uv or step(f"{version}: install with pip (uv could not)", fallback, env)):
        return False
    ok = True
    if lint:
        ok &= step("ruff check", [python, "-m", "ruff", "check", "."], env)
        ok &= step("ruff format --check", [python, "-m", "ruff", "format", "--check", "."], env)
    ok &= step(f"{version}: mypy", [python, "-m", "mypy", "--python-version", version], env)
    with tempfile.TemporaryDirectory(prefix=f"mcs-host-test-{version}-") as shared:
        # built once here, not once per worker (tests/conftest.py reads the variables)
        house, cache = Path(shared) / "wheelhouse", Path(shared) / "uv-cache"
        build = "import sys, pathlib, conftest; conftest.make_wheelhouse(pathlib.Path(sys.argv[1]))"
        tests = {**env, "PYTHONPATH": str(ROOT / "tests")}
        if not step(f"{version}: wheelhouse", [python, "-c", build, str(house)], tests):
            return False
        env = {**env, "MCS_HOST_TEST_WHEELHOUSE": str(house), "MCS_HOST_TEST_UV_CACHE": str(cache)}
        # one worker per core; a module's tests stay on one worker (its fixtures built once)
        parallel = ["-n", "auto", "--dist", "loadscope"]
        command = [python, "-m", "pytest", "-v", *parallel, *pytest_args]
        ok &= step(f"{version}: pytest", command, env)
    return ok


def main() -> int:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", help=f"Python versions (default: {VERSIONS})")
    args = parser.parse_args(argv[:split])
    pytest_args = argv[split + 1 :]
    results: dict[str, str] = {}
    lint = True
    for version in args.versions or VERSIONS:
        interpreter = find_python(version)
        if interpreter is None:
            print(f"\n!!! python{version} not found: SKIPPED (the suite must pass on {version})")
            results[version] = "skipped: interpreter not found"
            continue
        ok = run_version(version, interpreter, pytest_args, lint)
        lint = False
        results[version] = "passed" if ok else "FAILED"
    print("\nSummary")
    for version, result in results.items():
        print(f"  Python {version}: {result}")
    return 0 if all(r != "FAILED" for r in results.values()) and "passed" in results.values() else 1


if __name__ == "__main__":
    sys.exit(main())
