"""Host configuration: TOML file, pyproject table, environment, overrides, and errors by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcs_host import ConfigError, load_config

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
        False,
    )
    assert config.allow == ("files", "csv")
    assert config.require == {"files": ">=0.1,<1"}
    assert config.drivers["docs"].driver == "files"
    assert config.drivers["docs"].settings == {"root": "docs", "max_read_bytes": 4096}
    assert config.drivers["docs"].timeout == 2.5
    assert config.source == str(path)


def test_the_pyproject_table_and_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert load_config(environ={}).source is None
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "app"\n')
    assert load_config(environ={}).source is None  # no [tool.mcs-host] table: defaults
    (tmp_path / "pyproject.toml").write_text("[tool.mcs-host]\nhealthcheck = true\n")
    assert load_config(environ={}).healthcheck is True
    (tmp_path / "mcs-host.toml").write_text("strict = true\n")
    config = load_config(environ={})
    assert (config.strict, config.healthcheck) == (True, False)  # mcs-host.toml comes first


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
    overridden = load_config(environ=env, strict=True, trust={"allow_extensions": True})
    assert (overridden.strict, overridden.trust.allow_extensions) == (True, True)
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
