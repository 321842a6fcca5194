"""The CSV ToolDriver against real CSV files."""

from __future__ import annotations

import json
import statistics
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from mcs_host_csv import CsvToolDriver

from mcs_host import PathEscapeError, ToolArgumentError, UnknownToolError, is_semver

SALES = """\
region,product,units,price
EU,apple,10,1.5
US,pear,,2.0
EU,Apple pie,3,12.25
APAC,banana,n/a,0.5
us,plum,7,3.0
EU,cherry,100,9.75
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "data"
    (base / "archive").mkdir(parents=True)
    (base / "sales.csv").write_text(SALES)
    (base / "semicolon.csv").write_text("name;score\nann;7\nbob;9\n")
    (base / "archive" / "old.tsv").write_text("a\tb\n1\t2\n")
    (base / "bom.csv").write_bytes("\ufeffid,value\n1,x\n".encode())
    (base / "notes.txt").write_text("not a csv")
    (base / ".hidden.csv").write_text("a\n1\n")
    outside = tmp_path / "outside.csv"
    outside.write_text("secret\n1\n")
    (base / "leak.csv").symlink_to(outside)
    (base / "archive" / "current.csv").symlink_to("../semicolon.csv")
    return base


@pytest.fixture
def driver(root: Path) -> CsvToolDriver:
    return CsvToolDriver(root)


def call(driver: CsvToolDriver, tool: str, **arguments: Any) -> dict[str, Any]:
    result = driver.execute_tool(tool, arguments)
    json.dumps(result)
    return result


def test_meta_and_entry_point() -> None:
    assert is_semver(CsvToolDriver.meta.version)
    assert CsvToolDriver.meta.version == metadata.version("mcs-host-csv")
    assert CsvToolDriver.meta.trust is not None
    (entry,) = [e for e in metadata.entry_points(group="mcs.drivers") if e.name == "csv"]
    assert entry.load() is CsvToolDriver


def test_every_parameter_has_a_json_schema(driver: CsvToolDriver) -> None:
    tools = {tool.name: tool for tool in driver.list_tools()}
    assert sorted(tools) == [
        "filter_csv_rows",
        "list_csv_files",
        "read_csv_head",
        "summarize_column",
    ]
    for tool in tools.values():
        for parameter in tool.parameters:
            assert parameter.schema is not None, (tool.name, parameter.name)
            assert "type" in parameter.schema, (tool.name, parameter.name)
    operator = tools["filter_csv_rows"].input_schema()["properties"]["operator"]
    assert operator["enum"] == [
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "contains",
        "startswith",
        "endswith",
    ]
    assert tools["filter_csv_rows"].input_schema()["required"] == ["file", "column", "value"]


def test_list_csv_files(driver: CsvToolDriver) -> None:
    listed = call(driver, "list_csv_files")
    # leak.csv links out of the root: not listed; archive/current.csv links inside it
    assert [f["file"] for f in listed["files"]] == [
        "bom.csv",
        "sales.csv",
        "semicolon.csv",
        "archive/current.csv",
        "archive/old.tsv",
    ]
    assert listed["files"][1]["size"] == len(SALES)
    flat = call(driver, "list_csv_files", recursive=False)
    assert "archive/old.tsv" not in [f["file"] for f in flat["files"]]
    assert call(driver, "list_csv_files", path="archive")["files"] == [
        {"file": "archive/current.csv", "size": 23},
        {"file": "archive/old.tsv", "size": 8},
    ]
    assert call(driver, "list_csv_files", limit=1)["truncated"] is True


def test_read_csv_head_detects_delimiters_and_bom(driver: CsvToolDriver) -> None:
    head = call(driver, "read_csv_head", file="sales.csv", rows=2)
    assert head["columns"] == ["region", "product", "units", "price"]
    assert head["rows"] == [
        {"region": "EU", "product": "apple", "units": "10", "price": "1.5"},
        {"region": "US", "product": "pear", "units": "", "price": "2.0"},
    ]
    assert call(driver, "read_csv_head", file="semicolon.csv")["rows"] == [
        {"name": "ann", "score": "7"},
        {"name": "bob", "score": "9"},
    ]
    assert call(driver, "read_csv_head", file="archive/old.tsv")["columns"] == ["a", "b"]
    assert call(driver, "read_csv_head", file="bom.csv")["columns"] == ["id", "value"]


def rows(result: dict[str, Any], column: str = "product") -> list[str]:
    return [row[column] for row in result["rows"]]


def test_filter_compares_numbers_as_numbers(driver: CsvToolDriver) -> None:
    # as text "100" < "20"; as numbers it is not
    assert rows(
        call(driver, "filter_csv_rows", file="sales.csv", column="units", operator="gt", value="20")
    ) == ["cherry"]
    assert rows(
        call(driver, "filter_csv_rows", file="sales.csv", column="units", operator="le", value="7")
    ) == ["Apple pie", "plum"]
    assert rows(
        call(driver, "filter_csv_rows", file="sales.csv", column="price", operator="eq", value="3")
    ) == ["plum"]
    # cells that are not numbers match only "ne"
    assert rows(
        call(driver, "filter_csv_rows", file="sales.csv", column="units", operator="ne", value="10")
    ) == [
        "pear",
        "Apple pie",
        "banana",
        "plum",
        "cherry",
    ]


def test_filter_compares_text(driver: CsvToolDriver) -> None:
    assert rows(call(driver, "filter_csv_rows", file="sales.csv", column="region", value="US")) == [
        "pear"
    ]
    assert rows(
        call(
            driver,
            "filter_csv_rows",
            file="sales.csv",
            column="region",
            value="US",
            case_sensitive=False,
        )
    ) == ["pear", "plum"]
    assert rows(
        call(
            driver,
            "filter_csv_rows",
            file="sales.csv",
            column="product",
            operator="contains",
            value="APPLE",
            case_sensitive=False,
        )
    ) == ["apple", "Apple pie"]
    assert rows(
        call(
            driver,
            "filter_csv_rows",
            file="sales.csv",
            column="product",
            operator="startswith",
            value="b",
        )
    ) == ["banana"]
    limited = call(
        driver, "filter_csv_rows", file="sales.csv", column="region", value="EU", limit=2
    )
    assert rows(limited) == ["apple", "Apple pie"]
    assert limited["truncated"] is True
    assert limited["rows_scanned"] == 6


def test_summarize_column(driver: CsvToolDriver) -> None:
    summary = call(driver, "summarize_column", file="sales.csv", column="units")
    numbers = [10.0, 3.0, 7.0, 100.0]
    assert summary == {
        "file": "sales.csv",
        "column": "units",
        "count": 4,
        "missing": 1,
        "non_numeric": 1,
        "non_numeric_examples": ["n/a"],
        "sum": 120.0,
        "min": 3.0,
        "max": 100.0,
        "mean": 30.0,
        "median": 8.5,
        "stdev": statistics.stdev(numbers),
    }
    with pytest.raises(ToolArgumentError, match="column 'region' holds no numbers"):
        call(driver, "summarize_column", file="sales.csv", column="region")


@pytest.mark.parametrize("seed", range(40))
def test_the_streamed_summary_is_exact_when_the_median_needs_several_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """With tiny bounds (8 value ranges a pass, 20 numbers sorted at most) the median is found
    by narrowing passes over the file, and still equals statistics.median; the sum is exact."""
    import math
    import random

    import mcs_host_csv.driver as csv_driver

    monkeypatch.setattr(csv_driver, "_BUCKETS", 8)
    monkeypatch.setattr(csv_driver, "_EXACT_LIMIT", 20)
    rng = random.Random(seed)  # noqa: S311 - test data, not a secret
    count = rng.randint(1, 300)
    makers = [
        lambda: rng.uniform(-1e6, 1e6),
        lambda: float(rng.randint(0, 3)),
        lambda: 1e16 if rng.random() < 0.5 else 1.0,  # a naive sum loses the ones
    ]
    numbers = [makers[seed % 3]() for _ in range(count)]
    rows = "".join(f"{i},{n!r}\n" for i, n in enumerate(numbers))
    (tmp_path / "n.csv").write_text("id,value\n" + rows + "x,\ny,n/a\n")
    summary = call(CsvToolDriver(tmp_path), "summarize_column", file="n.csv", column="value")
    assert summary["median"] == statistics.median(numbers)
    assert summary["sum"] == math.fsum(numbers)
    assert (summary["count"], summary["missing"], summary["non_numeric"]) == (count, 1, 1)
    assert (summary["min"], summary["max"]) == (min(numbers), max(numbers))
    assert math.isclose(summary["mean"], statistics.fmean(numbers), rel_tol=1e-12)


def test_errors_name_the_argument_at_fault(root: Path, driver: CsvToolDriver) -> None:
    with pytest.raises(
        ToolArgumentError,
        match="argument 'column': no column 'qty'; the columns are region, product, units, price",
    ):
        call(driver, "filter_csv_rows", file="sales.csv", column="qty", value="1")
    with pytest.raises(ToolArgumentError, match=r"argument 'file': 'missing\.csv' does not exist"):
        call(driver, "read_csv_head", file="missing.csv")
    with pytest.raises(ToolArgumentError, match="argument 'operator': Input should be 'eq'"):
        call(
            driver, "filter_csv_rows", file="sales.csv", column="units", operator="like", value="1"
        )
    (root / "latin.csv").write_bytes("name\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(ToolArgumentError, match=r"'latin\.csv' is not UTF-8 text"):
        call(driver, "read_csv_head", file="latin.csv")
    small = CsvToolDriver(root, max_file_bytes=10)
    with pytest.raises(ToolArgumentError, match=f"'sales.csv' has {len(SALES)} bytes, more than"):
        call(small, "summarize_column", file="sales.csv", column="units")
    with pytest.raises(UnknownToolError):
        call(driver, "drop_table")


def test_files_outside_the_root_are_refused(driver: CsvToolDriver) -> None:
    with pytest.raises(PathEscapeError, match=r"symlink 'leak\.csv' points to"):
        call(driver, "read_csv_head", file="leak.csv")
    with pytest.raises(PathEscapeError):
        call(driver, "read_csv_head", file="../outside.csv")
