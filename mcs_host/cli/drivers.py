"""The commands that work on the installed drivers: ``list``, ``verify``, ``load``, ``call``
and ``run``.

One module: the command group of the docs, whose commands share one way to load and to say
what did not load (:func:`loaded_or_exit`, ``serve``'s too)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mcs_host.discovery import PLUGIN_GROUP, discover

from ._explain import (
    Unplaced,
    clashes,
    said_once,
    search_path,
    unknown_tool,
    unplaced,
    with_unplaced,
)
from ._listing import render_listing
from ._rechecked import rechecked_json, rechecked_text
from ._schema import schema_urn
from ._signatures import arguments_from_words
from ._stdout import write_document
from .console import Progress, Ticker, use_colour
from .options import (
    LOAD_OPTIONS,
    REGISTRY_OPTIONS,
    TRUST_OPTIONS,
    ApproveOption,
    HostOptions,
    JsonOption,
    LabelOption,
    LabelsArgument,
    VerboseOption,
    fail,
    host_options,
)
from .render import (
    fix_lines,
    record_subject,
    report_json,
    report_text,
    server_json,
    servers_text,
    verify_json,
    verify_text,
)

if TYPE_CHECKING:
    from mcs_host.loading.config_schema import HostConfig
    from mcs_host.loading.records import Loaded, LoadReport
    from mcs_host.orchestration.calls import ToolCall
    from mcs_host.orchestration.orchestrator import Orchestrator
    from mcs_host.trust.attested import Rechecked

    from .documents import CallDocument


@host_options("path", "no_verify", *REGISTRY_OPTIONS)
def list_drivers(
    as_json: JsonOption = False,
    *,
    options: HostOptions,
    no_verify: Annotated[
        bool,
        typer.Option(
            "--no-verify",
            help="Read metadata only: no registry, no digest (the fastest answer).",
        ),
    ] = False,
) -> None:
    """List the installed drivers and host plugins, and what verification decides for each,
    without importing any of them. Exits 0 whatever it finds."""
    path = options.path
    for directory in path or ():
        if not directory.is_dir():
            fail(f"--path {directory}: no such directory")
    found = discover(path)
    trust: dict[tuple[str, str, str], tuple[str | None, str | None]] | None = None
    registries: tuple[str, ...] = ()
    if not no_verify:
        from mcs_host.loading.config_schema import ConfigError
        from mcs_host.loading.verify import verify_installed

        settings = options.host_config()
        search = [os.fspath(p) for p in path] if path else None
        try:
            with Progress(not as_json) as progress:
                report = verify_installed(settings, search, (), progress)
        except ConfigError as exc:
            fail(str(exc))
        registries = report.registries
        trust = {
            (r.kind, r.label, r.verification.candidate.distribution): (
                r.verification.status,
                r.verification.trust,
            )
            for r in report.records
        }
        if not as_json:
            for reason, message in report.registry_errors:
                typer.echo(f"registry refused: {message}", err=True)
                for line in fix_lines(reason):
                    typer.echo(line, err=True)
        # drivers a registry declares for distributions that ship no entry point
        declared = [
            r.verification.candidate
            for r in report.records
            if r.kind == "driver" and r.verification.candidate.declared
        ]
        if declared:
            listed = sorted(
                (*found.candidates, *declared), key=lambda c: (c.label, c.project, c.version)
            )
            found = replace(found, candidates=tuple(listed))
    plugins = discover(path, group=PLUGIN_GROUP, require_object=False)
    colour = not as_json and use_colour()
    servers = report.servers if not no_verify else ()
    documents = [server_json(s) for s in servers]
    text = render_listing(found, as_json, plugins, trust, registries, colour, documents)
    if as_json:
        write_document(text)
        return
    if servers:
        text += "\n" + "\n".join(servers_text(servers, colour)).strip("\n")
    typer.echo(text, color=colour)


@host_options("path", *TRUST_OPTIONS, "sets")
def verify_drivers(
    labels: LabelsArgument = None,
    as_json: JsonOption = False,
    *,
    options: HostOptions,
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Also start each loadable driver in a child process of its own, with its "
            "settings (the configuration's, and --set) and its healthcheck, and list its tools "
            "(needs the mcp extra).",
        ),
    ] = False,
    provenance: Annotated[
        bool,
        typer.Option(
            "--provenance",
            help="Also verify again, offline, every PEP 740 provenance the registries store: "
            "each stored file must be the one its pin records and prove, with Sigstore, the "
            "file and the publisher its registry entry names (needs the attest extra).",
        ),
    ] = False,
) -> None:
    """Check each driver and host plugin, and what it depends on, against the registries,
    without importing any of them (with --live, each driver also starts in a child process;
    with --provenance, every stored provenance is verified again).

    Exits 0 only when every one asked for may be loaded and would run nothing but verified
    code (and the host's), and started with --live, and every stored provenance verified
    again with --provenance; 1 otherwise.
    """
    from mcs_host.loading.config_schema import ConfigError
    from mcs_host.loading.verify import verify_installed

    settings = options.host_config()
    search = [os.fspath(p) for p in options.path] if options.path else None
    try:
        with Progress(not as_json) as progress:
            report = verify_installed(settings, search, labels or (), progress, live)
            rechecked = _rechecked(settings, progress) if provenance else None
    except ConfigError as exc:
        fail(str(exc))
    again = options.lock_again(settings)
    ok = report.ok and all(c.ok for c in rechecked or ())
    if as_json:
        document = verify_json(report, settings.notes, again)
        if rechecked is not None:
            document["provenance"] = rechecked_json(rechecked)
            document["ok"] = ok
        write_document(json.dumps(document, indent=2))
    else:
        colour = use_colour()
        text = verify_text(report, colour, again)
        text += rechecked_text(rechecked) if rechecked is not None else ""
        typer.echo(text, color=colour)
    if not ok:
        raise typer.Exit(1)


def _rechecked(settings: HostConfig, progress: Progress) -> tuple[Rechecked, ...]:
    """Every provenance the registries of ``settings`` store, verified again (``verify
    --provenance``: the only verify that imports Sigstore)."""
    from mcs_host.trust.attested import recheck

    index, _, _ = settings.trust_index()
    return recheck(index, progress)


def _load(
    config: HostConfig,
    labels: Sequence[str],
    path: Sequence[Path] | None,
    show: bool = True,
    approve: bool = False,
) -> tuple[Loaded | None, LoadReport, tuple[Unplaced, ...]]:
    """Load the stack; with ``approve``, a consent plugin asks on the terminal before each
    call that needs approval (:func:`_terminal_approval`). Each label asked for that no
    mount has is explained in the report's errors, and returned (:func:`unplaced`)."""
    from mcs_host.loading.config_schema import ConfigError
    from mcs_host.loading.host import Host
    from mcs_host.loading.records import LoadError

    search = search_path(path)
    host = Host(config, search_path=search)
    if approve:
        host.add_plugin(_terminal_approval(), "approve-at-terminal")
    loaded: Loaded | None = None
    try:
        with Progress(show) as progress:
            loaded = host.load(labels, progress=progress)
        report = loaded.report
    except LoadError as exc:
        report = exc.report
    except ConfigError as exc:  # a registry the configuration names cannot be read
        fail(str(exc))
    explained = unplaced(config, labels, report, search)
    errors = with_unplaced(report.errors, explained)
    if loaded is not None:  # the command's errors: the stack is still there to use
        errors = (*errors, *_unmet(config, labels, report))
    return loaded, replace(report, errors=errors), explained


def _unmet(config: HostConfig, labels: Sequence[str], report: LoadReport) -> list[str]:
    """What the command line asked for that did not mount, as errors the report does not
    have yet: each label it names, else each driver and MCP server the configuration names
    (and does not disable); and, when nothing mounted at all, that."""
    if labels:
        asked = set(labels)
    else:
        asked = {label for label, mount in config.drivers.items() if mount.enabled}
        asked |= {label for label, server in config.mcp_servers.items() if server.enabled}
    if config.strict:
        asked = set()  # the host's errors name every mount that failed already
    unmet = [
        f"{r.label}: {r.reason}: {r.message}"
        for r in report.records
        if r.label in asked
        and r.label not in config.require  # a required one is the host's error already
        and r.status in ("rejected", "failed")
    ]
    if not report.mounted:
        unmet.append(
            "nothing mounted: no driver or MCP server loaded (`mcs-host list` shows what is "
            "installed, `mcs-host verify` why one would not load)"
        )
    return unmet


@host_options(*LOAD_OPTIONS)
def load_command(
    labels: LabelsArgument = None,
    as_json: JsonOption = False,
    *,
    options: HostOptions,
    prompt: Annotated[
        bool,
        typer.Option(
            "--prompt",
            help="Also print the system prompt of the loaded stack (with --json, and the "
            "response schema for constrained decoding).",
        ),
    ] = False,
    model: Annotated[
        str | None, typer.Option("--model", help="The model the prompt is for.", metavar="NAME")
    ] = None,
    verbose: VerboseOption = False,
) -> None:
    """Discover, verify, check, import and mount the drivers; show the load report: each
    mount's status, verification and trust, and the tools under their final names.

    Exits 1 when anything asked for did not mount (a label given, else a driver or MCP
    server the configuration names), when nothing mounted, and for strict mode and required
    drivers.
    """
    settings = options.host_config()
    loaded, report, explained = _load(settings, labels or (), options.path, show=not as_json)
    again = options.lock_again(settings)
    if as_json:
        document = report_json(report, loaded, settings.notes, again)
        if prompt and loaded is not None:
            document["system_prompt"] = loaded.driver.get_driver_system_message(model)
            answers = loaded.driver.response_schema()
            document["response_schema"] = {
                "name": answers.name,
                "schema": dict(answers.schema),
                "strict": answers.strict,
                "problems": list(answers.problems),
            }
        write_document(json.dumps(document, indent=2, default=str))
    else:
        colour = use_colour()
        shown = replace(report, errors=tuple(_error_texts(report, explained, again)))
        typer.echo(report_text(shown, loaded, colour, verbose, again), color=colour)
        for line in clashes(loaded.driver, settings) if loaded is not None else ():
            typer.echo(line, err=True)
        if prompt and loaded is not None:
            typer.echo("\nSystem prompt:\n" + loaded.driver.get_driver_system_message(model))
    if not report.ok:
        raise typer.Exit(1)


Output = str | dict[str, Any] | Callable[["Orchestrator"], dict[str, Any]]
"""What ``call`` and ``run`` pass the stack: an LLM's output, or what makes one from the
loaded stack (a call whose ``KEY=VALUE`` words its tool's schema types)."""


def _answer(
    command: str,
    settings: HostConfig,
    path: Sequence[Path] | None,
    output: Output,
    as_json: bool,
    labels: Sequence[str] = (),
    approve: bool = False,
    again: str = "",
) -> None:
    """Load the stack (only ``labels``, when given), pass it ``output`` and print the
    DriverResponse (or, with ``--json``, the load and the response as one document); exit 1
    when either failed. ``approve``: each call that needs approval is asked on the terminal
    (no ticker then: the question stays on its line). ``again``: the options each ``mcs-host
    lock`` of a fix line keeps (:meth:`HostOptions.lock_again`)."""
    if not as_json:
        loaded, report = loaded_or_exit(settings, path, labels, approve=approve, again=again)
        if not report.ok and not loaded.driver.list_tools():
            raise typer.Exit(1)  # nothing to call: the errors above say why
        output = _made(output, loaded.driver)
        if command == "call" and isinstance(output, dict):
            names = {tool.name for tool in loaded.driver.list_tools()}
            if output["tool"] not in names:  # no call to make: say what it may be
                typer.echo(f"error: {unknown_tool(output['tool'], loaded.driver)}", err=True)
                raise typer.Exit(1)
        with Ticker(f"{_what(output)} running", enabled=not approve):
            response = loaded.driver.process_llm_response(output)
        if command == "call":  # the tool's result, as a person reads it
            _print_result(response)
        else:
            typer.echo(json.dumps(response.model_dump(mode="python"), indent=2, default=str))
        if response.call_failed or not report.ok:
            raise typer.Exit(1)
        return
    found, report, _ = _load(settings, labels, path, show=False, approve=approve)
    answer = None
    if found is not None:
        answer = found.driver.process_llm_response(_made(output, found.driver))
    document: CallDocument = {
        "schema": schema_urn(command),
        "ok": answer is not None and not answer.call_failed and report.ok,
        "load": report_json(report, found, settings.notes, again),
        "response": answer.model_dump(mode="json") if answer is not None else None,
    }
    write_document(json.dumps(document, indent=2, default=str))
    if not document["ok"]:
        raise typer.Exit(1)


@host_options(*LOAD_OPTIONS)
def call_command(
    tool: Annotated[
        str, typer.Argument(help="The tool's name as the loaded stack lists it.", metavar="TOOL")
    ],
    words: Annotated[
        list[str] | None,
        typer.Argument(
            help="Arguments as KEY=VALUE, each value read as the tool's schema says (a string "
            "as it is, anything else as JSON); over --args.",
            show_default=False,
            metavar="KEY=VALUE...",
        ),
    ] = None,
    args: Annotated[
        str, typer.Option("--args", help="The arguments, a JSON object.", metavar="JSON")
    ] = "{}",
    label: LabelOption = None,
    *,
    options: HostOptions,
    approve: ApproveOption = False,
    as_json: JsonOption = False,
) -> None:
    """Load the stack and send it one tool call (arguments as KEY=VALUE words or --args
    JSON); print its result (with --json, the load and the whole DriverResponse).

    Exits 1 when the call failed, or anything the configuration names did not mount, or
    nothing did.
    """
    from mcs_host._files import InputError, loads_json

    try:
        arguments = loads_json(args, "--args")
    except InputError as exc:
        raise typer.BadParameter(str(exc).removeprefix("--args: "), param_hint="--args") from None
    if approve:
        _check_terminal()
    settings = options.host_config()
    again = options.lock_again(settings)
    path = options.path
    labels = label or ()
    if not words:
        output = {"tool": tool, "arguments": arguments}
        _answer("call", settings, path, output, as_json, labels, approve, again)
        return
    for word in words:  # the form is checked before anything loads
        if "=" not in word or word.startswith("="):
            raise typer.BadParameter(f"{word!r}: give KEY=VALUE", param_hint="KEY=VALUE")

    def typed(stack: Orchestrator) -> dict[str, Any]:
        schema = next((t.input_schema() for t in stack.list_tools() if t.name == tool), None)
        return {"tool": tool, "arguments": {**arguments, **arguments_from_words(words, schema)}}

    _answer("call", settings, path, typed, as_json, labels, approve, again)


@host_options(*LOAD_OPTIONS)
def run_command(
    text: Annotated[
        str, typer.Argument(help="An LLM's output, or - to read it from stdin.", metavar="TEXT")
    ],
    as_object: Annotated[
        bool, typer.Option("--object", help="The output is a provider's JSON message object.")
    ] = False,
    *,
    options: HostOptions,
    label: LabelOption = None,
    approve: ApproveOption = False,
    as_json: JsonOption = False,
) -> None:
    """Load the stack and pass it an LLM's output (text, or a provider's JSON message with
    --object); print the DriverResponse.

    Exits 1 when the call failed, or anything the configuration names did not mount, or
    nothing did.
    """
    if approve:
        _check_terminal()
    raw = sys.stdin.read() if text == "-" else text
    output: str | dict[str, Any] = raw
    if as_object:
        from mcs_host._files import InputError, loads_json

        try:
            output = loads_json(raw, "--object")
        except InputError as exc:
            message = str(exc).removeprefix("--object: ")
            raise typer.BadParameter(message, param_hint="--object") from None
    settings = options.host_config()
    again = options.lock_again(settings)
    _answer("run", settings, options.path, output, as_json, label or (), approve, again)


def _check_terminal() -> None:
    """``--approve`` asks on the terminal: end the command (exit 2) when there is none."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        fail(
            "--approve asks on the terminal before each call that needs approval, and stdin "
            "or stderr is not a terminal; run it in one, or approve calls with a consent "
            "plugin (a host plugin's mcs_host_consent hook)"
        )


def _terminal_approval() -> object:
    """``--approve``'s consent plugin: before each call that needs a consent plugin's
    approval, it shows the tool, the label it goes to and the arguments on stderr and asks
    ``Run it? [y/N]`` on stdin; ``y`` approves the call, anything else denies it. Calls that
    need no approval are not its to judge."""
    from mcs_host.loading.hooks import hookimpl
    from mcs_host.loading.plugins import approval_needed

    class TerminalApproval:
        @hookimpl
        def mcs_host_consent(self, call: ToolCall) -> bool | str | None:
            needed = approval_needed()
            if needed is None:
                return None
            # as JSON, ASCII only: a name or argument cannot move the cursor or recolour
            arguments = json.dumps(dict(call.arguments), ensure_ascii=True, default=str)
            sys.stderr.write(
                f"approval needed: the tool {json.dumps(call.name)} of {needed.label}, "
                f"with the arguments {arguments}\nRun it? [y/N] "
            )
            sys.stderr.flush()
            answer = sys.stdin.readline().strip().lower()
            return True if answer in ("y", "yes") else "denied at the terminal"

    return TerminalApproval()


def _print_result(response: Any) -> None:
    """A call's result on stdout (a string as it is, anything else as JSON), or why it
    failed on stderr."""
    if response.call_failed:
        typer.echo(f"error: {response.call_detail or 'the call failed'}", err=True)
        return
    result = response.tool_call_result
    typer.echo(result if isinstance(result, str) else json.dumps(result, indent=2, default=str))


def _made(output: Output, stack: Orchestrator) -> str | dict[str, Any]:
    """``output``, made from the loaded ``stack`` when it is made from one."""
    if not callable(output):
        return output
    try:
        return output(stack)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="KEY=VALUE") from None


def _what(output: str | dict[str, Any]) -> str:
    """What the ticker names while a call runs: the tool, when the command line named it."""
    tool = output.get("tool") if isinstance(output, dict) else None
    return f"tool {tool}" if isinstance(tool, str) else "the LLM output's tool call"


def loaded_or_exit(
    settings: HostConfig,
    path: Sequence[Path] | None,
    labels: Sequence[str] = (),
    *,
    approve: bool = False,
    again: str = "",
    whole: bool = False,
) -> tuple[Loaded, LoadReport]:
    """Load the stack, saying on stderr how each mount went and each error; exit 1 when the
    load failed. The report's errors include what was asked for and did not mount (the
    caller exits 1 for them once it has done its work, or before, as ``serve`` does).
    ``again``: the options each ``mcs-host lock`` of a fix line keeps. ``whole``: each
    ``error:`` line whole, never "as said above" (an isolated driver's parent reads only
    those lines)."""
    loaded, report, explained = _load(settings, labels, path, approve=approve)
    for refused in report.registry_errors:
        typer.echo(f"registry refused: {refused}", err=True)
    for finding in report.environment:
        typer.echo(f"host installation (ignored, grants nothing): {finding}", err=True)
    for record in (*report.records, *report.plugins):
        what = "host plugin " if record.kind == "plugin" else ""
        if record.status == "mounted":
            how = ", ".join(filter(None, (record.verification, record.trust)))
            typer.echo(f"mounted {what}{record.label} ({how})", err=True)
        elif record.status in ("rejected", "failed"):
            message = f"not mounted {what}{record.label}: {record.reason}: {record.message}"
            typer.echo(message, err=True)
            subject = record_subject(record)
            for line in fix_lines(
                record.reason, record.label, record.distribution, subject, again=again
            ):
                typer.echo(line, err=True)
    if loaded is None or not report.ok:
        for error in _error_texts(report, explained, again, whole):
            typer.echo(f"error: {error}", err=True)
    if loaded is None:
        raise typer.Exit(1)
    for line in clashes(loaded.driver, settings):
        typer.echo(line, err=True)
    return loaded, report


def _error_texts(
    report: LoadReport, explained: Sequence[Unplaced], again: str, whole: bool = False
) -> list[str]:
    """The report's errors as the text prints them: a refusal printed with its mount is not
    printed again (:func:`said_once`) unless ``whole``; a label the configuration does not
    name is followed by the fix of what verifying it decided."""
    texts = []
    refused = {u.whole: u for u in explained if u.refusal is not None}
    records = (*report.records, *report.plugins)
    shortened = report.errors if whole else said_once(report.errors, records)
    for error, shown in zip(report.errors, shortened, strict=True):
        placed = refused.get(error)
        if placed is None or placed.refusal is None:
            texts.append(shown)
            continue
        lines = fix_lines(placed.refusal[0], placed.label, placed.distribution, again=again)
        texts.append("\n".join([placed.error, f"  {placed.refused}", *lines]))
    return texts
