"""The registry model, signed envelopes, rollback state and merging, in this process."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from mcs_host.trust.registry import (
    REGISTRY_PAYLOAD_TYPE,
    DriverEntry,
    Registry,
    RegistryError,
    RegistrySource,
    RegistryState,
    TrustIndex,
    default_registry_paths,
    is_envelope,
    load_index,
    load_registry,
)
from mcs_host.trust.release import ReleaseStatement
from mcs_host.trust.signatures import Envelope, PrivateKey, PublicKey, SignatureError, pae

DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64


def entry(**fields: Any) -> dict[str, Any]:
    return {"distribution": "acme-weather", "label": "weather", "object": "acme:Driver", **fields}


def registry(**fields: Any) -> dict[str, Any]:
    return {"format": "mcs-host-registry/2", "drivers": {"id-1": entry()}, **fields}


def test_pae_is_the_dsse_encoding() -> None:
    assert pae("t/x", b"hello") == b"DSSEv1 3 t/x 5 hello"


def test_public_keys_parse_print_and_refuse_garbage() -> None:
    key = PrivateKey.generate().public_key
    assert PublicKey.parse(str(key)) == key
    assert len(key.keyid) == 64
    for bad, why in (
        ("rsa:AAAA", "does not start with"),
        ("ed25519:!!", "not valid base64"),
        ("ed25519:AAAA", "has 3 bytes, not 32"),
    ):
        with pytest.raises(ValueError, match=why):
            PublicKey.parse(bad)


def test_a_threshold_counts_distinct_trusted_keys() -> None:
    a, b, c = (PrivateKey.generate() for _ in range(3))
    trusted = [a.public_key, b.public_key]
    two = Envelope.sign(b"payload", "t", [a, b])
    assert {k.keyid for k in two.verify(trusted, 2, "x")} == {k.keyid for k in trusted}
    twice = Envelope("t", b"payload", Envelope.sign(b"payload", "t", [a]).signatures * 2)
    with pytest.raises(SignatureError, match="1 valid from distinct trusted keys, 1 more by a key"):
        twice.verify(trusted, 2, "x")
    outsider = Envelope.sign(b"payload", "t", [a, c])
    with pytest.raises(SignatureError, match="1 by keys not trusted here"):
        outsider.verify(trusted, 2, "x")
    tampered = Envelope("t", b"payload!", two.signatures)
    with pytest.raises(SignatureError, match=r"0 valid .*2 invalid"):
        tampered.verify(trusted, 1, "x")
    retyped = Envelope("other/type", b"payload", two.signatures)
    with pytest.raises(SignatureError, match=r"0 valid .*2 invalid") as caught:
        retyped.verify(trusted, 1, "x")  # the type is signed too
    assert caught.value.reason == "under-signed"


def test_envelopes_round_trip_and_malformed_ones_are_named() -> None:
    key = PrivateKey.generate()
    envelope = Envelope.sign(b"{}", REGISTRY_PAYLOAD_TYPE, [key])
    assert Envelope.from_json(json.dumps(envelope.to_json()), "e") == envelope
    with pytest.raises(SignatureError, match=r"index\.json: not a DSSE envelope"):
        Envelope.from_json('{"payload": "%%%", "signatures": []}', "index.json")


def test_registry_entries_are_validated_by_field() -> None:
    with pytest.raises(ValidationError, match="write the PEP 503 name 'acme-weather'"):
        DriverEntry.model_validate(entry(distribution="Acme_Weather"))
    with pytest.raises(ValidationError, match="versions"):
        DriverEntry.model_validate(entry(versions=">>1"))
    with pytest.raises(ValidationError, match="'one' is not a valid version"):
        DriverEntry.model_validate(
            entry(releases={"one": {"digest": DIGEST_A, "files": 1, "bytes": 1}})
        )
    with pytest.raises(ValidationError, match="give a time zone"):
        Registry.model_validate(registry(expires="2030-01-01T00:00:00"))


def test_versions_minimum_and_revocations() -> None:
    e = DriverEntry.model_validate(
        entry(
            versions=">=1.0,<2",
            minimum_version="1.2",
            revoked={"1.3.0": "bad"},
            releases={"1.2": {"digest": DIGEST_A, "files": 1, "bytes": 1}},
        )
    )
    assert e.refuses_version("1.1.9") == "1.1.9 is below the minimum version 1.2"
    assert e.refuses_version("2.0.0") == "2.0.0 is not among the allowed versions >=1.0,<2"
    assert e.refuses_version("1.5.0") is None
    assert e.revocation("1.3") == "bad"
    pin = e.pin_for("1.2.0")
    assert pin is not None
    assert pin.digest == DIGEST_A


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def signed(path: Path, document: dict[str, Any], keys: list[PrivateKey]) -> Path:
    """``document`` (named ``acme-index`` unless it says otherwise) as a signed envelope."""
    payload = json.dumps({"name": "acme-index", **document}).encode()
    envelope = Envelope.sign(payload, REGISTRY_PAYLOAD_TYPE, keys)
    return write(path, envelope.to_json())


def test_plain_registries_load_and_expire(tmp_path: Path) -> None:
    path = write(tmp_path / "r.json", registry(expires="2030-01-01T00:00:00Z"))
    loaded = load_registry(RegistrySource(str(path)), now=datetime(2029, 1, 1, tzinfo=UTC))
    assert list(loaded.drivers) == ["id-1"]
    with pytest.raises(RegistryError, match=r"r\.json: expired at 2030-01-01T00:00:00\+00:00"):
        load_registry(RegistrySource(str(path)), now=datetime(2031, 1, 1, tzinfo=UTC))


def test_a_registry_or_release_statement_of_the_old_digest_format_is_refused_saying_why(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "old.json", {**registry(), "format": "mcs-host-registry/1"})
    with pytest.raises(RegistryError) as raised:
        load_registry(RegistrySource(str(path)), state=RegistryState(tmp_path / "state.json"))
    assert raised.value.reason == "invalid"
    assert "mcs-host-registry/1 is an old format: its pins are installed-tree-v1 digests" in str(
        raised.value
    )
    assert "re-lock it with `mcs-host lock`" in str(raised.value)
    statement = {
        "format": "mcs-host-release/1",
        "distribution": "acme-weather",
        "version": "1.0",
        "digest": DIGEST_A,
        "files": 1,
        "bytes": 1,
        "drivers": [],
    }
    with pytest.raises(ValidationError, match="sign the release again with mcs-host sign"):
        ReleaseStatement.model_validate(statement)


def test_signed_registries_need_keys_expiry_and_a_rising_version(tmp_path: Path) -> None:
    a, b = PrivateKey.generate(), PrivateKey.generate()
    keys = (a.public_key, b.public_key)
    state = RegistryState(tmp_path / "state.json")
    doc = registry(version=2, expires="2999-01-01T00:00:00Z")
    path = signed(tmp_path / "s.json", doc, [a, b])
    with pytest.raises(RegistryError, match="is a signed registry: give the keys"):
        load_registry(RegistrySource(str(path)), state)
    assert load_registry(RegistrySource(str(path), keys, 2), state).version == 2
    assert load_registry(RegistrySource(str(path), keys, 2), state).version == 2  # same again: fine
    older = signed(tmp_path / "old.json", {**doc, "version": 1}, [a, b])
    with pytest.raises(RegistryError, match="version 1 is older than version 2") as caught:
        load_registry(RegistrySource(str(older), keys, 2), state)
    assert caught.value.reason == "rollback"
    changed = signed(tmp_path / "changed.json", {**doc, "drivers": {}}, [a, b])
    with pytest.raises(RegistryError, match="a changed registry must raise its version"):
        load_registry(RegistrySource(str(changed), keys, 2), state)
    undated = signed(tmp_path / "undated.json", registry(version=3), [a, b])
    with pytest.raises(RegistryError, match="a signed registry must set expires"):
        load_registry(RegistrySource(str(undated), keys, 2), state)
    unnamed = signed(tmp_path / "unnamed.json", {**doc, "version": 3, "name": None}, [a, b])
    with pytest.raises(RegistryError, match="a signed registry must set name"):
        load_registry(RegistrySource(str(unnamed), keys, 2), state)
    # the state is per key set and name, not per path: a copy elsewhere is still a replay
    moved = tmp_path / "moved.json"
    moved.write_bytes(older.read_bytes())
    with pytest.raises(RegistryError, match="older"):
        load_registry(RegistrySource(str(moved), keys, 2), state)


def test_two_indexes_signed_by_the_same_keys_keep_their_own_versions(tmp_path: Path) -> None:
    key = PrivateKey.generate()
    keys = (key.public_key,)
    state = RegistryState(tmp_path / "state.json")
    drivers = signed(
        tmp_path / "drivers.json",
        registry(name="acme-drivers", version=7, expires="2999-01-01T00:00:00Z"),
        [key],
    )
    libraries = signed(
        tmp_path / "libraries.json",
        registry(name="acme-libraries", version=2, expires="2999-01-01T00:00:00Z"),
        [key],
    )
    assert load_registry(RegistrySource(str(drivers), keys), state).version == 7
    assert load_registry(RegistrySource(str(libraries), keys), state).version == 2  # no rollback
    older = signed(
        tmp_path / "older.json",
        registry(name="acme-libraries", version=1, expires="2999-01-01T00:00:00Z"),
        [key],
    )
    with pytest.raises(RegistryError, match="version 1 is older than version 2"):
        load_registry(RegistrySource(str(older), keys), state)


def test_with_registry_keys_a_plain_registry_is_refused_even_on_a_fresh_state(
    tmp_path: Path,
) -> None:
    key = PrivateKey.generate()
    plain = write(tmp_path / "index.json", registry(version=1, expires="2999-01-01T00:00:00Z"))
    fresh = RegistryState(tmp_path / "never-used" / "state.json")
    with pytest.raises(RegistryError) as caught:
        load_registry(RegistrySource(str(plain), (key.public_key,)), fresh)
    assert caught.value.reason == "unsigned"
    assert str(caught.value) == (
        f"{plain} is a plain registry, but registry keys were given: every registry must then "
        "be an envelope they sign (mcs-host sign-registry); name it without keys to use it as "
        "a local lock"
    )
    assert not Path(fresh.path).exists()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("null", "(top): is null, not a JSON object"),
        ("[]", "(top): is an array, not a JSON object"),
        ('{"signed-paths": []}', "signed-paths: is not an object of path -> lineage"),
        ('{"abc": {"version": "7", "sha256": "00"}}', 'abc: is not {"version": <int>'),
        ('{"abc": {"version": true, "sha256": "00"}}', 'abc: is not {"version": <int>'),
        ("[" * 100 + "]" * 100, "JSON nested 100 levels deep; the limit is 64"),
        ("{not json", "not JSON"),
    ],
    ids=["null", "array", "paths-list", "string-version", "bool-version", "deep", "garbage"],
)
def test_a_damaged_state_file_is_an_error_naming_it_never_a_silent_reset(
    tmp_path: Path, text: str, problem: str
) -> None:
    key = PrivateKey.generate()
    state_file = tmp_path / "state.json"
    state_file.write_text(text)
    doc = registry(version=1, expires="2999-01-01T00:00:00Z")
    source = RegistrySource(str(signed(tmp_path / "index.json", doc, [key])), (key.public_key,))
    with pytest.raises(RegistryError) as caught:
        load_registry(source, RegistryState(state_file))
    assert caught.value.reason == "state-unreadable"
    assert str(caught.value).startswith(str(state_file))
    assert problem in str(caught.value)
    assert state_file.read_text() == text  # left as it was for the user to look at


def test_a_state_file_that_is_a_fifo_is_an_error_not_a_hang(tmp_path: Path) -> None:
    key = PrivateKey.generate()
    state_file = tmp_path / "state.json"
    os.mkfifo(state_file)
    doc = registry(version=1, expires="2999-01-01T00:00:00Z")
    source = RegistrySource(str(signed(tmp_path / "index.json", doc, [key])), (key.public_key,))
    with pytest.raises(RegistryError) as caught:
        load_registry(source, RegistryState(state_file))
    assert caught.value.reason == "state-unreadable"
    assert str(caught.value) == f"{state_file}: the registry state is not a regular file (a FIFO)"


def test_a_registry_behind_a_symlink_is_read_once_and_recorded_by_its_real_path(
    tmp_path: Path,
) -> None:
    key = PrivateKey.generate()
    doc = registry(version=1, expires="2999-01-01T00:00:00Z")
    real = signed(tmp_path / "real.json", doc, [key])
    link = tmp_path / "link.json"
    link.symlink_to(real)
    state = RegistryState(tmp_path / "state.json")
    assert load_registry(RegistrySource(str(link), (key.public_key,)), state).version == 1
    assert state.signed_before(str(real))
    assert json.loads(Path(state.path).read_text())["signed-paths"] == {
        str(real): RegistrySource(str(link), (key.public_key,)).lineage("acme-index")
    }


@pytest.mark.parametrize("kind", ["fifo", "directory", "deep", "huge"])
def test_a_registry_that_is_not_a_bounded_regular_json_file_is_refused_naming_it(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "registry.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "deep":
        path.write_text(
            '{"format": "mcs-host-registry/2", "drivers": ' + "[" * 10000 + "]" * 10000 + "}"
        )
    else:
        with path.open("wb") as f:
            f.truncate(65 * 1024 * 1024)  # sparse: no disk is spent
    with pytest.raises(RegistryError) as caught:
        load_registry(RegistrySource(str(path)), RegistryState(tmp_path / "state.json"))
    expected = {
        "fifo": "registry is not a regular file (a FIFO)",
        "directory": "registry is not a regular file (a directory)",
        "deep": "JSON nested 10001 levels deep; the limit is 64",
        "huge": "registry has 68157440 bytes; the limit is 67108864",
    }[kind]
    assert str(caught.value) == f"{path}: {expected}"


def test_a_registry_that_breaks_the_schema_names_each_field_in_one_line(tmp_path: Path) -> None:
    doc = registry()
    doc["drivers"]["id-1"]["distribution"] = "Acme_Weather"
    doc["version"] = -1
    path = write(tmp_path / "r.json", doc)
    with pytest.raises(RegistryError) as caught:
        load_registry(RegistrySource(str(path)), RegistryState(tmp_path / "state.json"))
    assert str(caught.value).splitlines() == [
        f"{path}: version: Input should be greater than or equal to 0",
        f"{path}: drivers.id-1.distribution: write the PEP 503 name 'acme-weather'",
    ]


def test_envelopes_are_told_from_plain_registries_by_their_shape(tmp_path: Path) -> None:
    key = PrivateKey.generate()
    doc = registry(version=1, expires="2999-01-01T00:00:00Z")
    assert is_envelope(signed(tmp_path / "s.json", doc, [key]).read_bytes())
    assert not is_envelope(json.dumps(doc))
    # a plain registry that merely mentions the word is still a plain registry
    doc["drivers"]["id-1"]["description"] = '"payloadType"'
    assert not is_envelope(json.dumps(doc))
    assert not is_envelope("not json {")
    assert not is_envelope('["payloadType"]')


def test_save_writes_the_dump_whole_and_keeps_the_file_mode(tmp_path: Path) -> None:
    path = write(tmp_path / "r.json", registry())
    path.chmod(0o640)
    loaded = load_registry(RegistrySource(str(path)))
    loaded.save(path)
    assert path.read_text() == loaded.dump()
    assert path.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary left behind
    fresh = tmp_path / "new" / "r.json"
    loaded.save(fresh)
    assert load_registry(RegistrySource(str(fresh))).drivers == loaded.drivers


def test_a_plain_file_in_place_of_a_signed_registry_is_refused(tmp_path: Path) -> None:
    key = PrivateKey.generate()
    state = RegistryState(tmp_path / "state" / "state.json")
    doc = registry(version=1, expires="2999-01-01T00:00:00Z")
    path = signed(tmp_path / "index.json", doc, [key])
    source = RegistrySource(str(path), (key.public_key,), 1)
    assert load_registry(source, state).version == 1
    inode = os.stat(state.path).st_ino
    assert load_registry(source, state).version == 1
    assert os.stat(state.path).st_ino == inode  # nothing new, nothing written
    write(path, doc)  # the attacker's downgrade: the same document, unsigned
    keyless = RegistrySource(str(path))  # even when the keys are not given this time
    with pytest.raises(RegistryError, match="was a signed registry when this host last") as caught:
        load_registry(keyless, state)
    assert caught.value.reason == "unsigned"
    # with the keys given, a plain file is refused on any state, even one never used
    with pytest.raises(RegistryError, match="is a plain registry, but registry keys were given"):
        load_registry(source, RegistryState(tmp_path / "other.json"))


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs a directory even root cannot write")
def test_a_state_that_cannot_be_written_is_a_registry_error(tmp_path: Path) -> None:
    key = PrivateKey.generate()
    state = RegistryState("/proc/mcs-host-registry-state.json")
    doc = registry(version=1, expires="2999-01-01T00:00:00Z")
    source = RegistrySource(str(signed(tmp_path / "index.json", doc, [key])), (key.public_key,), 1)
    with pytest.raises(RegistryError, match="cannot record the registry state") as caught:
        load_registry(source, state)
    assert caught.value.reason == "state-unwritable"


def test_load_index_leaves_out_a_broken_registry_and_says_why(tmp_path: Path) -> None:
    good = write(tmp_path / "good.json", registry())
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    index, errors = load_index([RegistrySource(str(good)), RegistrySource(str(broken))])
    assert list(index.entries) == ["id-1"]
    ((error),) = errors
    assert error.reason == "invalid"
    assert str(error).startswith(f"{broken}: not JSON")


def test_merging_adds_and_narrows_but_never_widens() -> None:
    first = Registry.model_validate(
        registry(
            drivers={
                "id-1": entry(
                    versions=">=1",
                    minimum_version="1.1",
                    releases={"1.1": {"digest": DIGEST_A, "files": 1, "bytes": 1}},
                )
            }
        )
    )
    second = Registry.model_validate(
        registry(
            drivers={
                "id-1": entry(
                    versions="<3",
                    minimum_version="1.4",
                    revoked={"1.5": "x"},
                    releases={"1.6": {"digest": DIGEST_B, "files": 2, "bytes": 2}},
                )
            }
        )
    )
    index = TrustIndex.merge([("first", first), ("second", second)])
    merged = index.entries["id-1"]
    assert merged.versions == ">=1,<3"
    assert merged.minimum_version == "1.4"
    assert merged.revoked == {"1.5": "x"}
    assert sorted(merged.releases) == ["1.1", "1.6"]
    assert index.conflicts == {}
    clash = Registry.model_validate(
        registry(
            drivers={
                "id-1": entry(
                    distribution="acme-wheather",
                    releases={"1.1": {"digest": DIGEST_B, "files": 1, "bytes": 1}},
                )
            }
        )
    )
    conflicts = TrustIndex.merge([("first", first), ("third", clash)]).conflicts["id-1"]
    assert conflicts == (
        "third says distribution 'acme-wheather', an earlier registry 'acme-weather'",
        f"third pins 1.1 as {DIGEST_B}, an earlier one as {DIGEST_A}",
    )


def test_default_registry_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert default_registry_paths({"XDG_CONFIG_HOME": str(tmp_path / "cfg")}) == []
    config = tmp_path / "cfg" / "mcs-host" / "registry.json"
    config.parent.mkdir(parents=True)
    config.write_text("{}")
    assert default_registry_paths({"XDG_CONFIG_HOME": str(tmp_path / "cfg")}) == [str(config)]
    # one in the working directory is never a default: whoever writes there is not the user
    (tmp_path / "registry.json").write_text("{}")
    assert default_registry_paths({"XDG_CONFIG_HOME": str(tmp_path / "elsewhere")}) == []
    env = {"MCS_HOST_REGISTRY": "/a.json:/b.json"}
    assert default_registry_paths(env) == ["/a.json", "/b.json"]


def test_an_entry_is_found_by_id_else_by_distribution_and_label() -> None:
    index = TrustIndex.merge(
        [
            (
                "r",
                Registry.model_validate(
                    registry(
                        drivers={
                            "id-1": entry(),
                            "id-2": entry(label="radar", object="acme:Radar"),
                            "id-3": entry(distribution="other-dist", label="x", object="o:X"),
                        }
                    )
                ),
            )
        ]
    )
    by_id = index.find("id-3", "acme-weather", "weather")
    assert by_id is not None
    assert by_id[0] == "id-3"  # the id decides, not the distribution and label
    found = index.find(None, "acme-weather", "radar")
    assert found is not None
    assert found[0] == "id-2"
    assert index.find(None, "acme-weather", "unknown") is None
    only = index.find(None, "other-dist", "anything")
    assert only is not None
    assert only[0] == "id-3"
