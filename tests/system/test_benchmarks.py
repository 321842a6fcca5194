"""The benchmark scripts still run and report their budgets (tiny sizes; no timing is judged)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from distbuild import ROOT, Venv


def bench(script: str, *args: str, python: str | Path = sys.executable) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), str(ROOT / "scripts" / script), "--json", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    section: dict[str, Any] = json.loads(done.stdout)
    assert section["markdown"][0].startswith("|")
    return section


def test_discovery_finds_every_synthetic_driver_with_each_method() -> None:
    # the script checks each method's count against the drivers it planted
    section = bench(
        "bench_discovery.py", "--sizes", "10,30", "--repeat", "1", "--methods",
        "mcs-host,stdlib,walk,pluggy",
    )  # fmt: skip
    rows = section["markdown"][2:]
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| 10", "10"],
        ["| 30", "30"],
        ["| 30", "10"],
    ]
    assert [b["name"] for b in section["budgets"]] == [
        "discovery, N=30, 30 drivers, mcs-host / stdlib",
        "discovery, N=30, 10 drivers, mcs-host / stdlib",
    ]


def test_the_cli_benchmark_times_each_command_against_the_interpreter() -> None:
    # the script stops when a command exits otherwise than it should (load of nothing: 1)
    section = bench("bench_cli.py", "--repeat", "1")
    rows = [row.split(" | ") for row in section["markdown"][2:]]
    assert [row[0] for row in rows] == [
        "| `python -c pass`",
        "| stdlib `entry_points(group=)` scan",
        "| `mcs-host list --no-verify --json` (this environment)",
        "| `mcs-host --version`",
        "| `mcs-host version`",
        "| `mcs-host list`",
        "| `mcs-host verify`",
        "| `mcs-host load`",
    ]
    assert rows[0][2] == "1.00x"
    assert all(row[2].endswith("x") and float(row[2][:-1]) > 0 for row in rows)
    modules = {row[0].strip("| `"): int(row[3].rstrip(" |")) for row in rows}
    # each imports what it uses: the version nothing, verify what reading a configuration
    # needs, load what mounting needs too
    assert modules["python -c pass"] < modules["mcs-host --version"] < modules["mcs-host version"]
    assert modules["mcs-host version"] < modules["mcs-host verify"] < modules["mcs-host load"]
    assert [b["name"] for b in section["budgets"]] == [
        "`mcs-host list --no-verify --json` / stdlib scan, cold",
        "`mcs-host --version` / `python -c pass`",
        "`mcs-host verify` of nothing / `python -c pass`",
    ]


def test_the_scale_benchmark_verifies_and_mounts_every_driver_at_each_size() -> None:
    section = bench("bench_scale.py", "--sizes", "2,5", "--repeat", "1")
    assert [b["name"] for b in section["budgets"]] == [
        "per-driver verify cost at 5 drivers / at 2",
        "per-driver load cost at 5 drivers / at 2",
    ]


@pytest.mark.network
def test_the_wheels_benchmark_checks_the_numbers_the_driver_computes() -> None:
    section = bench("bench_wheels.py", "--repeat", "1")
    assert [b["name"] for b in section["budgets"]] == [
        "(load - verify) / plain import numpy, pandas",
        "verify / openssl over the digest's files",
    ]


@pytest.mark.network
def test_the_add_benchmark_installs_the_same_as_pip_and_checks_the_numbers() -> None:
    # the script exits non-zero when add and pip install bring different distributions, or
    # when the added driver's tool answers other numbers
    section = bench("bench_add.py", "--repeat", "1")
    rows = [row.split(" | ")[0] for row in section["markdown"][2:6]]
    assert rows == [
        "| `pip install acme-stats`",
        "| `mcs-host add acme-stats`: each verified, pinned, installed",
        rows[2],
        "| `mcs-host lock acme_stats` of the same, into a new registry",
    ]
    assert rows[2].startswith("| `mcs-host verify` of the driver and its closure (")
    assert "numpy" in section["markdown"][-1]
    assert "pandas" in section["markdown"][-1]


def test_the_digest_benchmark_reports_both_budgets() -> None:
    section = bench("bench_digest.py", "--large-mib", "1", "--small-files", "20", "--repeat", "1")
    assert {b["unit"] for b in section["budgets"]} == {"x", " µs"}
    # the sizes asked for are the sizes measured (the script refuses a tree that does not scan)
    assert "| large: 2 files, 1 MiB |" in section["markdown"][2]  # one module and METADATA
    assert "| small: 21 files of 1 KiB |" in section["markdown"][3]  # and METADATA


def test_the_orchestrator_benchmark_checks_every_answer() -> None:
    # the script asserts that each call is executed and each prose answer is not
    section = bench("bench_orchestrator.py", "--repeat", "1")
    names = [b["name"] for b in section["budgets"]]
    assert sum("(flat)" in name for name in names) == 4
    assert len(section["markdown"]) == 2 + 4 * 2


def test_the_csv_benchmark_finds_the_same_median_both_ways() -> None:
    # the script exits non-zero when the driver's median differs from the plain loop's
    section = bench("bench_csv.py", "--mib", "1", "--repeat", "1")
    assert [b["name"] for b in section["budgets"]] == [
        "summarize_column peak RSS / plain csv loop's"
    ]


def test_the_detection_benchmark_measures_every_case_at_every_size() -> None:
    section = bench("bench_detection.py", "--sizes", "0.01,0.1", "--repeat", "1")
    rows = section["markdown"][2:]
    assert len(rows) == 23  # prose and twenty-two adversarial shapes
    assert all(row.count(" ms |") == 2 for row in rows)
    assert [b["unit"] for b in section["budgets"]] == [" ms", "x"]


@pytest.mark.venv
def test_the_mcp_benchmark_checks_its_answer_and_reports_each_path(
    tmp_path: Path, wheelhouse: Path, uv_cache: Path
) -> None:
    pytest.importorskip("mcp")
    # as scripts/bench.py runs it: the bundled drivers installed as a user installs them
    venv = Venv.create(tmp_path / "venv")
    venv.uv_install(
        "mcs-host[mcp]", "mcs-host-csv", "mcs-host-files", wheelhouse=wheelhouse, cache=uv_cache
    )
    section = bench("bench_mcp.py", "--calls", "5", "--repeat", "1", python=venv.python)
    rows = [row.split(" | ")[0] for row in section["markdown"][2:]]
    assert rows == [
        "| in process (`process_llm_response`)",
        "| MCP in memory (`mcp_server` + the SDK's client)",
        "| MCP over stdio (`MCPToolDriver` on a child process)",
        "",
        "| the files driver's `stat`",
        "|---|---|---|",
        "| in process (`load_drivers`, `execute_tool`)",
        '| isolated (`isolation = "process"`)',
        "| `mcs-host serve` (the SDK's client, stdio)",
    ]


def test_the_frameworks_benchmark_calls_each_adapter_and_checks_each_result() -> None:
    # the script asserts each adapter's result is the tool's own answer
    section = bench("bench_frameworks.py", "--calls", "20", "--repeat", "1", "--tools", "lookup")
    names = [b["name"] for b in section["budgets"]]
    assert [name.split(",")[0] for name in names] == [
        "llm",
        "LangChain",
        "PydanticAI",
        "OpenAI Agents SDK",
        "LangChain",
    ]
    rows = [line for line in section["markdown"] if "µs" in line]
    assert len(rows) == 7
    assert all(row.startswith("| in-process lookup |") for row in rows)
