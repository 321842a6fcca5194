"""PEP 740 provenance checks that need a process of their own: no network reached and nothing
written, the clock moved, what importing the verifier and each command pulls in, the extra
missing, and the trusted root the wheel ships."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_provenance import (
    EXTRA,
    GITLAB,
    GITLAB_ATTESTATION,
    PUBLISHER,
    ROOT,
    ROOT_SHA256,
    TRANSFERRED,
    TRANSFERRED_PROVENANCE,
    WHEEL,
    WHEEL_PROVENANCE,
)

from mcs_host._install_hint import extra_command
from mcs_host.trust.provenance import (
    TRUSTED_ROOT,
)


def _python(
    code: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


_SANDBOXED = r"""
import json, os, sys

# urllib3 binds a socket to ::1 once, to learn whether IPv6 works: that reaches nothing
seen = []
WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
CHANGES = (
    "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.link", "os.truncate",
    "os.chmod", "os.utime", "shutil.copyfile", "tempfile.mkstemp", "tempfile.mkdtemp",
    "socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto",
    "socket.sendmsg",
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.fork",
)

def audit(event, args):
    if event == "open" and isinstance(args[2], int) and args[2] & WRITES:
        seen.append(f"open {args[0]} for writing")
    elif event in CHANGES:
        seen.append(f"{event} {args!r}"[:200])

sys.addaudithook(audit)
from pathlib import Path
from mcs_host.trust.provenance import verify_provenance
from mcs_host.trust.publishers import PublisherIdentity

results = []
for dist, provenance, stated in json.loads(sys.argv[1]):
    proven = verify_provenance(
        Path(dist), Path(dist).name, Path(provenance).read_bytes(), PublisherIdentity.parse(stated)
    )
    results.append(str(proven.identity))
import time
print(json.dumps({"results": results, "seen": seen, "now": time.time()}))
"""


_CASES = [
    (str(WHEEL), str(WHEEL_PROVENANCE), PUBLISHER),
    (
        str(TRANSFERRED),
        str(TRANSFERRED_PROVENANCE),
        "github:trailofbits/pypi-attestations:release.yml",
    ),
    (str(GITLAB), str(GITLAB_ATTESTATION), "gitlab:facutuesca/gitlab-oidc-project:.gitlab-ci.yml"),
]


def _sandbox_env(tmp_path: Path, home: Path) -> dict[str, str]:
    """The environment with a HOME of its own, no XDG directories, and every proxy a port no
    one listens on."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("XDG_") and key.lower() not in ("http_proxy", "https_proxy")
    }
    closed = "http://127.0.0.1:9"
    env.update(HOME=str(home), TMPDIR=str(tmp_path / "tmp"), PYTHONDONTWRITEBYTECODE="1")
    env.update(HTTP_PROXY=closed, HTTPS_PROXY=closed, http_proxy=closed, https_proxy=closed)
    (tmp_path / "tmp").mkdir()
    return env


def _libfaketime() -> Path:
    spec = importlib.util.find_spec("libfaketime")
    assert spec is not None, "the test extra installs libfaketime"
    assert spec.submodule_search_locations
    return Path(spec.submodule_search_locations[0], "vendor/libfaketime/src/libfaketime.so.1")


@pytest.mark.parametrize("home", ["an empty directory", "a file"])
def test_verification_reaches_no_network_and_writes_nothing(tmp_path: Path, home: str) -> None:
    where = tmp_path / "home"
    if home == "a file":
        where.write_text("not a directory: nothing can be written under this HOME\n")
    else:
        where.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = _sandbox_env(tmp_path, where)
    done = _python(_SANDBOXED, json.dumps(_CASES), env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["results"] == [stated for _, _, stated in _CASES]
    assert report["seen"] == []
    assert not list(cwd.iterdir())
    assert not list((tmp_path / "tmp").iterdir())
    if where.is_dir():
        assert not list(where.iterdir())


@pytest.mark.skipif(sys.platform != "linux", reason="libfaketime's wheel ships a Linux library")
@pytest.mark.parametrize(
    ("clock", "after", "before"),
    [
        ("+7300d", 1785247712 + 19 * 365 * 86400, None),  # 20 years ahead
        ("@2023-01-01 00:00:00", 1672531200, 1672617600),  # before either certificate was made
    ],
)
def test_the_clock_does_not_change_the_result(
    tmp_path: Path, clock: str, after: int, before: int | None
) -> None:
    """The whole process's clock is set (libfaketime, preloaded), not a Python function."""
    env = _sandbox_env(tmp_path, tmp_path / "home")
    (tmp_path / "home").mkdir()
    env.update(LD_PRELOAD=str(_libfaketime()), FAKETIME=clock)
    done = _python(_SANDBOXED, json.dumps(_CASES), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["now"] > after
    assert before is None or report["now"] < before
    assert report["results"] == [stated for _, _, stated in _CASES]
    assert report["seen"] == []


def test_importing_the_verifier_imports_neither_sigstore_nor_pypi_attestations() -> None:
    code = (
        "import sys, mcs_host.trust.provenance; "
        f"print(sorted(m for m in sys.modules if m.partition('.')[0] in {EXTRA!r}))"
    )
    done = _python(code)
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


def test_without_the_extra_verification_says_how_to_install_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['sigstore'] = sys.modules['pypi_attestations'] = None\n"
        "from mcs_host.trust.provenance import ProvenanceError, verify_provenance\n"
        "try:\n"
        f"    verify_provenance(b'', {WHEEL.name!r}, b'{{}}', None)\n"
        "except ProvenanceError as error:\n"
        "    print(error.reason, error, error.fix, sep='\\n')\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    reason, message, fix = done.stdout.strip().split("\n")
    assert reason == "extra-missing"
    assert message.startswith(WHEEL.name)
    install = extra_command("attest")  # this interpreter's pip, from where mcs-host came
    assert install.startswith(f"{shlex.quote(sys.executable)} -m pip install ")
    assert message.endswith(f": {install}")
    assert fix == install


@pytest.mark.parametrize("command", ["list", "verify", "load", "serve"])
def test_list_verify_load_and_serve_never_import_sigstore(tmp_path: Path, command: str) -> None:
    env = _sandbox_env(tmp_path, tmp_path / "home")
    (tmp_path / "home").mkdir()
    env.update(
        PYTHONPROFILEIMPORTTIME="1",  # every import, in every process, is listed on stderr
        MCS_HOST_STATE_DIR=str(tmp_path / "state"),
        MCS_HOST_CACHE_DIR=str(tmp_path / "cache"),
    )
    script = Path(sys.executable).with_name("mcs-host")
    done = subprocess.run(
        [script, command],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    imported = [
        line.rpartition("|")[2].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    ]
    assert "mcs_host.cli._launch" in imported, done.stderr[-2000:]  # the listing was read
    assert [m for m in imported if m.partition(".")[0] in EXTRA] == []
    assert [m for m in imported if m.startswith(("mcs_host.trust.provenance",))] == []


def test_the_wheel_ships_the_trusted_root_the_verifier_uses(tmp_path: Path) -> None:
    assert hashlib.sha256(TRUSTED_ROOT.read_bytes()).hexdigest() == ROOT_SHA256
    code = "import sys; from flit_core import buildapi; print(buildapi.build_wheel(sys.argv[1]))"
    done = _python(code, str(tmp_path), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(tmp_path / done.stdout.strip().splitlines()[-1]) as wheel:
        shipped = wheel.read("mcs_host/trust/sigstore_trusted_root.json")
    assert shipped == TRUSTED_ROOT.read_bytes()
