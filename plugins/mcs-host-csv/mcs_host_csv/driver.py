"""The CSV ToolDriver: list CSV files under a root, show their head, filter rows, summarise."""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import math
import operator
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcs_host import (
    MCSToolDriver,
    PathEscapeError,
    Root,
    Tool,
    ToolAnnotations,
    ToolArgumentError,
    ToolError,
    UnknownToolError,
)
from mcs_host.kit import manifest_meta, parse_arguments, tool_from_model

META = manifest_meta(__package__, "CsvToolDriver")
"""The driver's meta, from the mcs-driver.json manifest the package ships."""
__version__ = META.version

DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024
_SNIFF_CHARS = 64 * 1024
_BUCKETS = 4096
"""Value ranges counted per pass while the median is narrowed down."""
_EXACT_LIMIT = 65536
"""Numbers kept in memory at once: the last pass sorts at most this many."""
_CHUNK = 65536
"""Numbers summed at once: the sum is exact within a chunk, and the chunk sums are added
exactly too (math.fsum), so it is exact up to one rounding per chunk."""
_DELIMITERS = ",;\t|"

Operator = Literal["eq", "ne", "lt", "le", "gt", "ge", "contains", "startswith", "endswith"]


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListCsvFilesArgs(_Args):
    path: str = Field(".", description="Directory to look in, relative to the root.")
    recursive: bool = Field(True, description="Also look in subdirectories.")
    limit: int = Field(200, ge=1, le=10_000, description="Most files to return.")


class ReadCsvHeadArgs(_Args):
    file: str = Field(description="CSV file, relative to the root.")
    rows: int = Field(5, ge=0, le=1_000, description="How many data rows to return.")


class FilterCsvRowsArgs(_Args):
    file: str = Field(description="CSV file, relative to the root.")
    column: str = Field(description="Column to test.")
    operator: Operator = Field(
        "eq",
        description=(
            "Comparison. eq, ne, lt, le, gt and ge compare numbers when both sides are "
            "numbers and text otherwise; contains, startswith and endswith compare text."
        ),
    )
    value: str = Field(description="Value to compare the column with.")
    case_sensitive: bool = Field(True, description="Compare text case-sensitively.")
    limit: int = Field(50, ge=1, le=10_000, description="Most matching rows to return.")


class SummarizeColumnArgs(_Args):
    file: str = Field(description="CSV file, relative to the root.")
    column: str = Field(description="Numeric column to summarise.")


_READS = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
"""What every tool declares: it only reads CSV files under the root, a closed world."""

_TOOLS: dict[str, tuple[type[_Args], Tool]] = {
    "list_csv_files": (
        ListCsvFilesArgs,
        tool_from_model(
            "list_csv_files",
            ListCsvFilesArgs,
            title="List CSV files",
            description="List the .csv and .tsv files under the root with their sizes.",
            annotations=_READS,
        ),
    ),
    "read_csv_head": (
        ReadCsvHeadArgs,
        tool_from_model(
            "read_csv_head",
            ReadCsvHeadArgs,
            title="Read the first rows",
            description="The column names and the first rows of a CSV file, as records.",
            annotations=_READS,
        ),
    ),
    "filter_csv_rows": (
        FilterCsvRowsArgs,
        tool_from_model(
            "filter_csv_rows",
            FilterCsvRowsArgs,
            title="Filter rows",
            description="The rows of a CSV file whose column satisfies a comparison.",
            annotations=_READS,
        ),
    ),
    "summarize_column": (
        SummarizeColumnArgs,
        tool_from_model(
            "summarize_column",
            SummarizeColumnArgs,
            title="Summarise a numeric column",
            description=(
                "Count, missing and non-numeric cells, sum, min, max, mean, median and "
                "standard deviation of a column."
            ),
            annotations=_READS,
        ),
    ),
}


class CsvToolDriver(MCSToolDriver):
    """Read-only CSV analysis over the files under ``root``.

    Files larger than ``max_file_bytes`` are refused. The delimiter (``,``, ``;``, tab or
    ``|``) is detected from the start of each file; a UTF-8 byte order mark is ignored.
    """

    meta = META

    def __init__(
        self, root: str | os.PathLike[str], *, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    ) -> None:
        if max_file_bytes < 1:
            raise ValueError("max_file_bytes must be positive")
        self.root = Root(root)
        self.max_file_bytes = max_file_bytes
        self._handlers: dict[str, Callable[[Any], dict[str, Any]]] = {
            "list_csv_files": self._list_csv_files,
            "read_csv_head": self._read_csv_head,
            "filter_csv_rows": self._filter_csv_rows,
            "summarize_column": self._summarize_column,
        }

    def list_tools(self) -> list[Tool]:
        return [tool for _, tool in _TOOLS.values()]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool_name not in _TOOLS:
            raise UnknownToolError(tool_name, _TOOLS)
        model, _ = _TOOLS[tool_name]
        args = parse_arguments(tool_name, model, arguments)
        where = "file" if hasattr(args, "file") else "path"
        shown = getattr(args, where)
        try:
            return self._handlers[tool_name](args)
        except ToolError:
            raise
        except FileNotFoundError:
            raise ToolArgumentError(tool_name, where, f"{shown!r} does not exist") from None
        except NotADirectoryError:
            raise ToolArgumentError(tool_name, where, f"{shown!r} is not a directory") from None
        except IsADirectoryError:
            raise ToolArgumentError(tool_name, where, f"{shown!r} is not a file") from None
        except UnicodeDecodeError as exc:
            raise ToolArgumentError(
                tool_name, where, f"{shown!r} is not UTF-8 text (byte {exc.start})"
            ) from None
        except csv.Error as exc:
            raise ToolArgumentError(
                tool_name, where, f"{shown!r} is not valid CSV: {exc}"
            ) from None
        except OSError as exc:
            raise ToolError(
                f"tool {tool_name!r}, {where} {shown!r}: {exc.strerror or exc}"
            ) from None

    # -- tools -----------------------------------------------------------------

    def _list_csv_files(self, args: ListCsvFilesArgs) -> dict[str, Any]:
        files: list[dict[str, Any]] = []
        truncated = False
        for rel, size in self._csv_files(args.path, args.recursive):
            if len(files) == args.limit:
                truncated = True
                break
            files.append({"file": rel, "size": size})
        return {"files": files, "truncated": truncated}

    def _read_csv_head(self, args: ReadCsvHeadArgs) -> dict[str, Any]:
        with self._rows("read_csv_head", args.file) as (columns, rows):
            head = list(itertools.islice(rows, args.rows))
        return {"file": args.file, "columns": columns, "rows": head}

    def _filter_csv_rows(self, args: FilterCsvRowsArgs) -> dict[str, Any]:
        test = _comparison(args.operator, args.value, args.case_sensitive)
        matched: list[dict[str, str]] = []
        scanned = 0
        truncated = False
        with self._rows("filter_csv_rows", args.file) as (columns, rows):
            _check_column("filter_csv_rows", args.column, columns)
            for row in rows:
                scanned += 1
                if test(row.get(args.column) or ""):
                    if len(matched) == args.limit:
                        truncated = True
                        break
                    matched.append(row)
        return {
            "file": args.file,
            "columns": columns,
            "rows": matched,
            "truncated": truncated,
            "rows_scanned": scanned,
        }

    def _summarize_column(self, args: SummarizeColumnArgs) -> dict[str, Any]:
        """One streaming pass for the count, sum, extremes, mean and deviation, taken over
        chunks of _CHUNK numbers and combined; then passes that narrow down the median's
        value. Memory stays bounded by _CHUNK, _BUCKETS and _EXACT_LIMIT, whatever the file's
        size."""
        moments = _Moments()
        chunk: list[float] = []
        with self._cells("summarize_column", args.file, args.column) as cells:
            for cell in cells:
                text = cell.strip()
                if not text:
                    moments.missing += 1
                    continue
                value = _number(text)
                if value is None:
                    moments.text(text)
                    continue
                chunk.append(value)
                if len(chunk) == _CHUNK:
                    moments.add(chunk)
                    chunk = []
        moments.add(chunk)
        if not moments.count:
            raise ToolArgumentError(
                "summarize_column", "column", f"column {args.column!r} holds no numbers"
            )
        return {
            "file": args.file,
            "column": args.column,
            "count": moments.count,
            "missing": moments.missing,
            "non_numeric": moments.non_numeric,
            "non_numeric_examples": moments.examples,
            "sum": moments.total(),
            "min": moments.low,
            "max": moments.high,
            "mean": moments.mean,
            "median": self._median(args, moments),
            "stdev": moments.stdev(),
        }

    def _median(self, args: SummarizeColumnArgs, moments: _Moments) -> float:
        """The exact median of the column's numbers: the middle one, or the mean of the two
        middle ones."""
        lower = (moments.count - 1) // 2
        second: float | None
        if moments.distinct is not None:  # few distinct numbers: no second pass
            ordered = sorted(moments.distinct.items())
            first, second = _nth_counted(ordered, lower), _nth_counted(ordered, lower + 1)
        else:
            first, second = self._nth(args, lower, moments.low, moments.high)
        if moments.count % 2:
            return first
        if second is None:  # the next one lies in another range: one more search
            second = self._nth(args, lower + 1, moments.low, moments.high)[0]
        return first if first == second else (first + second) / 2

    def _nth(
        self, args: SummarizeColumnArgs, n: int, low: float, high: float
    ) -> tuple[float, float | None]:
        """The ``n``-th smallest (from 0) of the column's numbers, all of which lie in
        ``[low, high]``, and the next one when it is found in the same pass: each pass
        counts them in _BUCKETS ranges and keeps the one that holds the ``n``-th, until at
        most _EXACT_LIMIT are left to sort."""
        while low < high:
            span = high / 2 - low / 2  # halved: no overflow between -1e308 and 1e308
            counts, mins, maxs = [0] * _BUCKETS, [math.inf] * _BUCKETS, [-math.inf] * _BUCKETS
            inside: list[float] = []
            at_low = 0
            scale = _BUCKETS / span
            last = _BUCKETS - 1
            with self._cells("summarize_column", args.file, args.column) as cells:
                for cell in cells:
                    value = _number(cell.strip())
                    if value is None or not low <= value <= high:
                        continue
                    at_low += value == low
                    if len(inside) <= _EXACT_LIMIT:
                        inside.append(value)
                    i = min(int((value / 2 - low / 2) * scale), last)
                    counts[i] += 1
                    mins[i] = min(mins[i], value)
                    maxs[i] = max(maxs[i], value)
            if len(inside) <= _EXACT_LIMIT:
                inside.sort()
                return inside[n], inside[n + 1] if n + 1 < len(inside) else None
            i = 0
            while n >= counts[i]:
                n -= counts[i]
                i += 1
            if mins[i] == maxs[i]:  # the range holds one value: no further pass is needed
                if n + 1 < counts[i]:
                    return mins[i], mins[i]
                following = next((mins[j] for j in range(i + 1, _BUCKETS) if counts[j]), None)
                return mins[i], following
            if (mins[i], maxs[i]) == (low, high):  # no progress: two neighbouring floats
                return (low if n < at_low else high), None
            low, high = mins[i], maxs[i]
        return low, None

    # -- helpers ---------------------------------------------------------------

    def _csv_files(self, path: str, recursive: bool) -> Iterator[tuple[str, int]]:
        base = self.root.relative(self.root.resolve(path))
        with self.root.open_dir(path) as fd:
            for top, dirs, files, top_fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if recursive else []
                for name in sorted(files):
                    if name.startswith(".") or not name.lower().endswith((".csv", ".tsv")):
                        continue
                    rel = os.path.normpath(os.path.join(base, top, name)).replace(os.sep, "/")
                    info = os.stat(name, dir_fd=top_fd, follow_symlinks=False)
                    if stat.S_ISLNK(info.st_mode):  # listed only if it stays inside
                        try:
                            info = os.stat(self.root.resolve(rel))
                        except (PathEscapeError, OSError):
                            continue
                    if stat.S_ISREG(info.st_mode):
                        yield rel, info.st_size

    @contextlib.contextmanager
    def _rows(self, tool: str, file: str) -> Iterator[tuple[list[str], Iterator[dict[str, str]]]]:
        """The column names and a stream of row records of ``file``."""
        with self._records(tool, file) as (columns, reader):
            yield columns, (dict(zip(columns, row, strict=False)) for row in reader if row)

    @contextlib.contextmanager
    def _records(self, tool: str, file: str) -> Iterator[tuple[list[str], Iterator[list[str]]]]:
        """The column names and the CSV reader of ``file``'s remaining rows."""
        with self.root.open_file(file) as raw:
            size = os.fstat(raw.fileno()).st_size
            if size > self.max_file_bytes:
                raise ToolArgumentError(
                    tool,
                    "file",
                    f"{file!r} has {size} bytes, more than this driver's limit of "
                    f"{self.max_file_bytes}",
                )
            text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
            sample = text.read(_SNIFF_CHARS)
            text.seek(0)
            try:
                dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(
                    sample, delimiters=_DELIMITERS
                )
            except csv.Error:
                dialect = csv.excel
            reader = csv.reader(text, dialect)
            header = next(reader, None)
            yield [name.strip() for name in header or ()], reader

    @contextlib.contextmanager
    def _cells(self, tool: str, file: str, column: str) -> Iterator[Iterator[str]]:
        """The cells of ``column`` in ``file``, one row at a time (no row dict is built)."""
        with self._records(tool, file) as (columns, reader):
            _check_column(tool, column, columns)
            index = columns.index(column)
            yield (row[index] if index < len(row) else "" for row in reader if row)


class _Moments:
    """Count, sum, extremes, mean and variance of a column's numbers, added a chunk at a
    time (Chan's way of combining means and squared deviations); missing and non-numeric
    cells counted, the first five non-numeric shown."""

    __slots__ = (
        "_square",
        "_sums",
        "count",
        "distinct",
        "examples",
        "high",
        "low",
        "mean",
        "missing",
        "non_numeric",
    )

    def __init__(self) -> None:
        self.count = self.missing = self.non_numeric = 0
        self.mean = self._square = 0.0
        self.low, self.high = math.inf, -math.inf
        self.examples: list[str] = []
        self._sums: list[float] = []
        self.distinct: Counter[float] | None = Counter()
        """Each number and how often it occurs, while there are at most _EXACT_LIMIT."""

    def text(self, cell: str) -> None:
        self.non_numeric += 1
        if len(self.examples) < 5:
            self.examples.append(cell)

    def add(self, chunk: list[float]) -> None:
        if not chunk:
            return
        size = len(chunk)
        total = _fsum(chunk)
        mean = total / size
        deviations = [x - mean for x in chunk]
        square = math.fsum(map(operator.mul, deviations, deviations))
        count = self.count + size
        delta = mean - self.mean
        self.mean += delta * size / count
        self._square += square + delta * delta * self.count * size / count
        self.count = count
        self.low, self.high = min(self.low, *chunk), max(self.high, *chunk)
        self._sums.append(total)
        if self.distinct is not None:
            self.distinct.update(chunk)
            if len(self.distinct) > _EXACT_LIMIT:
                self.distinct = None  # too many: the median is searched for in passes

    def total(self) -> float:
        return _fsum(self._sums)

    def stdev(self) -> float:
        return math.sqrt(self._square / (self.count - 1)) if self.count > 1 else 0.0


def _nth_counted(ordered: list[tuple[float, int]], n: int) -> float:
    """The ``n``-th smallest (from 0) of numbers given as sorted ``(value, count)`` pairs
    (the largest when there are fewer)."""
    for value, count in ordered:
        if n < count:
            return value
        n -= count
    return ordered[-1][0]


def _fsum(values: list[float]) -> float:
    """``math.fsum``, or the sign of infinity when the sum is beyond the largest float."""
    try:
        return math.fsum(values)
    except OverflowError:
        return sum(values)


def _check_column(tool: str, column: str, columns: list[str]) -> None:
    if column not in columns:
        raise ToolArgumentError(
            tool, "column", f"no column {column!r}; the columns are {', '.join(columns)}"
        )


def _number(text: str) -> float | None:
    """``text`` as a finite number, or ``None``."""
    if "_" in text:  # float() reads "1_000"; a CSV cell with it is text
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


_ORDERINGS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}
_TEXT_TESTS: dict[str, Callable[[str, str], bool]] = {
    "contains": lambda cell, wanted: wanted in cell,
    "startswith": str.startswith,
    "endswith": str.endswith,
}


def _comparison(name: str, value: str, case_sensitive: bool) -> Callable[[str], bool]:
    """A test of one cell against ``value``.

    With a numeric ``value``, the orderings compare numbers and a cell that is not a number
    matches only ``ne``. Otherwise they compare text.
    """
    fold: Callable[[str], str] = (lambda s: s) if case_sensitive else str.casefold
    wanted = fold(value)
    if name in _TEXT_TESTS:
        text_test = _TEXT_TESTS[name]
        return lambda cell: text_test(fold(cell), wanted)
    compare = _ORDERINGS[name]
    wanted_number = _number(value.strip())
    if wanted_number is None:
        return lambda cell: compare(fold(cell), wanted)

    def numeric(cell: str) -> bool:
        number = _number(cell.strip())
        return compare(number, wanted_number) if number is not None else name == "ne"

    return numeric
