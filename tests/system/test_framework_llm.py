"""A verified load's tools as tools of Simon Willison's ``llm``, driven by llm's own chain
(``model.chain``, ``conversation.chain``, the async chain) with a scripted model written to
llm's model interface: the model is given each tool's name and schema as the stack offers
it; a call runs through the stack and its result is the next prompt's tool result; what the
stack refuses reaches the model as the tool's error output and the chain goes on; a call
that needs approval reaches the gated server only when approved (the marker file proves what
ran). Then the plugin, through the real ``llm`` command line in a subprocess."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import llm
import pytest
from _frameworks import AgentStack, Keys
from distbuild import ROOT
from sample_drivers import GATED_SERVER

from mcs_host import (
    Loaded,
    LoadReport,
    Orchestrator,
    ToolCall,
    llm_tools,
)

UNITS = {"file": "sales.csv", "column": "units"}

Turn = list[tuple[str, dict[str, Any]]]


class Scripted(llm.Model):
    """A model that makes the tool calls of its next turn, then answers ``done``; it keeps
    each prompt it was given."""

    model_id = "scripted"
    supports_tools = True
    can_stream = False

    def __init__(self, *turns: Turn) -> None:
        self.turns = list(turns)
        self.prompts: list[llm.Prompt] = []

    def execute(
        self,
        prompt: llm.Prompt,
        stream: bool,
        response: llm.Response,
        conversation: llm.Conversation | None,
    ) -> Iterator[str]:
        self.prompts.append(prompt)
        if not self.turns:
            yield "done"
            return
        for index, (name, arguments) in enumerate(self.turns.pop(0)):
            response.add_tool_call(
                llm.ToolCall(name=name, arguments=arguments, tool_call_id=f"call_{index}")
            )


class AsyncScripted(llm.AsyncModel):
    """:class:`Scripted` as an async model."""

    model_id = "scripted"
    supports_tools = True
    can_stream = False

    def __init__(self, *turns: Turn) -> None:
        self.turns = list(turns)
        self.prompts: list[llm.Prompt] = []

    async def execute(
        self,
        prompt: llm.Prompt,
        stream: bool,
        response: llm.AsyncResponse,
        conversation: llm.AsyncConversation | None,
    ) -> AsyncGenerator[str, None]:
        self.prompts.append(prompt)
        if not self.turns:
            yield "done"
            return
        for index, (name, arguments) in enumerate(self.turns.pop(0)):
            response.add_tool_call(
                llm.ToolCall(name=name, arguments=arguments, tool_call_id=f"call_{index}")
            )


def results(model: Scripted | AsyncScripted) -> list[list[tuple[str, str]]]:
    """What each prompt after the first told the model of its calls: ``(name, output)``."""
    return [[(r.name, r.output) for r in prompt.tool_results] for prompt in model.prompts[1:]]


def test_the_model_is_given_the_stacks_names_and_schemas_and_a_call_answers(
    agent_stack: AgentStack,
) -> None:
    stack = agent_stack.loaded.driver
    schemas = {t.name: t.input_schema() for t in stack.list_tools()}
    tools = llm_tools(agent_stack.loaded)
    assert all(isinstance(t, llm.Tool) for t in tools)
    assert {t.name: t.input_schema for t in tools} == schemas  # as offered, not re-derived
    assert [t.name for t in tools] == list(schemas)
    assert {t.plugin for t in tools} == {"mcs-host"}

    model = Scripted([("summarize_column", UNITS)])
    chain = model.chain(
        "How many units were sold?", tools=[*llm_tools(agent_stack.loaded, labels="csv")]
    )
    assert chain.text() == "done"
    assert {t.name: t.input_schema for t in model.prompts[0].tools} == {
        name: schema for name, schema in schemas.items() if name != "wipe"
    }
    [[(name, output)]] = results(model)
    assert name == "summarize_column"
    assert json.loads(output)["sum"] == 773.0

    conversation = Scripted([("summarize_column", UNITS)]).conversation(tools=[*tools])
    assert conversation.chain("How many?").text() == "done"
    assert json.loads(conversation.responses[-1].prompt.tool_results[0].output)["sum"] == 773.0


def test_the_async_chain_awaits_the_stacks_async_call(agent_stack: AgentStack) -> None:
    model = AsyncScripted([("summarize_column", UNITS), ("wipe", {"path": "/"})])
    tools = llm_tools(agent_stack.loaded, approve=True)

    async def run() -> str:
        return await model.chain("How many units were sold?", tools=[*tools]).text()

    assert asyncio.run(run()) == "done"
    [[(_, total), (_, wiped)]] = results(model)  # one turn, two calls
    assert json.loads(total)["sum"] == 773.0
    assert wiped == "wiped"  # the MCP server's async call, awaited on the chain's loop
    assert agent_stack.marker.read_text() == "wiped /\n"


def test_what_the_stack_refuses_is_the_tools_error_output_and_the_chain_goes_on(
    agent_stack: AgentStack,
) -> None:
    model = Scripted(
        [("summarize_column", {"file": "sales.csv", "column": "nope"})],
        [("summarize_column", {"file": "sales.csv", "column": 3})],
        [("summarize_column", UNITS)],
    )
    chain = model.chain("How many units were sold?", tools=[*llm_tools(agent_stack.loaded)])
    assert chain.text() == "done"
    no_column, not_a_string, answer = results(model)
    assert no_column == [
        (
            "summarize_column",
            "Error: summarize_column: tool 'summarize_column', argument 'column': no column "
            "'nope'; the columns are date, region, product, units, unit_price",
        )
    ]
    # llm neither checked nor coerced 3: the stack's schema refused it
    assert not_a_string == [
        (
            "summarize_column",
            "Error: summarize_column: argument 'column': expected string, got integer 3 "
            "(rule: type)",
        )
    ]
    assert json.loads(answer[0][1])["sum"] == 773.0
    failed = model.prompts[1].tool_results[0]
    assert str(failed.exception) == no_column[0][1].removeprefix("Error: ")


def wipe_once(agent_stack: AgentStack, approve: Any) -> str:
    """What the model is told after calling ``wipe`` once with ``approve``."""
    model = Scripted([("wipe", {"path": "/"})])
    chain = model.chain("Wipe it", tools=[*llm_tools(agent_stack.loaded, approve=approve)])
    assert chain.text() == "done"
    [[(name, output)]] = results(model)
    assert name == "wipe"
    return output


def test_a_gated_call_runs_only_when_approved(
    agent_stack: AgentStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    questions: list[str] = []

    def decline(question: str) -> bool:
        questions.append(question)
        return False

    declined = wipe_once(agent_stack, decline)
    assert declined == "Error: the call of 'wipe' was not approved: the user declined it in llm"
    assert questions == [
        'Run the tool "wipe" of gated with the arguments {"path": "/"}? '
        "(each call to the MCP server 'gated' needs approval)"
    ]
    assert not agent_stack.marker.exists()

    monkeypatch.setattr(sys, "stdin", io.StringIO())  # no terminal: no one to ask
    nobody = wipe_once(agent_stack, None)
    assert nobody.startswith("Error: the call of 'wipe' was not approved: ")
    assert "mcs_host_consent hook must approve it" in nobody
    assert nobody.endswith("or pass approve= to llm_tools()")
    assert wipe_once(agent_stack, False) == nobody
    assert not agent_stack.marker.exists()

    with pytest.raises(TypeError, match=r"argument 'approve' must be True, False, a function"):
        llm_tools(agent_stack.loaded, approve="yes")  # type: ignore[arg-type]

    assert wipe_once(agent_stack, True) == "wiped"
    assert wipe_once(agent_stack, lambda question: True) == "wiped"
    assert agent_stack.marker.read_text() == "wiped /\nwiped /\n"


def test_tools_are_filtered_by_label_and_name_and_a_bad_one_is_named(
    agent_stack: AgentStack,
) -> None:
    csv = llm_tools(agent_stack.loaded, labels="csv")
    assert [t.name for t in csv] == [
        "list_csv_files",
        "read_csv_head",
        "filter_csv_rows",
        "summarize_column",
    ]
    only = llm_tools(agent_stack.loaded, tools=["summarize_column"])
    assert [t.name for t in only] == ["summarize_column"]
    with pytest.raises(ValueError, match=r"no driver is mounted as 'nope'; mounted: csv, gated"):
        llm_tools(agent_stack.loaded, labels=["nope"])
    with pytest.raises(ValueError, match=r"no tool is offered as 'csv__wipe'"):
        llm_tools(agent_stack.loaded, tools="csv__wipe")


def test_llm_importing_the_plugin_at_its_start_imports_nothing_else_of_the_host() -> None:
    # llm imports every plugin's module at each start, whether a command uses tools or not
    probe = (
        "import sys, mcs_host.frameworks.llm; "
        "print(sorted(m for m in sys.modules if m.startswith(('mcs_host', 'asyncio', 'pydantic'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "['mcs_host', 'mcs_host.frameworks', 'mcs_host.frameworks.llm']"


def test_without_llm_the_error_names_the_extra(
    agent_stack: AgentStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "llm", None)
    with pytest.raises(ImportError, match=r"^llm_tools\(\) needs llm, .*\[llm\]'$"):
        llm_tools(agent_stack.loaded)


KEYS = ("llm_tool_call", "self", "arguments", "name")
"""Names llm or Python could take for their own."""


def test_arguments_reach_the_tool_as_the_model_gave_them_and_the_caller_reaches_the_audit() -> None:
    audited: list[tuple[str | None, dict[str, Any]]] = []

    def audit(call: ToolCall, result: Any, error: BaseException | None) -> None:
        audited.append((call.caller, dict(call.arguments)))

    stack = Orchestrator({"keys": Keys(KEYS)}, audit=audit)
    arguments = {name: name.upper() for name in KEYS}
    model = Scripted([("keys", arguments)])
    tools = llm_tools(Loaded(stack, LoadReport(())), caller="ada")
    assert model.chain("Keys", tools=[*tools]).text() == "done"
    [[(_, output)]] = results(model)
    assert json.loads(output) == arguments  # no ToolCall passed as llm_tool_call
    assert audited == [("ada", arguments)]


# -- the plugin, through llm's command line --------------------------------------------------

SCRIPTED_PLUGIN = """\
import json

import llm


class Scripted(llm.Model):
    model_id = "scripted"
    supports_tools = True
    can_stream = False

    def execute(self, prompt, stream, response, conversation):
        if prompt.tool_results:
            for result in prompt.tool_results:
                yield f"{result.name}: {result.output}\\n"
            return
        name, _, arguments = prompt.prompt.partition(" ")
        if not arguments:  # no call: the prompt is the answer
            yield name
            return
        response.add_tool_call(llm.ToolCall(name=name, arguments=json.loads(arguments)))


@llm.hookimpl
def register_models(register):
    register(Scripted())
"""


@pytest.fixture(scope="module")
def llm_path(bundled_site: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A ``PYTHONPATH`` for ``python -S -m llm``: the bundled drivers as the wheelhouse built
    them, this Python's site-packages without its editable installs of them (two copies of a
    driver on the search path are refused, and an editable one is), mcs-host's source, and a
    plugin of the scripted model, an installed distribution of its own (a dist-info with an
    ``llm`` entry point)."""
    root = tmp_path_factory.mktemp("llm-path")
    site = root / "site"
    site.mkdir()
    packages = Path(llm.__file__).resolve().parent.parent
    for entry in packages.iterdir():
        if not entry.name.startswith(("mcs_host_csv", "mcs_host_files")) and entry.suffix != ".pth":
            (site / entry.name).symlink_to(entry)
    plugin = root / "plugin"
    info = plugin / "llm_scripted-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: llm-scripted\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[llm]\nscripted = llm_scripted\n")
    (plugin / "llm_scripted.py").write_text(SCRIPTED_PLUGIN)
    return os.pathsep.join(map(str, (bundled_site, site, ROOT, plugin)))


def run_llm(
    llm_path: str, home: Path, *args: str, answer: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``llm ARGS`` as the user runs it, its stdin a terminal that was typed ``answer`` into
    (no terminal when ``answer`` is ``None``: ``llm`` would read a pipe as part of the
    prompt)."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "PYTHONPATH": llm_path,
        "LLM_USER_PATH": str(home / "llm"),
    }
    command = [sys.executable, "-S", "-m", "llm", *args]
    if answer is None:
        return subprocess.run(
            command,
            env=env,
            cwd=home,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    typed, terminal = os.openpty()
    try:
        os.write(typed, answer.encode())
        return subprocess.run(
            command,
            env=env,
            cwd=home,
            stdin=terminal,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(typed)
        os.close(terminal)


def write_config(home: Path, config: str) -> None:
    folder = home / ".config" / "mcs-host"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text(config)


def configure(home: Path, tmp_path: Path, *, gated: bool = False) -> Path:
    """Your mcs-host configuration in ``home``: the repository's registry, the csv driver
    (its root a copy of the demo data) and, when ``gated``, the gated MCP server; the marker
    file its tool appends to."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "sales.csv").write_text((ROOT / "scripts/demo/data/sales.csv").read_text())
    marker = tmp_path / "wiped.txt"
    config = (
        f"registries = [{json.dumps(str(ROOT / 'registry.json'))}]\n"
        f"[drivers.csv.settings]\nroot = {json.dumps(str(data))}\n"
    )
    if gated:
        server = tmp_path / "gated_server.py"
        server.write_text(GATED_SERVER)
        command = [sys.executable, str(server), str(marker)]
        config += f"[mcp_servers.gated]\ncommand = {json.dumps(command)}\nallow_unverified = true\n"
    write_config(home, config)
    return marker


def test_the_plugin_gives_llm_the_configured_drivers_tools(llm_path: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    configure(home, tmp_path)
    listed = run_llm(llm_path, home, "tools", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    tools = {t["name"]: t for t in json.loads(listed.stdout)["tools"] if t["plugin"] == "mcs_host"}
    assert list(tools) == ["filter_csv_rows", "list_csv_files", "read_csv_head", "summarize_column"]
    assert tools["summarize_column"]["arguments"]["required"] == ["file", "column"]

    prompt = "summarize_column " + json.dumps(UNITS)
    ran = run_llm(llm_path, home, "-m", "scripted", "-T", "summarize_column", prompt)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("summarize_column: {")
    assert json.loads(ran.stdout.split(": ", 1)[1])["sum"] == 773.0


def test_the_plugin_asks_before_a_gated_call_as_llm_asks(llm_path: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    marker = configure(home, tmp_path, gated=True)
    wipe = ("-m", "scripted", "-T", "wipe", 'wipe {"path": "/"}')
    denied = run_llm(llm_path, home, *wipe)  # stdin is no terminal, and no --ta
    assert denied.returncode == 0, denied.stderr
    assert denied.stdout.startswith("wipe: Error: the call of 'wipe' was not approved: ")
    assert denied.stdout.rstrip().endswith("or run llm with --ta (--tools-approve)")
    assert not marker.exists()

    declined = run_llm(llm_path, home, *wipe, answer="n\n")  # on a terminal: asked there
    assert declined.returncode == 0, declined.stderr
    assert declined.stderr == (
        'Tool call needs approval: Run the tool "wipe" of gated with the arguments '
        '{"path": "/"}? (each call to the MCP server \'gated\' needs approval)\n'
    )
    assert declined.stdout == (
        "Approve tool call? [y/N]: "
        "wipe: Error: the call of 'wipe' was not approved: the user declined it in llm\n\n"
    )
    assert not marker.exists()

    approved = run_llm(llm_path, home, "--ta", *wipe, answer="y\n")  # llm's question, once
    assert approved.returncode == 0, approved.stderr
    assert approved.stderr == "Tool call: wipe({'path': '/'})\n"
    assert approved.stdout == "Approve tool call? [y/N]: wipe: wiped\n\n"
    assert marker.read_text() == "wiped /\n"


def test_a_failed_load_is_one_line_and_llm_goes_on(llm_path: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, 'registries = ["missing.json"]\n')
    listed = run_llm(llm_path, home, "tools", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [line] = listed.stderr.splitlines()
    assert line.startswith("mcs-host: no tools for llm: loading the drivers")
    assert "missing.json" in line
    assert {t["plugin"] for t in json.loads(listed.stdout)["tools"]} == {
        "llm.default_plugins.default_tools"
    }
    # a prompt naming no tool does not load the drivers: nothing fails, nothing is said
    hello = run_llm(llm_path, home, "-m", "scripted", "hello")
    assert (hello.returncode, hello.stdout, hello.stderr) == (0, "hello\n", "")


def test_a_driver_the_load_rejected_is_named_in_one_line(llm_path: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, '[drivers.csv.settings]\nroot = "data"\n')  # no registry pins it
    listed = run_llm(llm_path, home, "tools", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr == (
        "mcs-host: no tools of csv for llm: it was rejected (not-in-registry): no registry "
        "knows mcs-host-csv or its driver id\n"
    )
    assert "summarize_column" not in listed.stdout
