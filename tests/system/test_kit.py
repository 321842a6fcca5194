"""The driver author's path, as docs/tutorials/write-a-driver.md walks it: new -> test ->
check -> build -> sign -> lock with the publisher key -> install -> load; then a later
release loads on its signature. And the release workflow the scaffold writes: it passes
actionlint and zizmor, publishes with attestations from a protected environment, and builds
the same bytes every time."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path
from typing import Any

import pytest
from distbuild import Venv, build_wheel

from mcs_host import new_driver
from mcs_host.trust.publishers import PublisherIdentity

pytestmark = pytest.mark.venv


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _own_tests(project: Path) -> subprocess.CompletedProcess[str]:
    """A scaffolded project's own tests, run by pytest in its directory."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def _load(venv: Venv, registry: Path, state: Path) -> dict[str, Any]:
    done = venv.run(
        "mcs-host", "load", "--json", "--registry", registry, env={"MCS_HOST_STATE_DIR": str(state)}
    )
    report: dict[str, Any] = json.loads(done.stdout)
    mounted = any(d["status"] == "mounted" for d in report["drivers"])
    assert done.returncode == (0 if mounted else 1), f"{done.args}\n{done.stdout}\n{done.stderr}"
    return report


def test_a_new_driver_from_scaffold_to_a_signed_release(
    tmp_path: Path, wheelhouse: Path, uv_cache: Path
) -> None:
    venv = Venv.create(tmp_path / "venv")
    venv.uv_install("mcs-host", wheelhouse=wheelhouse, cache=uv_cache)
    out = _ok(venv.run("mcs-host", "new", "acme-weather", "--dir", tmp_path, "--publisher", "Acme"))
    project = tmp_path / "acme-weather"
    assert f"created {project / 'acme_weather' / 'mcs-driver.json'}" in out

    # its own tests, through the mcs_conformance fixture of mcs-host's pytest plugin
    assert "3 passed" in _ok(_own_tests(project))
    assert (project / ".gitignore").read_text().splitlines()[0] == "__pycache__/"
    assert _ok(venv.run("mcs-host", "check", project)).startswith("acme-weather: passes")

    key = tmp_path / "keys" / "acme.key"
    public = _ok(venv.run("mcs-host", "keygen", key)).split("public key:")[1].split()[0]
    assert key.parent.stat().st_mode & 0o777 == 0o700  # keygen made the directory, private
    refused = venv.run("mcs-host", "keygen", key)
    assert (refused.returncode, refused.stderr.strip()) == (
        2,
        f"error: {key} exists; refusing to overwrite a key",
    )
    first = build_wheel(project, tmp_path / "dist")
    assert "signed acme-weather 0.1.0 sha256:" in _ok(
        venv.run("mcs-host", "sign", first, "--key", key)
    )

    # the registry operator trusts the publisher's key: for this release, which it signed
    # (checked), and for later ones
    registry = tmp_path / "registry.json"
    locked = venv.run(
        "mcs-host", "lock", "--wheel", first, "--registry", registry, "--publisher-key", public
    )
    assert f"wrote {registry}" in _ok(locked)
    (entry,) = json.loads(registry.read_text())["drivers"].values()
    assert entry["publisher_keys"] == [{"key": public, "name": "Acme"}]
    assert "releases" not in entry  # trusted by its signature, not pinned

    venv.install(first, wheelhouse=wheelhouse)
    (record,) = _load(venv, registry, tmp_path / "state")["drivers"]
    assert (record["label"], record["status"], record["verification"], record["trust"]) == (
        "acme-weather",
        "mounted",
        "signed",
        "community",
    )
    assert record["tools"] == ["greet"]
    call = venv.run(
        "mcs-host", "call", "greet", "--args", '{"name": "Ann"}', "--registry", registry,
        env={"MCS_HOST_STATE_DIR": str(tmp_path / "state")},
    )  # fmt: skip
    assert _ok(call) == "Hello, Ann.\n"

    # the next release, bumped in one step: not in the registry, but signed by the trusted key
    assert _ok(venv.run("mcs-host", "bump", "0.2.0", "--dir", project)).splitlines() == [
        f"set 0.2.0 in {project / 'pyproject.toml'}",
        f"set 0.2.0 in {project / 'acme_weather' / 'mcs-driver.json'}",
    ]
    second = build_wheel(project, tmp_path / "dist")
    _ok(venv.run("mcs-host", "sign", second, "--key", key))
    venv.install(second, wheelhouse=wheelhouse)
    (record,) = _load(venv, registry, tmp_path / "state")["drivers"]
    assert (record["version"], record["status"], record["verification"]) == (
        "0.2.0",
        "mounted",
        "signed",
    )
    assert record["trust"] == "community"

    # the same release, signed by somebody else's key, is not trusted
    third = build_wheel(project, tmp_path / "other")
    other = tmp_path / "keys" / "other.key"
    _ok(venv.run("mcs-host", "keygen", other))
    _ok(venv.run("mcs-host", "sign", third, "--key", other))
    venv.install("--force-reinstall", "--no-deps", third)
    (record,) = _load(venv, registry, tmp_path / "state")["drivers"]
    assert (record["status"], record["reason"]) == ("rejected", "untrusted-key")


def test_a_scaffold_whose_entry_point_names_a_missing_class_fails_its_own_tests(
    tmp_path: Path,
) -> None:
    project = new_driver("acme-weather", tmp_path)
    pyproject = project / "pyproject.toml"
    declared = 'acme-weather = "acme_weather:AcmeWeatherToolDriver"'
    assert declared in pyproject.read_text()
    typo = declared.replace('Driver"', 'Drvier"')
    pyproject.write_text(pyproject.read_text().replace(declared, typo))
    tests = _own_tests(project)
    assert tests.returncode == 1
    assert "2 failed, 1 passed" in tests.stdout
    assert "has no attribute 'AcmeWeatherToolDrvier'" in tests.stdout


def test_check_flags_a_pyproject_version_its_manifest_does_not_share(tmp_path: Path) -> None:
    project = new_driver("acme-weather", tmp_path)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('version = "0.1.0"', 'version = "0.2.0"'))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "mcs_host", "check", str(project)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "ERROR version-skew: pyproject.toml says version 0.2.0, its meta (mcs-driver.json) "
        "says 0.1.0" in done.stdout
    )
    assert "mcs-host bump VERSION" in done.stdout


def test_check_and_sign_warn_while_the_publisher_is_the_scaffold_s_placeholder(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def host(*args: str | Path) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "mcs_host", *map(str, args)]
        return subprocess.run(command, capture_output=True, text=True, env=env, check=False)

    key = tmp_path / "publisher.key"
    _ok(host("keygen", key))
    placeholder = new_driver("acme-weather", tmp_path / "unnamed")  # no --publisher given
    named = new_driver("acme-weather", tmp_path / "named", publisher="Acme")
    checked = host("check", placeholder)
    assert checked.returncode == 0, checked.stdout  # a warning, not a broken contract
    assert (
        "WARNING placeholder-publisher: its trust manifest names the publisher 'Your name', "
        "which `mcs-host new` wrote for want of one" in checked.stdout
    )
    signed = host("sign", build_wheel(placeholder, tmp_path / "dist"), "--key", key)
    assert signed.returncode == 0, signed.stderr
    assert signed.stderr.startswith(
        "warning: driver acme-weather's trust manifest names the publisher 'Your name'"
    )
    assert "placeholder-publisher" not in _ok(host("check", named))
    signed = host("sign", build_wheel(named, tmp_path / "dist-named"), "--key", key)
    assert (signed.returncode, signed.stderr) == (0, "")


def test_new_refuses_a_bad_name_and_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'9lives' is not a distribution name"):
        new_driver("9lives", tmp_path)
    new_driver("acme", tmp_path)
    with pytest.raises(FileExistsError, match="acme exists"):
        new_driver("acme", tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "mcs_host", "new", "acme", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "acme exists" in done.stderr


# -- the release workflow ------------------------------------------------------------------

_WORKFLOW = Path(".github") / "workflows" / "release.yml"
_PINNED = re.compile(r" {6}- uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+")
"""A step's action pinned to a full commit SHA, its version in a comment."""


def _blocks(text: str, indent: int) -> dict[str, str]:
    """The keys at ``indent`` spaces of the YAML block mapping ``text``, each with its lines
    (comments left out): the scaffold's workflow reads as its parts without a YAML parser."""
    found: dict[str, list[str]] = {}
    key = None
    for line in text.splitlines():
        body = line.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        depth = len(line) - len(body)
        if depth == indent and not body.startswith("-"):
            key = body.partition(":")[0]
            found[key] = []
        elif depth < indent:
            key = None
        if key is not None:
            found[key].append(line)
    return {key: "\n".join(lines) + "\n" for key, lines in found.items()}


def _tool(name: str) -> str:
    """A linter of the test extra, from this environment's scripts."""
    return str(Path(sysconfig.get_path("scripts")) / name)


def _offline(tmp_path: Path) -> dict[str, str]:
    """The environment with no GitHub token, a HOME of its own and every proxy a port no one
    listens on: a linter that tried the network would get nowhere."""
    tokens = ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN", "GH_HOST")
    env = {k: v for k, v in os.environ.items() if k not in tokens and not k.startswith("XDG_")}
    closed = "http://127.0.0.1:9"
    env.update(HOME=str(tmp_path / "home"), ZIZMOR_OFFLINE="true")
    env.update(HTTP_PROXY=closed, HTTPS_PROXY=closed, http_proxy=closed, https_proxy=closed)
    (tmp_path / "home").mkdir(exist_ok=True)
    return env


def _zizmor(project: Path, env: dict[str, str]) -> list[tuple[str, str]]:
    """zizmor's findings on ``project``'s workflows, every audit it has offline and every
    finding it can make (the auditor persona): ``(audit, severity)`` of each."""
    flags = ["--offline", "--no-config", "--no-progress", "--persona", "auditor"]
    done = subprocess.run(
        [_tool("zizmor"), *flags, "--strict-collection", "--format", "json", str(project)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode in (0, 10, 11, 12, 13, 14), done.stderr  # 1x: findings (severity x)
    return [(f["ident"], f["determinations"]["severity"]) for f in json.loads(done.stdout)]


@pytest.mark.parametrize("repository", ["acme/weather", None], ids=["repository", "placeholder"])
def test_the_release_workflow_passes_actionlint_and_zizmor(
    tmp_path: Path, repository: str | None
) -> None:
    project = new_driver("acme-weather", tmp_path, repository=repository)
    env = _offline(tmp_path)
    actionlint = subprocess.run(
        [_tool("actionlint"), "-no-color", str(project / _WORKFLOW)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert actionlint.returncode == 0, actionlint.stdout + actionlint.stderr
    assert _zizmor(project, env) == []

    # the same check, offline, refuses an action pinned to a tag and a token left in .git
    workflow = project / _WORKFLOW
    text = workflow.read_text()
    pinned = re.search(r"actions/checkout@[0-9a-f]{40} # v[\d.]+", text)
    assert pinned
    text = text.replace(pinned.group(), "actions/checkout@v7")
    workflow.write_text(text.replace("persist-credentials: false", "persist-credentials: true"))
    assert sorted(_zizmor(project, env)) == [("artipacked", "Low"), ("unpinned-uses", "High")]


def test_the_release_workflow_publishes_with_attestations_from_a_protected_environment(
    tmp_path: Path,
) -> None:
    new = ["new", "acme-weather", "--dir", str(tmp_path), "--repository", "acme/weather"]
    done = subprocess.run(
        [sys.executable, "-m", "mcs_host", *new],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    project = tmp_path / "acme-weather"
    assert f"created {project / _WORKFLOW}" in done.stdout.splitlines()
    text = (project / _WORKFLOW).read_text()
    top = _blocks(text, 0)
    assert top["on"] == "on:\n  release:\n    types: [published]\n"
    assert top["permissions"] == "permissions:\n  contents: read\n"
    jobs = _blocks(top["jobs"], 2)
    assert list(jobs) == ["build", "publish"]
    build, publish = _blocks(jobs["build"], 4), _blocks(jobs["publish"], 4)

    # every action pinned to a commit; the checkout leaves no token behind
    uses = [line for line in text.splitlines() if "uses:" in line]
    assert len(uses) == 5
    assert all(_PINNED.fullmatch(line) for line in uses), uses
    assert "actions/checkout@" in build["steps"]
    assert "persist-credentials: false" in build["steps"]
    assert "permissions" not in build

    # only the publish job may ask for an OIDC token, in the environment pypi, after the build
    assert [name for name, job in jobs.items() if "id-token" in job] == ["publish"]
    assert publish["permissions"].splitlines()[1].startswith("      id-token: write #")
    assert len(publish["permissions"].splitlines()) == 2
    assert publish["needs"] == "    needs: build\n"
    assert "      name: pypi\n" in publish["environment"]
    publishing = publish["steps"].split("- uses: ")[-1]  # the last step
    assert publishing.startswith("pypa/gh-action-pypi-publish@")
    assert "with:\n          attestations: true\n" in publishing

    # the command the comment and the README give users names this very workflow
    add = "mcs-host add acme-weather --publisher github:acme/weather:release.yml@pypi"
    assert f"#   {add}\n" in text
    assert f"    {add}\n" in (project / "README.md").read_text()
    stated = PublisherIdentity.parse(add.rpartition(" ")[2])
    assert (stated.repository, stated.workflow, stated.environment) == (
        "acme/weather",
        _WORKFLOW.name,
        "pypi",
    )
    manifest = json.loads((project / "acme_weather" / "mcs-driver.json").read_text())
    (driver,) = manifest["drivers"].values()
    assert driver["trust"]["source_repository"] == "https://github.com/acme/weather"


@pytest.mark.parametrize(
    ("repository", "identity"),
    [
        ("https://github.com/acme/weather.git", "github:acme/weather:release.yml@pypi"),
        ("ssh://git@github.com/acme/weather", "github:acme/weather:release.yml@pypi"),
        ("https://gitlab.com/acme/weather", "github:OWNER/REPO:release.yml@pypi"),
    ],
)
def test_the_release_workflow_names_the_repository_a_url_gives_or_a_placeholder(
    tmp_path: Path, repository: str, identity: str
) -> None:
    project = new_driver("acme-weather", tmp_path, repository=repository)
    text = (project / _WORKFLOW).read_text()
    assert f"#   mcs-host add acme-weather --publisher {identity}\n" in text
    assert ("OWNER and REPO stand for" in text) is identity.startswith("github:OWNER/")
    manifest = json.loads((project / "acme_weather" / "mcs-driver.json").read_text())
    (driver,) = manifest["drivers"].values()
    assert driver["trust"]["source_repository"] == repository


def _release_build(project: Path, out: Path, epoch: str) -> dict[str, str]:
    """The sdist, then the wheel from that unpacked sdist, as the workflow's pypa/build makes
    them (the same PEP 517 hooks of the pinned backend): the sha256 of each file."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": epoch}

    def hook(name: str, source: Path) -> Path:
        code = f"import sys, flit_core.buildapi as b; print(b.{name}(sys.argv[1]))"
        done = subprocess.run(
            [sys.executable, "-c", code, str(out)],
            cwd=source,
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return out / done.stdout.split()[-1]

    sdist = hook("build_sdist", project)
    with tarfile.open(sdist) as archive:
        archive.extractall(out / "unpacked", filter="data")
    (unpacked,) = (out / "unpacked").iterdir()
    wheel = hook("build_wheel", unpacked)
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (sdist, wheel)}


def test_the_release_build_is_the_same_bytes_from_another_checkout(tmp_path: Path) -> None:
    project = new_driver("acme-weather", tmp_path / "src", repository="acme/weather")
    files = [p for p in project.rglob("*") if p.is_file()]
    built = []
    for run, mtime in enumerate((1_700_000_000, 1_800_000_000)):
        for path in files:  # a fresh checkout: every file has the time it was written
            os.utime(path, (mtime, mtime))
        built.append(_release_build(project, tmp_path / f"out{run}", epoch="1600000000"))
    assert built[0] == built[1]
    assert sorted(built[0]) == ["acme_weather-0.1.0-py3-none-any.whl", "acme_weather-0.1.0.tar.gz"]
