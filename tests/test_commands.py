"""The command line as a person uses it, through the installed console script: ``tools``
lists what a load mounts as signatures (and schemas with ``--json``); ``call TOOL
KEY=VALUE...`` types each value by the tool's schema; ``--label`` loads only the drivers named;
``version`` says what runs where; ``-h`` is ``--help``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from distbuild import ROOT, Venv

pytestmark = pytest.mark.venv


@pytest.fixture(scope="module")
def scene(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, uv_cache: Path
) -> dict[str, Any]:
    """A venv with mcs-host and the bundled drivers, a configuration mounting both over a
    directory with one CSV file."""
    root = tmp_path_factory.mktemp("commands")
    venv = Venv.create(root / "venv")
    venv.uv_install(
        "mcs-host", "mcs-host-csv", "mcs-host-files", wheelhouse=wheelhouse, cache=uv_cache
    )
    data = root / "data"
    data.mkdir()
    (data / "sales.csv").write_text("month,units\nJan,61\nFeb,90\nMar,143\n")
    config = root / "mcs-host.toml"
    config.write_text(
        f'registries = ["{ROOT / "registry.json"}"]\n\n'
        f'[drivers.csv]\nsettings = {{ root = "{data}" }}\n\n'
        f'[drivers.files]\nsettings = {{ root = "{data}" }}\n'
    )
    return {"venv": venv, "config": config, "root": root}


def host(scene: dict[str, Any], *args: str | Path) -> Any:
    venv: Venv = scene["venv"]
    return venv.run("mcs-host", *args, env={"HOME": str(scene["root"])})


def test_tools_lists_each_tool_as_a_signature_under_its_mount(scene: dict[str, Any]) -> None:
    done = host(scene, "tools", "--config", scene["config"])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "csv:"
    assert "  stat(path: str)" in lines
    summarize = next(line for line in lines if line.startswith("  summarize_column("))
    assert summarize.startswith("  summarize_column(file: str, column: str")
    assert "files:" in lines
    assert lines.index("files:") > lines.index(summarize)


def test_tools_json_gives_each_tool_its_schema_and_labels_limit_it(
    scene: dict[str, Any],
) -> None:
    done = host(scene, "tools", "csv", "--json", "--config", scene["config"])
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["schema"] == "urn:mcs-host:cli:tools:1"
    assert document["ok"] is True
    assert {t["label"] for t in document["tools"]} == {"csv"}
    (summarize,) = [t for t in document["tools"] if t["name"] == "summarize_column"]
    assert summarize["input_schema"]["required"][:2] == ["file", "column"]
    assert summarize["signature"].startswith("summarize_column(file: str, column: str")
    missing = host(scene, "tools", "nope", "--config", scene["config"])
    assert missing.returncode == 1
    assert "nope" in missing.stderr


def test_call_types_key_value_words_by_the_tool_s_schema(scene: dict[str, Any]) -> None:
    done = host(
        scene, "call", "read_csv_head", "file=sales.csv", "rows=2", "--json",
        "--config", scene["config"],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)["response"]["tool_call_result"]
    assert [row["month"] for row in result["rows"]] == ["Jan", "Feb"]  # rows=2 is a number
    # a string property takes the text as it is, even when it reads as JSON
    text = host(scene, "call", "stat", "path=123", "--json", "--config", scene["config"])
    detail = json.loads(text.stdout)["response"]["call_detail"]
    assert "123" in detail  # no such file 123, not a type error about the number 123
    assert "string" not in detail


def test_call_refuses_a_word_that_is_no_key_value_or_a_value_of_the_wrong_type(
    scene: dict[str, Any],
) -> None:
    bare = host(scene, "call", "read_csv_head", "sales.csv", "--config", scene["config"])
    assert bare.returncode == 2
    assert "'sales.csv': give KEY=VALUE" in bare.stderr
    typed = host(
        scene, "call", "read_csv_head", "file=sales.csv", "rows=many", "--config", scene["config"]
    )
    assert typed.returncode == 2
    assert "'rows=many': rows takes int, not 'many'" in typed.stderr


def test_call_with_label_loads_only_that_driver(scene: dict[str, Any]) -> None:
    done = host(
        scene, "call", "read_csv_head", "file=sales.csv", "--label", "csv", "--json",
        "--config", scene["config"],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    statuses = {d["label"]: d["status"] for d in document["load"]["drivers"]}
    assert statuses["csv"] == "mounted"
    assert statuses["files"] == "skipped"
    assert [t["label"] for t in document["load"]["tools"]] == ["csv"] * len(
        document["load"]["tools"]
    )


def test_version_says_what_runs_where_and_dash_h_is_help(scene: dict[str, Any]) -> None:
    venv: Venv = scene["venv"]
    done = host(scene, "version")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("mcs-host 0.")
    assert lines[1].startswith("Python 3.")
    assert str(venv.path) in lines[1]
    assert lines[3].startswith("installed at ")
    assert str(venv.path) in lines[3]
    short, long = host(scene, "call", "-h"), host(scene, "call", "--help")
    assert short.returncode == long.returncode == 0
    assert short.stdout == long.stdout
    assert "KEY=VALUE" in short.stdout
