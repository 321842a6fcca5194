"""The guard of tests/unit (in tests/conftest.py): a unit test that starts a process fails,
naming tests/system/ as the way out. Each probe is harmless should the guard be gone (it
would run ``true``), and then the test fails."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

import pytest

_PROBES: dict[str, Callable[[], object]] = {
    "subprocess.run": lambda: subprocess.run(["true"], check=False),
    "subprocess.Popen": lambda: subprocess.Popen(["true"]),
    "os.system": lambda: os.system("true"),  # noqa: S605 - a fixed command
    "os.posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], {}),
}


@pytest.mark.parametrize("start", list(_PROBES.values()), ids=list(_PROBES))
def test_a_unit_test_that_starts_a_process_fails_naming_tests_system(
    start: Callable[[], object],
) -> None:
    with pytest.raises(AssertionError, match="move this test to tests/system/"):
        start()
