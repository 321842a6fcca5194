"""The documentation site: built in strict mode, its generated references current, and every
example of its tutorials and how-to guides run as a newcomer runs it (CONTRIBUTING.md,
"Writing documentation", is the contract this module implements)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from distbuild import ROOT

DOCS = ROOT / "docs"
RUN = sorted([*DOCS.glob("tutorials/*.md"), *DOCS.glob("how-to/*.md")])
"""The pages whose examples run."""

_FENCE = re.compile(r"^([ \t]*)(`{3,})([\w+-]*)[^\n]*\n(.*?)^\1\2[ \t]*$", re.DOTALL | re.MULTILINE)
"""A fenced block, indented too (in a list item): its indent, fence, language and text."""
_COMMENT = re.compile(r"<!--\s*((?:(?!<!--).)*?)\s*-->\s*\Z", re.DOTALL)
"""The last HTML comment before a block, when nothing but blanks follows it."""
_EXITS = re.compile(r"\s+#\s*exits\s+(\d+)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page, with the HTML comment right before it (if any)."""

    language: str
    text: str
    line: int
    directive: str


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` in order."""
    source = page.read_text("utf-8")
    found = []
    for match in _FENCE.finditer(source):
        before = source[: match.start()].rstrip()
        comment = _COMMENT.search(before)
        directive = comment.group(1) if comment else ""
        line = source.count("\n", 0, match.start()) + 1
        indent = len(match.group(1))
        text = "".join(row[indent:] for row in match.group(4).splitlines(keepends=True))
        found.append(Block(match.group(3).lower(), text, line, directive))
    return found


def transcript(text: str) -> list[tuple[str, list[str], int]]:
    """``(command, shown output, expected exit status)`` of each ``$ `` line of a console
    block, a line ending in ``\\`` continued by the next."""
    commands: list[tuple[str, list[str], int]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.startswith("$ "):
            if commands:
                commands[-1][1].append(line)
            continue
        command = line[2:]
        while command.endswith("\\") and index < len(lines):
            command += "\n" + lines[index]  # bash reads the backslash-newline as one line
            index += 1
        exits = _EXITS.search(command)
        status = int(exits.group(1)) if exits else 0
        commands.append((command, [], status))
    return commands


def _squeeze(line: str) -> str:
    return " ".join(line.split())


def shown_in(shown: list[str], output: str) -> str | None:
    """Why ``shown`` (a transcript's lines) is not in ``output``, or ``None`` when each line
    is there in order; ``...`` stands for any text, a line of only ``...`` for lines left
    out."""
    actual = [_squeeze(line) for line in output.splitlines()]
    at = 0
    for want in (_squeeze(line) for line in shown):
        if not want or want == "...":
            continue
        pieces = want.split("...")
        while at < len(actual) and not _holds(actual[at], pieces):
            at += 1
        if at == len(actual):
            return f"not in the output (in order): {want!r}"
        at += 1
    return None


def _holds(line: str, pieces: list[str]) -> bool:
    if len(pieces) == 1:
        return pieces[0] == line
    if not (line.startswith(pieces[0]) and line.endswith(pieces[-1])):
        return False
    at = len(pieces[0])
    for piece in pieces[1:-1]:
        found = line.find(piece, at)
        if found == -1:
            return False
        at = found + len(piece)
    return at <= len(line) - len(pieces[-1])


# -- the site ----------------------------------------------------------------------------------


def test_the_site_builds_with_no_warning_and_every_reference_resolved(tmp_path: Path) -> None:
    strict = ["-W", "--keep-going", "-n", "-q", "-b", "html"]
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", *strict, str(DOCS), str(tmp_path / "html")],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    assert (tmp_path / "html" / "index.html").is_file()


# -- the examples ------------------------------------------------------------------------------


def _extras(page: Path) -> list[str]:
    """The extras of mcs-host that ``page`` tells its reader to install (``pip install
    ".[langchain]"`` in a clone, or ``"mcs-host[langchain]"``), besides mcp and attest."""
    told = re.findall(r"pip install [\"']?(?:mcs-host|\.)\[([\w,-]+)\]", page.read_text("utf-8"))
    return sorted({e for extras in told for e in extras.split(",")} - {"mcp", "attest"})


def _newcomer_venv(venv: Path, wheelhouse: Path, cache: Path, extras: list[str]) -> None:
    """A venv with pip, mcs-host[mcp,attest] (and ``extras``) and the two bundled drivers
    installed from wheels, as scripts/demo.py installs them (pip from the wheel ``ensurepip``
    bundles, copied in by uv: ``ensurepip`` takes three seconds to install the same wheel)."""
    command = [sys.executable, "-m", "venv", "--without-pip", str(venv)]
    subprocess.run(command, check=True, capture_output=True)
    command = [
        sys.executable,
        "-m",
        "uv",
        "pip",
        "install",
        "--python",
        str(venv / "bin" / "python"),
    ]
    command += ["--offline", "--no-index", "--find-links", str(wheelhouse)]
    command += [f"mcs-host[{','.join(['mcp', 'attest', *extras])}]"]
    command += ["mcs-host-files", "mcs-host-csv", "pip"]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(UV_LINK_MODE="copy", UV_CACHE_DIR=str(cache))
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _environment(venv: Path, home: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MCS_HOST_", "XDG_", "PYTHON", "PIP_", "UV_"))
        and k not in ("VIRTUAL_ENV", "COLUMNS")
    }
    env.update(
        HOME=str(home),
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        NO_COLOR="1",
        COLUMNS="200",
    )
    return env


def _workdir(path: Path) -> Path:
    """An empty directory with copies of the clone's registry.json, plugins/ and
    scripts/demo/."""
    path.mkdir()
    shutil.copy2(ROOT / "registry.json", path / "registry.json")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    shutil.copytree(ROOT / "plugins", path / "plugins", ignore=ignore)
    shutil.copytree(ROOT / "scripts" / "demo", path / "scripts" / "demo", ignore=ignore)
    return path


def _run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
        timeout=600,
    )


def _marked(page: Path) -> Any:
    """A page that installs from the package index needs the network (``-m "not network"``
    leaves it out offline); mcs-host's own extras come from the wheelhouse."""
    online = re.search(r"pip install (?![\"']?\.|-e |/|~|\"mcs-host\[)", page.read_text("utf-8"))
    marks = [pytest.mark.network] if online else []
    return pytest.param(page, marks=marks, id=str(page.relative_to(DOCS)))


@pytest.mark.parametrize("page", [_marked(page) for page in RUN])
def test_every_example_of_the_page_runs_as_written(
    page: Path, wheelhouse: Path, uv_cache: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    _newcomer_venv(venv, wheelhouse, uv_cache, _extras(page))
    home = tmp_path / "home"
    home.mkdir()
    work = _workdir(tmp_path / "work")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    env = _environment(venv, home)
    where = page.relative_to(ROOT)
    last_output: str | None = None
    for number, block in enumerate(blocks(page)):
        at = f"{where}:{block.line}"
        directive = block.directive
        if directive.startswith("not run"):
            reason = directive.partition(":")[2].strip()
            assert reason, f"{at}: a block not run says why (<!-- not run: REASON -->)"
            continue
        if directive.startswith("file:"):
            target = work / directive.partition(":")[2].strip()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, "utf-8")
            continue
        if directive == "output":
            assert last_output is not None, f"{at}: <!-- output --> follows no python block"
            problem = shown_in(block.text.splitlines(), last_output)
            assert problem is None, f"{at}: {problem}\n--- the script printed:\n{last_output}"
            last_output = None
            continue
        last_output = None
        if block.language == "console":
            for command, shown, status in transcript(block.text):
                done = _run(["bash", "-c", command], env, work)
                said = f"{at}: $ {command}\n--- exit {done.returncode}, printed:\n{done.stdout}"
                assert done.returncode == status, said
                problem = shown_in(shown, done.stdout)
                assert problem is None, f"{problem}\n{said}"
        elif block.language in ("sh", "bash"):
            done = _run(["bash", "-e", "-c", block.text], env, work)
            assert done.returncode == 0, f"{at}: exit {done.returncode}\n{done.stdout}"
        elif block.language == "python":
            script = scripts / f"example_{number}.py"
            script.write_text(block.text, "utf-8")
            done = _run([str(venv / "bin" / "python"), str(script)], env, work)
            assert done.returncode == 0, f"{at}: exit {done.returncode}\n{done.stdout}"
            last_output = done.stdout


# -- the runner itself -------------------------------------------------------------------------


def test_a_transcript_checks_its_lines_in_order_with_ellipses() -> None:
    output = "LABEL  STATUS\ncsv    mounted   4 tools   12.5 ms\nfiles  mounted\n"
    assert shown_in(["csv mounted ... ms", "files mounted"], output) is None
    assert shown_in(["...", "files mounted"], output) is None
    assert shown_in(["files mounted", "csv mounted ... ms"], output) is not None
    assert shown_in(["csv refused"], output) is not None
    (command, shown, status), (second, _, ok) = transcript(
        "$ mcs-host verify nope  # exits 2\nerror: nope\n$ echo a \\\nb\n"
    )
    assert (command, shown, status) == ("mcs-host verify nope  # exits 2", ["error: nope"], 2)
    assert (second, ok) == ("echo a \\\nb", 0)


def test_each_block_takes_the_comment_right_before_it_and_no_earlier_one(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not run: needs a key -->\n```python\nA\n```\n\ntext\n\n"
        "```python\nB\n```\n\n<!-- file: a.toml -->\n```toml\nC\n```\n\n"
        "1. In a list:\n\n   ```sh\n   echo D\n   ```\n",
        "utf-8",
    )
    assert [(b.text, b.directive) for b in blocks(page)] == [
        ("A\n", "not run: needs a key"),
        ("B\n", ""),
        ("C\n", "file: a.toml"),
        ("echo D\n", ""),
    ]


# -- the configuration reference ---------------------------------------------------------------


def test_every_configuration_key_and_environment_variable_is_in_the_reference() -> None:
    from mcs_host.loading.config_schema import DriverSettings, HostConfig

    page = (DOCS / "reference" / "configuration.md").read_text("utf-8")
    for name in HostConfig.model_fields:
        if name in ("source", "notes", "approved_digests", "drivers", "mcp_servers"):
            continue  # what the host records, and the tables documented as tables
        assert f"`{name}`" in page, name
    for name in DriverSettings.model_fields:
        assert f"`{name}`" in page or f".{name}`" in page, f"drivers.LABEL.{name}"
    source = "\n".join(p.read_text("utf-8") for p in (ROOT / "mcs_host").rglob("*.py"))
    for variable in sorted(set(re.findall(r"\bMCS_HOST_[A-Z][A-Z_]*[A-Z]\b", source))):
        assert variable in page, variable


# -- the guarantees and their tests -----------------------------------------------------------


def test_every_test_the_docs_name_as_proof_exists() -> None:
    named = set()
    for page in DOCS.rglob("*.md"):
        named |= set(re.findall(r"(test_\w+\.py)::(test_\w+)", page.read_text("utf-8")))
    assert len(named) >= 100  # the trust model names the test behind each guarantee
    for module, test in sorted(named):
        (found,) = (ROOT / "tests").rglob(module)  # in tests/unit or tests/system
        source = found.read_text("utf-8")
        assert re.search(rf"^(?:async )?def {test}\(", source, re.MULTILINE), f"{module}::{test}"


def test_every_built_in_text_format_is_in_the_detection_formats_reference() -> None:
    from mcs_host.orchestration.families import BUILTIN

    page = (DOCS / "reference" / "detection-formats.md").read_text("utf-8")
    rows = re.findall(r"\| `([a-z0-9._-]+)` \| (\d+) \| `([a-z0-9_]+)` \|$", page, re.MULTILINE)
    documented = {name: (int(order), module) for name, order, module in rows}
    for text_format in BUILTIN:
        module = text_format.detect.__module__.rsplit(".", 1)[1]
        assert documented.get(text_format.name) == (text_format.order, module), text_format.name
