"""The Python API without traps: a label given as a ``str`` is one label, every option of
``load_drivers`` is a named, typed keyword whose misspelling says which exist and whose wrong
value names the argument (never a file the user did not write), and the reference page lists
every public name and each public class's methods and properties, in plain Markdown."""

from __future__ import annotations

import base64
import hashlib
import inspect
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mcs_host
from mcs_host import (
    REGISTRY_FORMAT,
    ConfigError,
    Discovery,
    Host,
    HostConfig,
    LoadError,
    LoadOptions,
    Registry,
    TrustIndex,
    TrustSettings,
    load_drivers,
    lock,
    verify,
)

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "python-api.md"
BARE = HostConfig(autoload=False, plugins=False, registries=())
"""Nothing configured, no plugin, no registry: a load that reads no file of the user's."""

GHOST = """\
from mcs_host import DriverMeta, MCSToolDriver, Tool


class Driver(MCSToolDriver):
    meta = DriverMeta(id="ghost-0001", name="Ghost", version="1.0.0")

    def list_tools(self):
        return [Tool(name="boo", description="Says boo.", parameters=[])]

    def execute_tool(self, tool_name, arguments):
        return "boo"
"""

LOAD = """\
import sys
sys.path.insert(0, sys.argv[1])
from mcs_host import HostConfig, load_drivers
options = eval(sys.argv[2])
loaded = load_drivers(HostConfig(plugins=False, registries=()), "ghost", search_path=sys.argv[1],
                      **options)
(record,) = loaded.report.records
print(record.status, record.reason, record.verification)
"""


def _installed_ghost(site: Path) -> None:
    """An installed driver distribution no registry knows: ``ghost-driver``, label ghost."""
    info = site / "ghost_driver-1.0.dist-info"
    info.mkdir(parents=True)
    (site / "ghost_driver.py").write_text(GHOST)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ghost-driver\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mcs.drivers]\nghost = ghost_driver:Driver\n")
    rows = []
    for name in ("ghost_driver.py", f"{info.name}/METADATA", f"{info.name}/entry_points.txt"):
        data = (site / name).read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{name},sha256={digest},{len(data)}")
    (info / "RECORD").write_text("\n".join([*rows, f"{info.name}/RECORD,,"]) + "\n")


# -- labels ------------------------------------------------------------------------------------


def test_a_str_given_as_labels_is_one_label_never_its_letters(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as caught:
        load_drivers(BARE, "csv", search_path=str(tmp_path))
    assert caught.value.report.errors == (
        "csv: no driver has this label (installed or configured)",
    )
    with pytest.raises(LoadError) as caught:
        Host(BARE, search_path=[tmp_path]).load("csv")
    assert [e.split(":")[0] for e in caught.value.report.errors] == ["csv"]
    _installed_ghost(tmp_path / "site")
    (checked,) = Host(BARE, search_path=tmp_path / "site").verify("ghost").records
    assert (checked.verification.candidate.label, checked.verification.status) == (
        "ghost",
        "unverified",
    )


_untyped: Any = load_drivers
"""``load_drivers`` as code without type checking calls it (mypy refuses these calls)."""
_host: Any = Host(BARE)
_verify: Any = verify
_lock: Any = lock


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: _untyped(BARE, 5), "load_drivers() argument 'labels'"),
        (lambda: _untyped(BARE, [b"csv"]), "load_drivers() argument 'labels'"),
        (lambda: _host.load(None), "Host.load() argument 'labels'"),
        (lambda: _host.verify(3), "Host.verify() argument 'labels'"),
        (lambda: _verify(Discovery((), ()), TrustIndex(), labels=7), "verify() argument 'labels'"),
        (
            lambda: _lock(Registry(format=REGISTRY_FORMAT), [], plugins=[1]),
            "lock() argument 'plugins'",
        ),
        (lambda: _untyped(BARE, allow=[None]), "load_drivers() argument 'allow'"),
        (lambda: _untyped(BARE, search_path=4), "load_drivers() argument 'search_path'"),
        (lambda: _untyped({"strict": True}), "load_drivers() argument 'config'"),
    ],
)
def test_labels_of_another_type_are_a_type_error_naming_the_argument(
    call: Any, argument: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(argument)):
        call()


# -- options -----------------------------------------------------------------------------------


def test_a_trust_option_given_in_code_works_from_code(tmp_path: Path) -> None:
    """``allow_unverified=True`` by its own name (and in ``trust``) is the configuration's
    setting: the driver no registry knows mounts, unverified; without it, it is refused."""
    _installed_ghost(tmp_path / "site")

    def load(options: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", LOAD, str(tmp_path / "site"), options],
            capture_output=True,
            text=True,
            check=False,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert load("{}") == "rejected not-in-registry unverified"
    assert load("{'allow_unverified': True}") == "mounted mounted unverified"
    assert load("{'trust': {'allow_unverified': True}}") == "mounted mounted unverified"


def test_a_wrong_keyword_names_the_closest_and_every_one() -> None:
    with pytest.raises(TypeError) as caught:
        load_drivers(BARE, allow_extention=True)  # type: ignore[call-arg]
    message = str(caught.value)
    assert message.startswith(
        "load_drivers() got an unexpected keyword argument 'allow_extention'; "
        "did you mean 'allow_extensions'? It takes: registries, "
    )
    assert message.endswith(", ".join(LoadOptions.__annotations__))


def test_a_wrong_value_given_in_code_names_the_argument_not_the_users_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = tmp_path / "mcs-host" / "config.toml"
    user.parent.mkdir()
    user.write_text("plugins = false\nregistries = []\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("MCS_HOST_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        _untyped(dependencies="warn")
    assert str(caught.value) == (
        "load_drivers() argument dependencies: Input should be 'report' or 'refuse'"
    )
    with pytest.raises(ConfigError, match=r"^load_drivers\(\) argument trust: bogus: Extra"):
        load_drivers(trust={"bogus": True})
    with pytest.raises(TypeError, match="'allow_extensions' both as a keyword and in 'trust'"):
        load_drivers(allow_extensions=True, trust=TrustSettings(allow_extensions=False))


def test_load_options_are_every_setting_a_user_gives() -> None:
    """Each key of HostConfig but what the host records itself, and each trust setting by
    its own name, is a typed keyword of load_drivers."""
    recorded = {"source", "notes", "approved_digests"}
    settings = set(HostConfig.model_fields) - recorded
    assert set(LoadOptions.__annotations__) == settings | set(TrustSettings.model_fields)
    keywords = inspect.signature(load_drivers).parameters
    assert str(keywords["options"].annotation) == "Unpack[LoadOptions]"


# -- the reference page ------------------------------------------------------------------------


def _sections() -> dict[str, str]:
    """Each ``### `name``` heading of the page and the text under it."""
    text = PAGE.read_text("utf-8")
    parts = re.split(r"^### `([^`]+)`$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _listed_members(section: str) -> set[str]:
    listing = section.partition("\nMethods and properties:\n\n")[2]
    names = set()
    for line in listing.splitlines():
        if not line.startswith("- `"):
            break
        names.add(re.match(r"- `(?:classmethod |staticmethod )?(\w+)", line)[1])  # type: ignore[index]
    return names


def _public_members(cls: type) -> set[str]:
    """The public methods and properties ``cls`` has that mcs_host defines."""
    found = set()
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next(k for k in cls.__mro__ if name in vars(k))
        value = vars(owner)[name]
        kinds = (property, classmethod, staticmethod)
        is_member = inspect.isfunction(value) or isinstance(value, kinds)
        if owner.__module__.startswith("mcs_host") and (
            is_member or type(value).__name__ == "cached_property"
        ):
            found.add(name)
    return found


def test_the_page_lists_every_public_name_and_no_other() -> None:
    assert sorted(_sections()) == sorted(vars(mcs_host)["__all__"])


def test_the_page_lists_each_public_classs_methods_and_properties_both_ways() -> None:
    sections = _sections()
    for name in vars(mcs_host)["__all__"]:
        obj = getattr(mcs_host, name)
        expected = _public_members(obj) if inspect.isclass(obj) else set()
        assert _listed_members(sections[name]) == expected, name
    assert {"feed", "finish", "afinish"} <= _listed_members(sections["TextStream"])
    assert "- `schema: Mapping[str, Any]`: The JSON Schema" in sections["ResponseSchema"]


def test_the_page_is_plain_markdown_that_reads_on_a_repository_page() -> None:
    """No Sphinx directive or reST role, which a repository page shows as raw text; each
    link is to a heading of the page."""
    text = PAGE.read_text("utf-8")
    assert not re.search(r"^```\{|^\.\. \w|:(class|func|meth|mod|attr|data):`", text, re.M)
    anchors = {
        re.sub(r"[^\w\- ]", "", h.lower().replace(" ", "-"))
        for h in re.findall(r"^#{1,3} (.+)$", text, flags=re.MULTILINE)
    }
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links
    assert links <= anchors
    load = _sections()["load_drivers"]
    assert "**options: Unpack[LoadOptions]" in load
    assert "[`LoadOptions`](#loadoptions)" in load
