"""The README's examples run as written."""

from __future__ import annotations

import re
from typing import Any

import pytest
from distbuild import ROOT

from mcs_host import MCSToolDriver, ToolArgumentError

README = (ROOT / "README.md").read_text("utf-8")


def python_blocks(section: str) -> list[str]:
    body = README.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, flags=re.DOTALL)


def test_the_driver_example_works() -> None:
    (source,) = [b for b in python_blocks("Writing a driver") if "class WeatherToolDriver" in b]
    namespace: dict[str, Any] = {}
    exec(compile(source, "README.md", "exec"), namespace)  # noqa: S102
    driver = namespace["WeatherToolDriver"]()
    assert isinstance(driver, MCSToolDriver)
    (tool,) = driver.list_tools()
    assert tool.input_schema()["required"] == ["city"]
    assert driver.execute_tool("forecast", {"city": "Oslo", "days": 2})["days"] == 2
    with pytest.raises(ToolArgumentError, match="argument 'days'"):
        driver.execute_tool("forecast", {"city": "Oslo", "days": 9})


def test_the_discovery_example_runs() -> None:
    (source,) = python_blocks("Python API")
    exec(compile(source, "README.md", "exec"), {})  # noqa: S102
