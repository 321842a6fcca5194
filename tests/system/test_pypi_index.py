"""The local package index that tests install from (tests/pypi_index.py) is an index real pip
downloads and installs from, over its JSON and its HTML simple API, and it serves what PEP
691, PEP 658/714 and PEP 740 and PyPI's Integrity API say an index serves, in their shapes: a
test that passes against it is one that would pass against PyPI.

Served: the real wheel of tests/data/provenance with its real provenance, and a fixture driver
wheel built by tests/distbuild.py, which has none. No network.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
from distbuild import Project, Venv, build_wheel
from pypi_index import INTEGRITY_JSON, SIMPLE_JSON, LocalIndex, pip_env

DATA = Path(__file__).resolve().parents[1] / "data" / "provenance"
WHEEL = DATA / "pypi_attestations-0.0.30-py3-none-any.whl"
PROVENANCE = WHEEL.with_name(WHEEL.name + ".provenance")
WEATHER = Project(
    "acme-weather",
    "1.2.0",
    files={"acme_weather/__init__.py": "FORECAST = 'sunny'\n"},
    entry_points={"mcs.drivers": {"weather": "acme_weather:Driver"}},
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real wheel and its provenance, and the fixture driver's wheel."""
    directory = tmp_path_factory.mktemp("served")
    shutil.copy(WHEEL, directory)
    shutil.copy(PROVENANCE, directory)
    build_wheel(WEATHER.write(tmp_path_factory.mktemp("src")), directory)
    return directory


def _get(url: str, accept: str | None = None) -> tuple[int, str, bytes]:
    assert url.startswith("http://127.0.0.1:")
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - loopback
            return answer.status, answer.headers["Content-Type"], answer.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.headers.get("Content-Type", ""), error.read()


def _pip(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.parametrize("json_api", [True, False], ids=["json", "html"])
def test_pip_downloads_the_real_wheel_and_the_driver(
    served: Path, tmp_path: Path, json_api: bool
) -> None:
    with LocalIndex(served, json_api=json_api) as index:
        for requirement in ("pypi-attestations==0.0.30", "acme_weather==1.2.0"):
            _pip(
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--index-url",
                index.url,
                "--dest",
                str(tmp_path),
                requirement,
                env=pip_env(index.url),
            )
        pages = [seen for seen in index.seen if seen.path.startswith("/simple/")]
    assert (tmp_path / WHEEL.name).read_bytes() == WHEEL.read_bytes()
    assert (tmp_path / "acme_weather-1.2.0-py2.py3-none-any.whl").is_file()
    # pip asked for JSON first, then HTML; the driver's non-normalized name was normalized
    assert {seen.path for seen in pages} == {"/simple/pypi-attestations/", "/simple/acme-weather/"}
    assert all(SIMPLE_JSON in (seen.accept or "") for seen in pages)


@pytest.mark.venv
@pytest.mark.parametrize("json_api", [True, False], ids=["json", "html"])
def test_pip_installs_from_it_into_a_venv(served: Path, tmp_path: Path, json_api: bool) -> None:
    venv = Venv.create(tmp_path / "venv")
    with LocalIndex(served, json_api=json_api) as index:
        _pip(
            "--python",
            str(venv.python),
            "install",
            "--no-deps",
            "--index-url",
            index.url,
            "pypi-attestations==0.0.30",
            "acme-weather",
            env=pip_env(index.url),
        )
        # pip reads the core metadata (PEP 658) before the wheel, from either page
        fetched = {seen.path for seen in index.seen}
    assert f"/files/{WHEEL.name}.metadata" in fetched
    done = venv.run("python", "-c", "import acme_weather; print(acme_weather.FORECAST)")
    assert done.stdout.strip() == "sunny", done.stderr
    installed = {path.name for path in venv.site_packages.glob("*.dist-info")}
    assert {"pypi_attestations-0.0.30.dist-info", "acme_weather-1.2.0.dist-info"} <= installed


def test_the_json_page_is_pep_691_with_pep_740_provenance(served: Path) -> None:
    with LocalIndex(served) as index:
        status, kind, body = _get(index.url + "pypi-attestations/", SIMPLE_JSON)
        page = json.loads(body)
        (entry,) = page["files"]
        metadata_url = index.root + entry["url"] + ".metadata"
        metadata = _get(metadata_url)[2]
        provenance = _get(entry["provenance"])
        driver = json.loads(_get(index.url + "acme-weather/", SIMPLE_JSON)[2])["files"][0]
        listing = json.loads(_get(index.url, SIMPLE_JSON)[2])
    assert (status, kind) == (200, SIMPLE_JSON)
    assert page["meta"] == {"api-version": "1.3"}
    assert (page["name"], page["versions"]) == ("pypi-attestations", ["0.0.30"])
    assert entry["filename"] == WHEEL.name
    assert entry["hashes"] == {"sha256": hashlib.sha256(WHEEL.read_bytes()).hexdigest()}
    assert entry["size"] == WHEEL.stat().st_size
    assert entry["requires-python"] == ">=3.10"
    assert entry["core-metadata"] == {"sha256": hashlib.sha256(metadata).hexdigest()}
    assert entry["data-dist-info-metadata"] == entry["core-metadata"]
    assert metadata.startswith(b"Metadata-Version:")
    # the provenance URL is absolute and is the Integrity API's, as PyPI gives it
    assert entry["provenance"] == (
        f"{index.root}/integrity/pypi-attestations/0.0.30/{WHEEL.name}/provenance"
    )
    assert provenance == (200, INTEGRITY_JSON, PROVENANCE.read_bytes())
    assert driver["provenance"] is None
    assert {"name": "acme-weather"} in listing["projects"]


def test_the_html_page_is_pep_503_with_the_same_facts(served: Path) -> None:
    with LocalIndex(served) as index:
        status, kind, body = _get(index.url + "pypi-attestations/")
        json_entry = json.loads(_get(index.url + "pypi-attestations/", SIMPLE_JSON)[2])["files"][0]
    page = body.decode()
    assert (status, kind) == (200, "text/html")
    assert '<meta name="pypi:repository-version" content="1.3">' in page
    (anchor,) = re.findall(r"<a [^>]*>[^<]*</a>", page)
    sha256 = json_entry["hashes"]["sha256"]
    assert f'href="/files/{WHEEL.name}#sha256={sha256}"' in anchor
    assert 'data-requires-python="&gt;=3.10"' in anchor
    core = json_entry["core-metadata"]["sha256"]
    assert f'data-core-metadata="sha256={core}"' in anchor
    assert f'data-dist-info-metadata="sha256={core}"' in anchor
    assert f'data-provenance="{json_entry["provenance"]}"' in anchor
    assert anchor.endswith(f">{WHEEL.name}</a>")


def test_negotiation_names_and_missing_things(served: Path) -> None:
    with LocalIndex(served) as index:
        integrity = (
            f"{index.root}/integrity/acme-weather/1.2.0/acme_weather-1.2.0-py2.py3-none-any.whl"
        )
        assert _get(integrity + "/provenance")[0] == 404  # the driver has no provenance
        assert _get(index.url + "no-such-project/", SIMPLE_JSON)[0] == 404
        assert _get(index.root + "/files/../pyproject.toml")[0] == 404
        # a non-normalized name is redirected to the normalized page
        assert json.loads(_get(index.url + "ACME_Weather/", SIMPLE_JSON)[2])["name"] == (
            "acme-weather"
        )
        asked = index.url + "acme-weather/?format=" + quote(SIMPLE_JSON, safe="")
        assert _get(asked)[1] == SIMPLE_JSON
    with LocalIndex(served, json_api=False, provenance_keys=False) as index:
        assert _get(index.url + "acme-weather/", SIMPLE_JSON)[0] == 406
        status, kind, body = _get(index.url + "pypi-attestations/", "text/html")
        integrity = f"{index.root}/integrity/pypi-attestations/0.0.30/{WHEEL.name}/provenance"
        assert _get(integrity)[2] == PROVENANCE.read_bytes()
    # a mirror from before PEP 740: version 1.1, no provenance in its pages
    assert (status, kind) == (200, "text/html")
    assert b'content="1.1"' in body
    assert b"data-provenance" not in body
