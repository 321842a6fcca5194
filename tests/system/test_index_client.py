"""What ``mcs-host add`` asks of the user's package index: the indexes their pip is configured
for (as ``pip download`` reads them: files, then ``PIP_*`` variables), the one wheel of a
requirement downloaded by that pip without any code of the package running, and the PEP 740
provenance of that very file from the index that holds it (its PEP 691 JSON page's
``provenance`` URL, else PyPI's Integrity API), ``None`` only where every index says it has
none. Certificates are checked, a redirect never leaves https, an index's credentials never go
to another origin, and an oversized answer is refused.

Everything is served by the local index of tests/pypi_index.py on 127.0.0.1 (the real wheel of
tests/data/provenance with its real PyPI provenance), fetched by real pip and urllib. No
network.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import tarfile
import textwrap
from pathlib import Path

import pytest
from distbuild import Project, build_wheel
from pypi_index import LocalIndex, pip_env

from mcs_host.trust.downloading import (
    DEFAULT_INDEX,
    PipError,
    download,
    download_all,
    pip_config,
)
from mcs_host.trust.package_index import PROVENANCE_LIMIT, IndexResponseError, fetch_provenance
from mcs_host.trust.provenance import verify_provenance
from mcs_host.trust.publishers import PublisherIdentity

DATA = Path(__file__).resolve().parents[1] / "data" / "provenance"
WHEEL = DATA / "pypi_attestations-0.0.30-py3-none-any.whl"
PROVENANCE = WHEEL.with_name(WHEEL.name + ".provenance")
SHA256 = hashlib.sha256(WHEEL.read_bytes()).hexdigest()
INTEGRITY = f"/integrity/pypi-attestations/0.0.30/{WHEEL.name}/provenance"


def _fetch(*indexes: str, sha256: str | None = SHA256, cert: Path | None = None) -> bytes | None:
    return fetch_provenance(
        WHEEL.name,
        "pypi_attestations",
        "0.0.30",
        indexes,
        sha256=sha256,
        cert=None if cert is None else str(cert),
    )


@pytest.fixture
def served(tmp_path: Path) -> Path:
    """A directory holding the real wheel and its provenance."""
    directory = tmp_path / "served"
    directory.mkdir()
    shutil.copy(WHEEL, directory)
    shutil.copy(PROVENANCE, directory)
    return directory


@pytest.fixture(scope="module")
def driver_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fixture driver's wheel, which has no provenance."""
    project = Project("acme-weather", "1.2.0", files={"acme_weather/__init__.py": ""})
    return build_wheel(
        project.write(tmp_path_factory.mktemp("src")), tmp_path_factory.mktemp("wheel")
    )


# -- the indexes pip is configured for --------------------------------------------------------


def _config_env(tmp_path: Path, conf: str, **variables: str) -> dict[str, str]:
    """An environment whose pip reads ``conf`` as its one configuration file that matters
    (the user's own left out), and ``variables``."""
    path = tmp_path / "pip.conf"
    path.write_text(textwrap.dedent(conf), "utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path), XDG_CONFIG_DIRS=str(tmp_path))
    env.update(PIP_CONFIG_FILE=str(path), **variables)
    return env


CONF = """\
    [global]
    index-url = https://global.example/simple/
    extra-index-url =
        https://extra.example/simple/
        file:///srv/wheels/simple
    find-links = /srv/find-links

    [download]
    index-url = https://download.example/simple/

    [install]
    index-url = https://install.example/simple/
"""


def test_pip_config_reads_the_files_as_pip_download_does(tmp_path: Path) -> None:
    config = pip_config(env=_config_env(tmp_path, CONF))
    assert config.index_url == "https://download.example/simple/"  # [download] over [global]
    assert config.extra_index_urls == ("https://extra.example/simple/", "file:///srv/wheels/simple")
    assert config.find_links == ("/srv/find-links",)
    assert config.indexes == (
        "https://download.example/simple/",
        "https://extra.example/simple/",
        "file:///srv/wheels/simple",
    )


def test_pip_variables_override_the_files(tmp_path: Path) -> None:
    env = _config_env(
        tmp_path,
        CONF,
        PIP_INDEX_URL="https://env.example/simple/",
        PIP_EXTRA_INDEX_URL="https://a.example/simple/ https://b.example/simple/",
        PIP_CERT="/srv/ca.pem",
    )
    config = pip_config(env=env)
    assert config.indexes == (
        "https://env.example/simple/",
        "https://a.example/simple/",
        "https://b.example/simple/",
    )
    assert config.cert == "/srv/ca.pem"
    assert pip_config(env={**env, "PIP_NO_INDEX": "1"}).indexes == ()


def test_without_settings_pip_asks_pypi(tmp_path: Path) -> None:
    env = _config_env(tmp_path, "")
    env["PIP_CONFIG_FILE"] = os.devnull  # pip reads no configuration file at all
    config = pip_config(env=env)
    assert config.indexes == (DEFAULT_INDEX,)
    assert (config.find_links, config.no_index) == ((), False)


def test_a_pip_package_in_the_working_directory_never_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "MARKER"
    planted = tmp_path / "checkout" / "pip"
    planted.mkdir(parents=True)
    payload = f"open({str(marker)!r}, 'a').write('planted pip ran\\n')\n"
    (planted / "__init__.py").write_text(payload, "utf-8")
    (planted / "__main__.py").write_text(payload, "utf-8")
    monkeypatch.chdir(planted.parent)
    env = _config_env(tmp_path, CONF)
    config = pip_config(env=env)
    with pytest.raises(PipError):
        download("nothing-here==1.0", tmp_path / "dest", env={**env, "PIP_NO_INDEX": "1"})
    assert not marker.exists()
    assert config.index_url == "https://download.example/simple/"  # the real pip answered


# -- the wheel, downloaded by pip -------------------------------------------------------------


def test_download_brings_the_one_wheel_from_the_configured_index(
    served: Path, tmp_path: Path
) -> None:
    with LocalIndex(served) as index:
        wheel = download("pypi-attestations==0.0.30", tmp_path / "dest", env=pip_env(index.url))
        asked = [seen.path for seen in index.seen]
    assert wheel == tmp_path / "dest" / WHEEL.name
    assert wheel.read_bytes() == WHEEL.read_bytes()
    assert asked[0] == "/simple/pypi-attestations/"
    assert f"/files/{WHEEL.name}" in asked


def test_a_wheel_the_index_does_not_have_is_a_clear_error(served: Path, tmp_path: Path) -> None:
    with LocalIndex(served) as index:
        env = pip_env(index.url)
        with pytest.raises(PipError) as missing:
            download("pypi-attestations==9.9", tmp_path / "a", env=env)
        with pytest.raises(PipError) as unknown:
            download("no-such-driver", tmp_path / "b", env=env)
    assert missing.value.requirement == "pypi-attestations==9.9"
    message = str(missing.value)
    assert "pypi-attestations==9.9" in message
    assert "from versions: 0.0.30" in message  # pip's own reason, on one line
    assert "\n" not in message
    assert "No matching distribution found for no-such-driver" in str(unknown.value)
    assert not list((tmp_path / "a").iterdir())


def test_download_all_brings_the_wheel_of_each_requirement_in_the_order_given(
    served: Path, tmp_path: Path, driver_wheel: Path
) -> None:
    shutil.copy(driver_wheel, served)
    both = ["pypi-attestations==0.0.30", "acme-weather==1.2.0"]
    with LocalIndex(served) as index:
        env = pip_env(index.url)
        wheels = download_all(both, tmp_path / "both", env=env)
        with pytest.raises(PipError) as missing:
            download_all(["acme-weather==1.2.0", "pypi-attestations==9.9"], tmp_path / "a", env=env)
        with pytest.raises(PipError, match="not empty"):
            download_all(both, tmp_path / "both", env=env)
    assert wheels == [tmp_path / "both" / WHEEL.name, tmp_path / "both" / driver_wheel.name]
    assert [wheel.read_bytes() for wheel in wheels] == [
        WHEEL.read_bytes(),
        driver_wheel.read_bytes(),
    ]
    # one run of pip: its error names every requirement it was given
    assert missing.value.requirement == "acme-weather==1.2.0, pypi-attestations==9.9"
    assert "from versions: 0.0.30" in str(missing.value)


def test_a_requirement_that_is_not_a_project_name_is_refused(tmp_path: Path) -> None:
    for requirement in ("-r requirements.txt", "x[extra]", 'x; python_version < "3"'):
        with pytest.raises(PipError, match="is not a project to add"):
            download(requirement, tmp_path / "dest")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "other.whl").write_bytes(b"")
    with pytest.raises(PipError, match="not empty"):
        download("x", tmp_path / "full")


def _planted_sdist(directory: Path, marker: Path) -> Path:
    """``evil-1.0.tar.gz``, whose in-tree build backend writes ``marker`` when imported (as
    pip imports it to read the metadata of a source distribution)."""
    files = {
        "evil-1.0/pyproject.toml": "[build-system]\nrequires = []\n"
        'build-backend = "backend"\nbackend-path = ["."]\n\n'
        '[project]\nname = "evil"\nversion = "1.0"\n',
        "evil-1.0/backend.py": f"open({str(marker)!r}, 'a').write('sdist built\\n')\n",
        "evil-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
    }
    path = directory / "evil-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def test_download_never_builds_a_source_distribution(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    served = tmp_path / "served"
    served.mkdir()
    sdist = _planted_sdist(served, marker)
    with LocalIndex(served) as index:
        env = pip_env(index.url)
        with pytest.raises(PipError, match="installs wheels only") as only_sdist:
            download("evil==1.0", tmp_path / "a", env=env)
        with pytest.raises(PipError, match="names a URL"):
            download(f"evil @ {index.root}/files/{sdist.name}", tmp_path / "b", env=env)
        fetched = [seen.path for seen in index.seen]
    assert not marker.exists()
    assert only_sdist.value.requirement == "evil==1.0"
    assert f"/files/{sdist.name}" not in fetched


# -- the provenance, from the index --------------------------------------------------------


def test_provenance_from_the_json_api(served: Path) -> None:
    # no Integrity API: the page's provenance URL is the only way to it
    with LocalIndex(served, integrity_api=False) as index:
        provenance = _fetch(index.url)
        asked = [(seen.path, seen.accept) for seen in index.seen]
    assert provenance == PROVENANCE.read_bytes()
    assert asked == [
        ("/simple/pypi-attestations/", "application/vnd.pypi.simple.v1+json"),
        (f"/files/{WHEEL.name}.provenance", "application/vnd.pypi.integrity.v1+json"),
    ]
    identity = PublisherIdentity.parse("github:pypi/pypi-attestations:release.yml@pypi")
    assert verify_provenance(WHEEL, WHEEL.name, provenance, identity).sha256 == SHA256


@pytest.mark.parametrize(
    ("json_api", "provenance_keys"),
    [(False, True), (True, False)],
    ids=["html-only index", "json from before pep 740"],
)
def test_provenance_from_the_integrity_api(
    served: Path, json_api: bool, provenance_keys: bool
) -> None:
    with LocalIndex(served, json_api=json_api, provenance_keys=provenance_keys) as index:
        provenance = _fetch(index.url)
        asked = [seen.path for seen in index.seen]
    assert provenance == PROVENANCE.read_bytes()
    assert asked == ["/simple/pypi-attestations/", INTEGRITY]


def test_no_provenance_is_none(served: Path, driver_wheel: Path) -> None:
    (served / PROVENANCE.name).unlink()
    shutil.copy(driver_wheel, served)
    driver = ("acme_weather-1.2.0-py2.py3-none-any.whl", "acme-weather", "1.2.0")
    with LocalIndex(served) as index:
        assert _fetch(index.url) is None  # its page says: provenance null
        assert fetch_provenance(*driver, [index.url]) is None
        assert fetch_provenance("x-1.0-py3-none-any.whl", "x", "1.0", [index.url]) is None
    with LocalIndex(served, json_api=False) as index:
        assert _fetch(index.url) is None  # the Integrity API answers 404
        assert index.seen[-1].path == INTEGRITY
    # file:// indexes and find-links directories serve none: nothing is asked of them
    assert _fetch(f"file://{served}", "file:///opt/pypi/simple") is None


def test_the_index_that_holds_other_bytes_is_not_where_the_file_came_from(
    served: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    changed = bytearray(WHEEL.read_bytes())
    changed[-1] ^= 1
    (other / WHEEL.name).write_bytes(bytes(changed))
    shutil.copy(PROVENANCE, other)
    with LocalIndex(other) as first, LocalIndex(served) as second:
        assert _fetch(first.url, second.url) == PROVENANCE.read_bytes()
        assert [seen.path for seen in first.seen] == ["/simple/pypi-attestations/"]
        assert [seen.path for seen in second.seen][-1] == INTEGRITY


def test_an_oversized_provenance_is_refused(served: Path) -> None:
    (served / PROVENANCE.name).write_bytes(b" " * PROVENANCE_LIMIT + b"{}")
    with LocalIndex(served) as index, pytest.raises(IndexResponseError) as refused:
        _fetch(index.url)
    assert refused.value.url == index.root + INTEGRITY
    assert refused.value.status == 200
    assert f"more than {PROVENANCE_LIMIT} bytes" in str(refused.value)


def test_an_index_failure_is_an_error_naming_the_url_and_status(served: Path) -> None:
    with (
        LocalIndex(served, answers={"/integrity/": 503}) as index,
        pytest.raises(IndexResponseError) as failed,
    ):
        _fetch(index.url)
    assert failed.value.url == index.root + INTEGRITY
    assert failed.value.status == 503
    assert "answered 503" in str(failed.value)
    # a provenance its page lists and does not serve is a failure too, never "none"
    listed = f"/files/{WHEEL.name}.provenance"
    with (
        LocalIndex(served, integrity_api=False, answers={listed: 404}) as index,
        pytest.raises(IndexResponseError) as missing,
    ):
        _fetch(index.url)
    assert (missing.value.url, missing.value.status) == (index.root + listed, 404)
    # one index failing does not hide the provenance another serves
    with LocalIndex(served, answers={"/simple/": 500}) as broken, LocalIndex(served) as index:
        assert _fetch(broken.url, index.url) == PROVENANCE.read_bytes()
        with pytest.raises(IndexResponseError) as down:
            _fetch(broken.url)
    assert down.value.status == 500


def test_credentials_go_to_the_index_origin_only(served: Path) -> None:
    basic = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    with LocalIndex(served, provenance_host="localhost") as index:
        with_credentials = index.url.replace("://", "://alice:s3cret@")
        assert _fetch(with_credentials) == PROVENANCE.read_bytes()
        (page, provenance) = index.seen
    assert (page.host, page.authorization) == (f"127.0.0.1:{index.port}", basic)
    assert (provenance.host, provenance.path) == (f"localhost:{index.port}", INTEGRITY)
    assert provenance.authorization is None
    # nor after a redirect to another host
    redirect = {INTEGRITY: f"http://localhost:{{port}}/files/{WHEEL.name}.provenance"}
    with LocalIndex(served, json_api=False) as index:
        index.redirects = {path: to.format(port=index.port) for path, to in redirect.items()}
        assert _fetch(index.url.replace("://", "://alice:s3cret@")) == PROVENANCE.read_bytes()
        followed = index.seen
    assert [seen.authorization for seen in followed] == [basic, basic, None]
    assert followed[-1].host == f"localhost:{index.port}"
    # and an error shows no password
    with (
        LocalIndex(served, answers={"/simple/": 500}) as index,
        pytest.raises(IndexResponseError) as failed,
    ):
        _fetch(index.url.replace("://", "://alice:s3cret@"))
    assert "s3cret" not in str(failed.value)
    assert "alice:****@127.0.0.1" in str(failed.value)


def test_https_certificates_are_checked(served: Path) -> None:
    with LocalIndex(served, tls=True) as index:
        with pytest.raises(IndexResponseError, match="CERTIFICATE_VERIFY_FAILED") as refused:
            _fetch(index.url)
        assert refused.value.status is None
        assert _fetch(index.url, cert=index.ca_file) == PROVENANCE.read_bytes()


def test_a_redirect_may_not_leave_https(served: Path) -> None:
    with LocalIndex(served) as plain, LocalIndex(served, tls=True) as secure:
        secure.redirects = {INTEGRITY: plain.root + INTEGRITY}
        with pytest.raises(IndexResponseError, match="refused: it leads to http://") as refused:
            _fetch(secure.url, cert=secure.ca_file)
        assert refused.value.status == 302
        assert plain.seen == ()
    for elsewhere in ("ftp://127.0.0.1/provenance", f"file://{served / PROVENANCE.name}"):
        with LocalIndex(served, redirects={INTEGRITY: elsewhere}) as index:
            with pytest.raises(IndexResponseError) as refused:
                _fetch(index.url)
            assert refused.value.status == 302
