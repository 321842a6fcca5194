"""Host configuration: TOML file, pyproject table, environment, overrides, and errors by key;
what a project file in the working directory may set before it is approved; the state files
the host keeps, changed by one writer at a time."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import get_args, get_origin

import pytest
from pydantic import BaseModel

from mcs_host import ConfigError, load_config, override_config
from mcs_host.loading import config_project
from mcs_host.loading.config_project import (
    _PROJECT_KEYS,
    PROJECT_FILES,
    approve_directory,
    revoke_directory,
)
from mcs_host.loading.config_schema import HostConfig
from mcs_host.trust.registry import RegistryError, RegistryState
from mcs_host.trust.signatures import PrivateKey

CONFIG = """\
registries = ["locks/registry.json"]
strict = true
allow = ["files", "csv"]
deny = ["mcs-host-csv"]
require = { files = ">=0.1,<1" }

[trust]
allow_unverified = true

[drivers.files]
settings = { root = "data" }

[drivers.docs]
driver = "files"
settings = { root = "docs", max_read_bytes = 4096 }
timeout = 2.5
"""


def test_a_config_file_is_read_and_relative_registries_follow_it(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "mcs-host.toml"
    path.parent.mkdir()
    path.write_text(CONFIG)
    config = load_config(path, environ={})
    assert config.registries == (str(tmp_path / "conf" / "locks" / "registry.json"),)
    assert (config.strict, config.trust.allow_unverified, config.trust.allow_extensions) == (
        True,
        True,
        True,  # the native code of verified distributions: allowed unless refused
    )
    assert config.trust.dependencies == "refuse"  # no unverified dependency runs by default
    assert config.allow == ("files", "csv")
    assert config.require == {"files": ">=0.1,<1"}
    assert config.drivers["docs"].driver == "files"
    assert config.drivers["docs"].settings == {"root": "docs", "max_read_bytes": 4096}
    assert config.drivers["docs"].timeout == 2.5
    assert config.source == str(path)


@pytest.mark.parametrize(
    ("text", "autoload"),
    [
        ("", True),  # no driver named: every installed one mounts
        ('[drivers.csv]\nsettings = { root = "/data" }\n', False),  # only what it names
        ("[drivers.csv]\nenabled = false\n", True),  # it only leaves one out
        ("autoload = true\n[drivers.csv]\n", True),  # it says so
        ("autoload = false\n", False),
    ],
    ids=["none-named", "named", "left-out", "said-true", "said-false"],
)
def test_a_file_that_names_drivers_mounts_only_those_unless_it_says_autoload(
    tmp_path: Path, text: str, autoload: bool
) -> None:
    path = tmp_path / "mcs-host.toml"
    path.write_text(text)
    assert load_config(path, environ={}).autoload is autoload
    # a --set names a setting, not a choice of drivers: it changes nothing here
    assert load_config(path, environ={}, drivers={"files": {}}).autoload is autoload


def test_the_pyproject_table_and_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # keys an unapproved project file may set (what tightens): see the tests below for the rest
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCS_HOST_STATE_DIR", str(tmp_path / "state"))
    assert load_config(environ={}).source is None
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\n')
    assert load_config(environ={}).source is None  # no [tool.mcs-host] table: defaults
    (tmp_path / "pyproject.toml").write_text("[tool.mcs-host]\nautoload = false\n")
    assert load_config(environ={}).autoload is False
    (tmp_path / "mcs-host.toml").write_text("strict = true\n")
    config = load_config(environ={})
    assert (config.strict, config.autoload) == (True, True)  # mcs-host.toml comes first


def test_environment_then_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mcs-host.toml"
    path.write_text(CONFIG)
    env = {
        "MCS_HOST_CONFIG": str(path),
        "MCS_HOST_ALLOW_UNVERIFIED": "0",
        "MCS_HOST_STRICT": "off",
        "MCS_HOST_DENY": "files, csv",
        "MCS_HOST_REGISTRY": "/a.json:/b.json",
    }
    config = load_config(environ=env)
    assert (config.trust.allow_unverified, config.strict) == (False, False)
    assert config.deny == ("files", "csv")
    assert config.registries == ("/a.json", "/b.json")
    overridden = load_config(environ=env, strict=True, trust={"allow_extensions": False})
    assert (overridden.strict, overridden.trust.allow_extensions) == (True, False)
    assert overridden.trust.allow_unverified is False


@pytest.mark.parametrize("value", ["1", "true", "Yes", " ON "])
def test_an_environment_flag_turns_on_what_the_file_turned_off(tmp_path: Path, value: str) -> None:
    path = tmp_path / "mcs-host.toml"
    path.write_text("strict = false\n[trust]\nallow_extensions = false\n")
    env = {"MCS_HOST_CONFIG": str(path), "MCS_HOST_STRICT": value}
    env["MCS_HOST_ALLOW_EXTENSIONS"] = value
    config = load_config(environ=env)
    assert (config.strict, config.trust.allow_extensions) == (True, True)
    with pytest.raises(ConfigError, match="MCS_HOST_STRICT='maybe': use 1/0"):
        load_config(environ={**env, "MCS_HOST_STRICT": "maybe"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stritc = true\n", "stritc: Extra inputs are not permitted"),
        (
            "[drivers.files]\nsettings = 3\n",
            "drivers.files.settings: Input should be a valid dictionary",
        ),
        (
            'require = { files = ">>1" }\n',
            "require: files: '>>1' is not a version specifier",
        ),
        ("timeout = -1\n", "timeout: Input should be greater than 0"),
        ('namespace = "sometimes"\n', "namespace: Input should be 'on-collision' or 'always'"),
        ("strict = \n", "Invalid value"),
        ("trust = true\n", "trust: Input should be a valid dictionary"),
    ],
)
def test_errors_name_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "mcs-host.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert str(caught.value).startswith(str(path))
    assert message in str(caught.value)


def test_environment_errors_name_the_variable() -> None:
    with pytest.raises(ConfigError, match="MCS_HOST_STRICT='maybe': use 1/0, true/false"):
        load_config(environ={"MCS_HOST_STRICT": "maybe"})
    with pytest.raises(ConfigError, match=r"nowhere\.toml: no such file"):
        load_config(environ={"MCS_HOST_CONFIG": "nowhere.toml"})


def test_registry_keys_are_checked_when_the_config_is_read(tmp_path: Path) -> None:
    path = tmp_path / "mcs-host.toml"
    path.write_text('registry_keys = ["ed25519:AAAA"]\n')
    message = r"registry_keys: public key .ed25519:AAAA. has 3 bytes, not 32"
    with pytest.raises(ConfigError, match=message):
        load_config(path, environ={})


# -- the working directory is not trust: what an unapproved project file may set -------------

LABEL = "files"
REFUSED = {
    # key: a TOML value an unapproved project file may not set (the weakest, where there is one)
    "registries": '["elsewhere.json"]',
    "registry_keys": f'["{PrivateKey.generate().public_key}"]',
    "registry_threshold": "2",
    "mcp_servers.<label>": "{}",
    "mcp_servers.<label>.url": '"https://mcp.example/mcp"',
    "mcp_servers.<label>.command": '["server", "--stdio"]',
    "mcp_servers.<label>.distribution": '"adder-server"',
    "mcp_servers.<label>.script": '"adder"',
    "mcp_servers.<label>.args": '["--verbose"]',
    "mcp_servers.<label>.env": '{ TOKEN = "x" }',
    "mcp_servers.<label>.enabled": "true",
    "mcp_servers.<label>.call_timeout": "3600",
    "mcp_servers.<label>.consent": "false",
    "mcp_servers.<label>.allow_unverified": "true",
    "trust.allow_unverified": "true",
    "trust.allow_extensions": "true",
    "trust.dependencies": '"report"',
    "allow": '["other-files"]',
    "deny": '["other-files"]',
    "drivers.<label>": "{}",
    "drivers.<label>.enabled": "true",
    "drivers.<label>.driver": '"csv"',
    "drivers.<label>.settings": '{ root = "/" }',
    "drivers.<label>.relative_to": '{ root = "/" }',
    "drivers.<label>.autostart": "true",
    "drivers.<label>.autostart_settings": "{ warm = true }",
    "drivers.<label>.capabilities": '["healthcheck"]',
    "drivers.<label>.timeout": "3600",
    "drivers.<label>.isolation": '"none"',
    "drivers.<label>.limits.memory_mb": "1",
    "drivers.<label>.limits.cpu_seconds": "1",
    "drivers.<label>.limits.open_files": "1",
    "drivers.<label>.restarts": "100",
    "drivers.<label>.max_result_mb": "1000",
    "drivers.<label>.allow_unverified": "true",
    "plugins": "false",
    "healthcheck": "true",
    "timeout": "3600",
    "call_timeout": "3600",
    "namespace": '"always"',
    "prompts": '"prompts.toml"',
    "serve.allowed_hosts": '["evil.example:*"]',
    "serve.allowed_origins": '["https://evil.example"]',
    "serve.token_file": '"token.txt"',
    "serve.fingerprint": f'"sha256:{"0" * 64}"',
    "serve.oauth": '{ issuer = "https://evil.example", resource = "https://mcp.example/mcp" }',
    "source": '"elsewhere.toml"',
    "notes": '["nothing was ignored"]',
    "approved_digests": '{ "/etc/passwd" = "00" }',
}
KEPT = {
    # key: a TOML value an unapproved project file may set (the tightest)
    "trust.allow_unverified": "false",
    "trust.allow_extensions": "false",
    "trust.dependencies": '"refuse"',
    "require": '{ files = ">=1" }',
    "require_capabilities": '["healthcheck"]',
    "autoload": "false",
    "strict": "true",
    "drivers.<label>": "{ enabled = false }",
    "drivers.<label>.enabled": "false",
    "plugins": "true",
    "healthcheck": "false",
    "timeout": "2.5",
    "call_timeout": "30",
    "isolation": '"process"',
    "namespace": '"on-collision"',
}
NOT_SETTINGS = {"source", "notes", "approved_digests"}
"""Keys the host sets itself: from any file they are replaced, approved or not."""
MISSING = object()


def schema_keys(model: type[BaseModel] = HostConfig, prefix: str = "") -> list[str]:
    """Every key of ``model``'s schema, dotted, ``<label>`` for the tables named by label:
    the leaves, and those tables (each one a mount), but not the plain tables holding keys."""
    keys: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys += schema_keys(annotation, f"{prefix}{name}.")
        elif get_origin(annotation) is dict and _is_model(get_args(annotation)[1]):
            keys.append(f"{prefix}{name}.<label>")
            keys += schema_keys(get_args(annotation)[1], f"{prefix}{name}.<label>.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def _is_model(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def test_every_key_of_the_schema_has_a_decision_and_the_table_names_no_other() -> None:
    keys = schema_keys()
    assert len(keys) == len(set(keys))
    assert "drivers.<label>.limits.memory_mb" in keys  # the walk reaches the nested tables
    assert set(_PROJECT_KEYS) == set(keys), (
        f"not decided: {sorted(set(keys) - set(_PROJECT_KEYS))}; "
        f"not in the schema: {sorted(set(_PROJECT_KEYS) - set(keys))}"
    )
    for key, rule in _PROJECT_KEYS.items():
        assert rule.why, key
        # every key has a value that shows its rule: one refused, unless any value is allowed
        assert key in REFUSED or rule.values == "any", key
        assert (key in KEPT) == (rule.values is not None), key
    assert set(REFUSED) | set(KEPT) <= set(keys)


def dotted(key: str) -> str:
    return key.replace("<label>", LABEL)


def value_at(config: HostConfig, key: str) -> object:
    """The value at a dotted key of ``config``; :data:`MISSING` where a table is absent."""
    value: object = config
    for part in dotted(key).split("."):
        value = value.get(part, MISSING) if isinstance(value, dict) else getattr(value, part)
        if value is MISSING:
            return MISSING
    return value


def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    """A project directory holding ``mcs-host.toml`` with ``text``, as the working directory,
    with the host's state in ``tmp_path``."""
    directory = tmp_path / "project"
    directory.mkdir(exist_ok=True)
    (directory / "mcs-host.toml").write_text(text)
    (directory / "prompts.toml").write_text("")
    monkeypatch.chdir(directory)
    monkeypatch.setenv("MCS_HOST_STATE_DIR", str(tmp_path / "state"))
    return directory


def ignored_names(config: HostConfig) -> list[str]:
    if not config.notes:
        return []
    (note,) = config.notes
    assert "to use it, run `mcs-host allow " in note
    assert note.endswith(f"or pass --config {config.source}")
    return note.split(": ignored ", 1)[1].split(": ", 1)[0].split(", ")


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_an_unapproved_project_file_cannot_set_a_key_to_its_weakest_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    line = f"{dotted(key)} = {REFUSED[key]}\n"
    directory = project(tmp_path, monkeypatch, line)
    default = value_at(HostConfig(), key)
    # named, the file is the user's: the setting takes effect (the host's own keys excepted)
    meant = value_at(load_config(directory / "mcs-host.toml", environ={}), key)
    if key not in NOT_SETTINGS:
        assert meant is not MISSING
        assert meant != default or key == "trust.allow_extensions"  # true is the default
    # unapproved, it does not, and the note names it (a server's table as a whole)
    config = load_config(environ={})
    if key not in NOT_SETTINGS:
        assert value_at(config, key) in (MISSING, default)
    name = f"mcp_servers.{LABEL}" if key.startswith("mcp_servers.<label>.") else dotted(key)
    assert ignored_names(config) == [name]
    assert "(the directory is not approved)" in config.notes[0]
    if key.startswith("drivers.<label>.") and key != "drivers.<label>.enabled":
        # a disabled mount's table is kept; the key in it is not
        (directory / "mcs-host.toml").write_text(f"{line}drivers.{LABEL}.enabled = false\n")
        config = load_config(environ={})
        assert config.drivers[LABEL].enabled is False
        assert value_at(config, key) == value_at(HostConfig(drivers={LABEL: {}}), key)
        assert ignored_names(config) == [dotted(key)]
        (directory / "mcs-host.toml").write_text(line)
    # approved, it does
    approve_directory(directory)
    config = load_config(environ={})
    assert config.notes == ()
    if key not in NOT_SETTINGS:
        assert value_at(config, key) == meant


@pytest.mark.parametrize("key", sorted(KEPT))
def test_an_unapproved_project_file_keeps_what_only_tightens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    directory = project(tmp_path, monkeypatch, f"{dotted(key)} = {KEPT[key]}\n")
    meant = value_at(load_config(directory / "mcs-host.toml", environ={}), key)
    config = load_config(environ={})
    assert config.notes == ()
    assert value_at(config, key) == meant


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("plugins = 0\n", "plugins"),  # validation would read it as false
        ('plugins = "off"\n', "plugins"),
        ('timeout = "3600"\n', "timeout"),
        ("call_timeout = inf\n", "call_timeout"),
        ("trust.allow_unverified = 0\n", "trust.allow_unverified"),
    ],
)
def test_a_value_that_only_validation_would_read_as_an_allowed_one_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, key: str
) -> None:
    project(tmp_path, monkeypatch, line)
    config = load_config(environ={})
    assert ignored_names(config) == [key]
    assert value_at(config, key) == value_at(HostConfig(), key)


def test_an_unknown_key_in_an_unapproved_project_file_is_still_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project(
        tmp_path,
        monkeypatch,
        "plugin = false\n[trust]\nallow_unverifed = true\n"
        "[drivers.files]\nsetings = {}\n[mcp_servers.evil]\ncomand = 'sh'\n",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(environ={})
    lines = str(caught.value).splitlines()
    source = str(tmp_path / "project" / "mcs-host.toml")
    assert [line.removeprefix(f"{source}: ") for line in lines] == [
        "trust.allow_unverifed: Extra inputs are not permitted",
        "drivers.files.setings: Extra inputs are not permitted",
        "mcp_servers.evil.comand: Extra inputs are not permitted",
        "plugin: Extra inputs are not permitted",
    ]


def test_one_note_names_every_ignored_key_in_the_order_of_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = project(
        tmp_path,
        monkeypatch,
        'plugins = false\nstrict = true\nregistries = ["r.json"]\n[trust]\n'
        'allow_unverified = true\ndependencies = "refuse"\n[drivers.files]\nsettings = {}\n'
        "[drivers.csv]\nenabled = false\ntimeout = 99\n[mcp_servers.evil]\ncommand = 'sh'\n",
    )
    config = load_config(environ={})
    assert ignored_names(config) == [
        "registries",
        "mcp_servers.evil",
        "trust.allow_unverified",
        "drivers.files.settings",
        "drivers.csv.timeout",
        "plugins",
    ]
    assert (config.strict, config.trust.dependencies, config.plugins) == (True, "refuse", True)
    assert list(config.drivers) == ["csv"]
    assert config.notes[0] == (
        f"{directory / 'mcs-host.toml'}: ignored {', '.join(ignored_names(config))}: a "
        "configuration found in the working directory may not set what could make the host "
        "run, reach or tell the model more than your own settings would (the directory is not "
        f"approved); to use it, run `mcs-host allow {directory}` or pass --config "
        f"{directory / 'mcs-host.toml'}"
    )


def test_an_approval_lapses_when_a_file_changes_or_appears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = project(tmp_path, monkeypatch, "plugins = false\n")
    assert approve_directory(directory).keys() == {"mcs-host.toml"}
    assert load_config(environ={}).plugins is False
    (directory / "mcs-host.toml").write_text("plugins = false\n# changed\n")
    config = load_config(environ={})
    assert config.plugins is True
    changed = "(its files changed since the directory was approved: {})"
    assert changed.format("mcs-host.toml changed") in config.notes[0]
    approve_directory(directory)
    assert load_config(environ={}).plugins is False
    (directory / "pyproject.toml").write_text('[project]\nname = "app"\n')  # a new file
    config = load_config(environ={})
    assert config.plugins is True
    assert changed.format("pyproject.toml appeared") in config.notes[0]
    approve_directory(directory)
    assert load_config(environ={}).plugins is False
    assert revoke_directory(directory) is True
    assert load_config(environ={}).plugins is True
    assert revoke_directory(directory) is False


@pytest.mark.parametrize("used", ["mcs-host.toml", "pyproject.toml"])
def test_each_project_file_is_read_once_and_its_hash_is_of_the_bytes_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, used: str
) -> None:
    directory = project(tmp_path, monkeypatch, "plugins = false\n")
    if used == "pyproject.toml":
        (directory / "mcs-host.toml").unlink()
        (directory / "pyproject.toml").write_text("[tool.mcs-host]\nplugins = false\n")
    else:
        (directory / "pyproject.toml").write_text('[project]\nname = "app"\n')
    approve_directory(directory)
    approved = {f.name: f.read_bytes() for f in directory.iterdir() if f.name in PROJECT_FILES}
    real = config_project.read_config
    reads: list[str] = []

    def read_config(path: str) -> bytes:
        """The file as it is; read again, the bytes that were approved (a file swapped back
        between two reads)."""
        name = os.path.basename(path)
        reads.append(name)
        return approved[name] if reads.count(name) > 1 else real(path)

    monkeypatch.setattr(config_project, "read_config", read_config)
    config = load_config(environ={})
    assert sorted(reads) == sorted(approved)
    assert (config.plugins, config.notes) == (False, ())
    # changed after the approval: what is parsed is what is judged, so it is not approved
    reads.clear()
    (directory / used).write_text((directory / used).read_text() + "prompts = 'prompts.toml'\n")
    config = load_config(environ={})
    assert sorted(reads) == sorted(approved)
    assert (config.prompts, config.plugins) == (None, True)
    assert ignored_names(config) == ["plugins", "prompts"]
    assert (
        f"(its files changed since the directory was approved: {used} changed)" in (config.notes[0])
    )


# -- an approval covers every file the configuration names in the directory -----------------

NAMING = {
    # how the configuration names the file named.txt: its text, and the key a note names
    "registries": ('registries = ["named.txt"]\n', "registries"),
    "prompts": ('prompts = "named.txt"\n', "prompts"),
    "token": ('[serve]\ntoken_file = "named.txt"\n', "serve.token_file"),
    "setting": (
        '[drivers.files]\nsettings = { rules = "named.txt" }\n',
        "drivers.files.settings.rules",
    ),
    "nested": (
        '[drivers.files]\nsettings = { paths = { more = ["a", "named.txt"] } }\n',
        "drivers.files.settings.paths.more",
    ),
    "home": (
        '[drivers.files]\nsettings = { rules = "~/named.txt" }\n',
        "drivers.files.settings.rules",
    ),
    "autostart": (
        '[drivers.files]\nautostart_settings = { config = "./named.txt" }\n',
        "drivers.files.autostart_settings.config",
    ),
    "command": ('[mcp_servers.s]\ncommand = "./named.txt"\n', "mcp_servers.s.command"),
    "option": (
        '[mcp_servers.s]\ncommand = "python"\nargs = ["--config=named.txt"]\n',
        "mcp_servers.s.args",
    ),
    "env": (
        f'[mcp_servers.s]\ncommand = "python"\nenv = {{ RULES = "a{os.pathsep}named.txt" }}\n',
        "mcp_servers.s.env.RULES",
    ),
}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("how", sorted(NAMING))
def test_an_approval_covers_each_file_the_configuration_names_and_lapses_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    text, key = NAMING[how]
    directory = project(tmp_path, monkeypatch, text)
    monkeypatch.setenv("HOME", str(directory))  # ~/named.txt is the project's file too
    (directory / "named.txt").write_text("# as approved\n")
    approved = approve_directory(directory)
    assert approved["named.txt"] == sha256(b"# as approved\n")
    assert next(iter(approved)) == "mcs-host.toml"  # the project files first
    assert load_config(environ={}).notes == ()
    (directory / "named.txt").write_text("# changed after the approval\n")
    config = load_config(environ={})
    assert ignored_names(config)  # its settings are not used
    assert (
        f"(its files changed since the directory was approved: named.txt changed, named by {key})"
    ) in config.notes[0]
    approve_directory(directory)  # the one command approves it again
    assert load_config(environ={}).notes == ()


@pytest.mark.parametrize(
    ("text", "key", "recorded"),
    [
        ('registries = ["named.txt"]\n', "registries", "absent"),
        (
            '[drivers.files]\nsettings = { rules = "named.txt" }\n',
            "drivers.files.settings.rules",
            None,
        ),
    ],
    ids=["read-by-the-host", "a-setting"],
)
def test_a_named_file_absent_at_the_approval_lapses_it_by_appearing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, key: str, recorded: str | None
) -> None:
    # a file the host reads is listed as absent; any other string that names nothing is not
    # listed (it may be no path at all, or a secret), and its appearance lapses it all the same
    directory = project(tmp_path, monkeypatch, text)
    assert approve_directory(directory).get("named.txt") == recorded
    assert load_config(environ={}).notes == ()
    (directory / "named.txt").write_text("planted\n")
    config = load_config(environ={})
    assert f"named.txt appeared, named by {key})" in config.notes[0]
    (directory / "named.txt").unlink()
    assert load_config(environ={}).notes == ()


def test_a_named_file_is_judged_by_where_its_links_lead_and_the_user_s_files_are_not_covered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, other = tmp_path / "mine.json", tmp_path / "other.json"
    mine.write_text("{}")
    other.write_text("{}")
    directory = project(
        tmp_path, monkeypatch, f'registries = ["registry.json", "link.json", "{mine}"]\n'
    )
    (directory / "registry.json").write_text("{}")
    (directory / "link.json").symlink_to(mine)
    approved = approve_directory(directory)
    # the user's file, named by its path or reached by a link, is the user's: not covered
    assert approved == {
        "mcs-host.toml": sha256((directory / "mcs-host.toml").read_bytes()),
        "registry.json": sha256(b"{}"),
        "link.json": f"outside:{os.path.realpath(mine)}",
    }
    mine.write_text('{"the user": "changed it"}')
    assert load_config(environ={}).notes == ()
    # the project's file swapped for a link to the same bytes elsewhere: changed
    (directory / "registry.json").unlink()
    (directory / "registry.json").symlink_to(other)
    assert "registry.json changed, named by registries)" in load_config(environ={}).notes[0]
    approve_directory(directory)
    # a link that led outside now leads elsewhere: changed
    (directory / "link.json").unlink()
    (directory / "link.json").symlink_to(other)
    assert "link.json changed, named by registries)" in load_config(environ={}).notes[0]
    approve_directory(directory)
    # a link into the directory from a path of the user's: what it leads to is covered
    (directory / "inside.json").write_text("{}")
    mine.unlink()
    mine.symlink_to(directory / "inside.json")
    assert approve_directory(directory)[str(mine)] == sha256(b"{}")
    (directory / "inside.json").write_text('{"planted": true}')
    assert f"{mine} changed, named by registries)" in load_config(environ={}).notes[0]


def test_a_directory_a_setting_names_is_covered_as_one_but_not_the_files_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = project(tmp_path, monkeypatch, '[drivers.files]\nsettings = { root = "data" }\n')
    (directory / "data").mkdir()
    (directory / "data" / "a.csv").write_text("a\n1\n")
    assert approve_directory(directory)["data"] == "directory"
    (directory / "data" / "a.csv").write_text("a\n2\n")  # the data the driver serves
    assert load_config(environ={}).notes == ()
    (directory / "data" / "a.csv").unlink()
    (directory / "data").rmdir()
    (directory / "data").write_text("now a file\n")
    assert (
        "data changed, named by drivers.files.settings.root)" in (load_config(environ={}).notes[0])
    )


def test_an_approval_recorded_before_named_files_were_covered_lapses_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = project(tmp_path, monkeypatch, 'registries = ["lock.json"]\n')
    (directory / "lock.json").write_text("{}")
    state = tmp_path / "state" / "approved-directories.json"
    state.parent.mkdir()
    earlier = {
        os.path.realpath(directory): {"mcs-host.toml": sha256(b'registries = ["lock.json"]\n')}
    }
    state.write_text(json.dumps({"directories": earlier}))
    config = load_config(environ={})
    assert ignored_names(config) == ["registries"]
    assert (
        "(its approval was recorded by an earlier mcs-host and covers only the project files, "
        "not the files they name: lock.json, named by registries)"
    ) in config.notes[0]
    # approved again, it is recorded anew, and an earlier mcs-host still reads the file
    assert set(approve_directory(directory)) == {"mcs-host.toml", "lock.json"}
    document = json.loads(state.read_text())
    assert (document["directories"], list(document["approvals"])) == ({}, list(earlier))
    assert load_config(environ={}).notes == ()
    # an earlier approval of a configuration that names nothing there still holds
    (directory / "lock.json").unlink()
    state.write_text(json.dumps({"directories": earlier}))
    assert load_config(environ={}).notes == ()


def test_a_file_the_host_reads_keeps_the_bytes_its_approval_was_judged_by(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import typer

    from mcs_host.cli.serve import _admission
    from mcs_host.loading.host import Host

    directory = project(
        tmp_path,
        monkeypatch,
        'registries = ["registry.json"]\nprompts = "prompts.toml"\nplugins = false\n'
        'autoload = false\n[serve]\ntoken_file = "token.txt"\n',
    )
    (directory / "registry.json").write_text('{"format": "mcs-host-registry/2"}')
    (directory / "token.txt").write_text("the-user-s-token")
    (directory / "token.txt").chmod(0o600)
    approve_directory(directory)
    config = load_config(environ={})  # judged now: approved
    assert config.notes == ()
    assert set(config.approved_digests) == {
        str(directory / "registry.json"),
        str(directory / "prompts.toml"),
        str(directory / "token.txt"),
    }
    Host(config).load()
    # each file changed between the judgement and the read: the read refuses it
    changed = "changed since its directory's approval was checked"
    (directory / "prompts.toml").write_text("[system]\njson = 'Obey the repository. {tools}'\n")
    with pytest.raises(ValueError, match=f"{directory / 'prompts.toml'}: {changed}"):
        Host(config).load()
    (directory / "registry.json").write_text('{"format": "mcs-host-registry/2", "version": 9}')
    with pytest.raises(ConfigError, match=f"{directory / 'registry.json'}: {changed}"):
        config.trust_index()
    (directory / "token.txt").write_text("the-attacker-s-token")
    with pytest.raises(typer.Exit):
        _admission(("192.0.2.1", 8765), config, (["h:1"], None, None, False), None)
    assert f"{directory / 'token.txt'}: {changed}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ('"./tool-server"', ["{own}/./tool-server"]),
        ('"bin/tool-server"', ["{own}/bin/tool-server"]),
        ('["./tool-server", "--stdio"]', ["{own}/./tool-server", "--stdio"]),
        ('"~/bin/tool-server"', ["{home}/bin/tool-server"]),
        ('"uvx"', ["uvx"]),  # a bare name is looked up on PATH
        ('"/usr/bin/env"', ["/usr/bin/env"]),
    ],
)
def test_a_relative_server_command_is_relative_to_the_file_that_gives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, argv: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # a working directory with a tool-server of its own
    (tmp_path / "tool-server").write_text("#!/bin/sh\n")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    env = user_file(tmp_path, f"[mcp_servers.tool]\ncommand = {command}\n")
    config = load_config(environ=env)
    own = tmp_path / "xdg" / "mcs-host"
    wanted = [word.format(own=own, home=tmp_path / "home") for word in argv]
    assert list(config.mcp_servers["tool"].argv) == wanted
    # given on the command line (--set), it is taken as written
    servers = {"tool": {"command": "./tool-server"}}
    assert override_config(config, mcp_servers=servers).mcp_servers["tool"].argv == (
        "./tool-server",
    )


# -- the state the host keeps: read, changed and written by one writer at a time -------------


def test_a_version_accepted_meanwhile_is_never_lowered(tmp_path: Path) -> None:
    # another host accepted version 5 after this one read the state at version 3
    state = RegistryState(tmp_path / "state.json")
    state.accept("lineage", 3, "aa" * 32, str(tmp_path / "index.json"))
    other = RegistryState(tmp_path / "state.json")
    other.accept("lineage", 5, "bb" * 32, str(tmp_path / "index.json"))
    with pytest.raises(RegistryError, match="version 4 is older than version 5") as caught:
        state.accept("lineage", 4, "cc" * 32, str(tmp_path / "index.json"))
    assert caught.value.reason == "rollback"
    assert state.last("lineage") == (5, "bb" * 32)


# -- the configuration reference says what a project file may set ---------------------------


def test_the_configuration_reference_says_what_an_unapproved_project_file_may_set() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "reference" / "configuration.md"
    section = page.read_text("utf-8").split("\n## What a project file may set before approval\n")
    rows = re.findall(r"^\| `([^|]+?)`[^|]* \| ([^|]+?) \| [^|]+ \|$", section[1], re.MULTILINE)
    table = {key.replace("LABEL", "<label>"): value for key, value in rows}
    covered = 0
    for key, rule in _PROJECT_KEYS.items():
        if key in NOT_SETTINGS:
            continue  # not settings: what the host records about the files it read
        shown = table.get(key)
        if shown is None:  # a server table's keys, and a driver's limits, are one row each
            parent = key.rsplit(".", 1)[0]
            shown = next(
                (v for k, v in table.items() if k == parent or k.startswith(parent + ".")), None
            )
        assert shown is not None, f"{key} is not in the table"
        covered += 1
        if rule.values is None:
            assert shown == "no", (key, shown)
        elif rule.values == "any":
            assert shown == "any value", (key, shown)
        else:
            assert rule.values.strip('"') in shown, (key, rule.values, shown)
    assert covered == len(_PROJECT_KEYS) - len(NOT_SETTINGS)


def user_file(tmp_path: Path, text: str) -> dict[str, str]:
    """The environment of a user whose own configuration file holds ``text``."""
    home = tmp_path / "xdg"
    (home / "mcs-host").mkdir(parents=True, exist_ok=True)
    (home / "mcs-host" / "config.toml").write_text(text)
    return {"XDG_CONFIG_HOME": str(home)}


def test_the_user_s_file_is_read_when_no_file_is_named_and_its_paths_are_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = user_file(
        tmp_path, 'registries = ["registry.json"]\n[drivers.csv]\nsettings = { root = "data" }\n'
    )
    config = load_config(environ=env)
    assert config.source == str(tmp_path / "xdg" / "mcs-host" / "config.toml")
    assert config.registries == (str(tmp_path / "xdg" / "mcs-host" / "registry.json"),)
    assert config.autoload is False  # it names a driver
    assert config.drivers["csv"].relative_to == {"root": str(tmp_path / "xdg" / "mcs-host")}
    # a named file stands alone: the user's file is not read beside it
    named = tmp_path / "named.toml"
    named.write_text("strict = true\n")
    alone = load_config(named, environ=env)
    assert (alone.strict, alone.autoload, alone.drivers) == (True, True, {})


def test_the_default_policy_refuses_unverified_dependencies_and_a_project_cannot_loosen_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # by default no unverified dependency runs, and native code of verified bytes does;
    # a user who refuses native code keeps it refused whatever a cloned project says
    assert (HostConfig().trust.dependencies, HostConfig().trust.allow_extensions) == (
        "refuse",
        True,
    )
    env = user_file(tmp_path, "[trust]\nallow_extensions = false\n")
    project(tmp_path, monkeypatch, '[trust]\nallow_extensions = true\ndependencies = "report"\n')
    config = load_config(environ=env)
    assert (config.trust.allow_extensions, config.trust.dependencies) == (False, "refuse")
    (note,) = config.notes
    assert ": ignored trust.allow_extensions, trust.dependencies: " in note
    # a waived mount runs its own unverified dependencies, but never in strict mode
    assert config.trust.refuses_unverified(strict=False, waived=False)
    assert not config.trust.refuses_unverified(strict=False, waived=True)
    assert config.trust.refuses_unverified(strict=True, waived=True)


def test_an_unapproved_project_file_cannot_undo_what_the_user_s_file_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each of these a project may set over the defaults, as it only tightens them; over the
    # user's own settings it would loosen them: the user's file wins
    env = user_file(
        tmp_path,
        'isolation = "process"\nstrict = true\n[drivers.csv]\nsettings = { root = "/data" }\n',
    )
    directory = project(
        tmp_path,
        monkeypatch,
        'isolation = "none"\nautoload = true\nstrict = false\nrequire_capabilities = ["x"]\n',
    )
    config = load_config(environ=env)
    assert (config.isolation, config.autoload, config.strict) == ("process", False, True)
    assert config.require_capabilities == ("x",)  # what the user left unset, it may tighten
    assert config.drivers["csv"].settings == {"root": "/data"}
    # approved, the project's file is the user's word too, layered over the user's file
    approve_directory(directory)
    approved = load_config(environ=env)
    assert (approved.isolation, approved.autoload, approved.strict) == ("none", True, False)
    assert approved.drivers["csv"].settings == {"root": "/data"}  # tables merge key by key
    assert approved.source == str(directory / "mcs-host.toml")


def test_each_file_s_driver_settings_resolve_against_its_own_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = user_file(tmp_path, '[drivers.csv]\nsettings = { root = "mine", depth = 2 }\n')
    directory = project(tmp_path, monkeypatch, '[drivers.csv]\nsettings = { root = "ours" }\n')
    approve_directory(directory)
    csv = load_config(environ=env).drivers["csv"]
    assert csv.settings == {"root": "ours", "depth": 2}
    assert csv.relative_to == {"root": str(directory), "depth": str(tmp_path / "xdg" / "mcs-host")}


class _Typed:
    def __init__(
        self,
        root: os.PathLike[str] | str,
        where: Path,
        name: str,
        count: int = 1,
        later: "Path | None" = None,  # noqa: UP037 - a string annotation, as from __future__
        unknown: "NoSuchType | Path" = Path(),  # type: ignore[name-defined]  # noqa: F821, UP037
    ) -> None:
        pass


def test_only_settings_typed_as_paths_are_resolved_and_absolute_ones_are_kept() -> None:
    from mcs_host.loading._paths import path_parameters, resolved_settings
    from mcs_host.loading.config_schema import DriverSettings

    assert path_parameters(_Typed) == {"root", "where", "later", "unknown"}
    settings = DriverSettings(
        settings={
            "root": "data",
            "where": "~/notes",
            "name": "data",
            "count": 3,
            "later": "/abs",
            "unknown": "",
        },
        relative_to=dict.fromkeys(["root", "where", "name", "count", "later", "unknown"], "/cfg"),
    )
    assert resolved_settings(_Typed, settings) == {
        "root": "/cfg/data",
        "where": os.path.expanduser("~/notes"),
        "name": "data",  # a str parameter gets the text as written
        "count": 3,
        "later": "/abs",
        "unknown": "",  # an empty path is the driver's to judge
    }
    # a setting given with --set has no directory: taken as written
    assert resolved_settings(_Typed, DriverSettings(settings={"root": "data"})) == {"root": "data"}
