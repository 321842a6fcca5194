"""The streaming benchmark (scripts/bench_streaming.py) streams each response to its call,
run in a process of its own."""

from __future__ import annotations

import json
import subprocess
import sys

from distbuild import ROOT


def test_the_streaming_benchmark_streams_each_response_to_its_call() -> None:
    # the script checks that each stream ends in the call and never shows its markup
    done = subprocess.run(
        [sys.executable, "scripts/bench_streaming.py", "--json", "--mb", "0.02", "--repeat", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    section = json.loads(done.stdout)
    assert len(section["markdown"]) == 2 + 2 * 2
    assert [b["name"].partition(",")[0].partition(":")[0] for b in section["budgets"]] == [
        "plain prose",
        "plain prose",
        "prose full of brackets",
        "prose full of brackets",
    ]
