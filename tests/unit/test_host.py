"""The host pipeline with in-process drivers and plugins: isolation, report, hooks, options."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest
from sample_drivers import (
    BrokenConstructor,
    BrokenTools,
    Calculator,
    Echo,
    FalseClaim,
    HangingTools,
    Healthy,
    InvalidTools,
)

from mcs_host import (
    ConfigError,
    DriverMeta,
    DriverSettings,
    Host,
    HostConfig,
    LoadError,
    SupportsAutostart,
    Tool,
    ToolCall,
    ToolParameter,
    hookimpl,
    load_config,
    load_drivers,
    make_test_host,
    override_config,
)


def test_the_test_host_mounts_exactly_what_it_is_given() -> None:
    driver, report = make_test_host({"calc": Calculator, "echo": Echo()})
    assert [(r.label, r.status, r.verification) for r in report.records] == [
        ("calc", "mounted", "in-process"),
        ("echo", "mounted", "in-process"),
    ]
    assert report.get("calc") is not None
    assert [t.name for t in driver.list_tools()] == ["calc__add", "echo", "echo__add"]
    assert (
        driver.process_llm_response('{"tool": "echo", "arguments": {"text": "x"}}').tool_call_result
        == "x"
    )


def test_constructor_settings_reach_the_driver() -> None:
    driver, _ = make_test_host({"echo": Echo}, settings={"echo": {"prefix": "> "}})
    assert driver.execute_tool("echo", {"text": "hi"}) == "> hi"
    _, report = make_test_host({"echo": Echo}, settings={"echo": {"prefx": "> "}})
    record = report.get("echo")
    assert record is not None
    assert record.reason == "constructor-error"
    assert "unexpected keyword argument 'prefx'" in record.message
    assert "settings come from [drivers.<label>.settings]" in record.message
    assert not report.ok


@pytest.mark.parametrize(
    ("broken", "reason", "message"),
    [
        (
            BrokenConstructor,
            "constructor-error",
            "constructor raised RuntimeError: cannot reach the backend (at sample_drivers.py:",
        ),
        (BrokenTools, "list-tools-error", "list_tools raised ConnectionError: spec server is down"),
        (InvalidTools, "invalid-tools", "tool 0 ('nameless-description') is invalid"),
        (
            FalseClaim,
            "false-capability",
            "declares the capability 'healthcheck' but does not implement "
            "SupportsHealthcheck (healthcheck)",
        ),
    ],
    ids=["constructor", "list_tools", "invalid-tools", "false-capability"],
)
def test_one_broken_driver_is_recorded_and_the_others_mount(
    broken: type, reason: str, message: str
) -> None:
    driver, report = make_test_host({"broken": broken, "calc": Calculator})
    record = report.get("broken")
    assert record is not None
    assert record.status in ("failed", "rejected")
    assert record.reason == reason
    assert message in record.message
    assert [r.label for r in report.mounted] == ["calc"]
    assert [t.name for t in driver.list_tools()] == ["add"]
    # a test host was given this driver, so its failure is an error of the report
    assert not report.ok
    assert report.errors == (f"broken: {reason}: {record.message}",)
    if reason.endswith("-error"):
        assert record.traceback is not None
        assert "Traceback" in record.traceback


def test_a_hanging_list_tools_times_out_and_the_rest_mounts() -> None:
    class Hanging(HangingTools):
        release = threading.Event()  # its own, so a rerun hangs again

    try:
        _, report = make_test_host(
            {"hang": Hanging, "calc": Calculator},
            settings={"hang": DriverSettings(timeout=0.3)},
        )
    finally:
        Hanging.release.set()
    record = report.get("hang")
    assert record is not None
    assert (record.status, record.reason, record.message) == (
        "failed",
        "timeout",
        "list_tools did not return within 0.3 s",
    )
    assert [r.label for r in report.mounted] == ["calc"]


class _RaisingMeta(Calculator):
    @property
    def meta(self) -> DriverMeta:  # type: ignore[override]
        raise RuntimeError("meta is computed from a backend that is down")


class _ExitingMeta(Calculator):
    @property
    def meta(self) -> DriverMeta:  # type: ignore[override]
        raise SystemExit("meta exits")


class _ExitingConstructor(Calculator):
    def __init__(self) -> None:
        raise SystemExit(3)


class _GeneratedTools(Calculator):
    def list_tools(self) -> Any:
        yield from super().list_tools()
        raise ConnectionError("the second page of tools failed")


class _BadPattern(Calculator):
    def list_tools(self) -> list[Tool]:
        return [
            Tool(
                name="grep",
                description="Find a pattern.",
                parameters=(
                    ToolParameter(
                        name="text", description="Text.", schema={"type": "string", "pattern": "["}
                    ),
                ),
            )
        ]


class _TwiceListed(Calculator):
    def list_tools(self) -> list[Tool]:
        return super().list_tools() * 2


@pytest.mark.parametrize(
    ("broken", "reason", "message"),
    [
        (_RaisingMeta, "host-error", "RuntimeError: meta is computed from a backend that is down"),
        (_ExitingMeta, "host-error", "SystemExit: meta exits"),
        (_ExitingConstructor, "constructor-error", "constructor raised SystemExit: 3"),
        (_GeneratedTools, "list-tools-error", "ConnectionError: the second page of tools failed"),
        (_BadPattern, "invalid-tools", "driver 'broken', tool 'grep': pattern '['"),
        (_TwiceListed, "invalid-tools", "driver 'broken' lists the tool 'add' twice"),
    ],
    ids=["meta property", "meta exits", "sys.exit", "generator", "schema", "twice"],
)
def test_what_a_driver_gets_wrong_fails_its_mount_and_never_the_load(
    broken: type, reason: str, message: str
) -> None:
    driver, report = make_test_host({"broken": broken, "calc": Calculator})
    record = report.get("broken")
    assert record is not None
    assert (record.status, record.reason) == ("failed", reason)
    assert message in record.message
    assert [r.label for r in report.mounted] == ["calc"]
    assert driver.process_llm_response(
        '{"tool": "add", "arguments": {"a": 1, "b": 2}}'
    ).call_executed


def test_labels_follow_the_label_rule() -> None:
    host = Host(HostConfig(autoload=False, plugins=False, registries=[]), search_path=[])
    with pytest.raises(ValueError, match=r"the label 'my\.calc' is not 1 to 32 letters"):
        host.add_driver("my.calc", Calculator)
    # a configured label is checked with the configuration, before anything loads
    with pytest.raises(ConfigError, match=r"drivers: the label 'my\.calc' is not 1 to 32"):
        load_config(environ={}, autoload=False, registries=[], drivers={"my.calc": {}})


def test_strict_mode_turns_any_failure_into_an_error() -> None:
    with pytest.raises(LoadError) as caught:
        make_test_host({"broken": BrokenTools, "calc": Calculator}, strict=True)
    report = caught.value.report
    line = _line_of(BrokenTools.list_tools)
    assert report.errors == (
        "broken: list-tools-error: list_tools raised ConnectionError: spec server is down "
        f"(at sample_drivers.py:{line} in list_tools)",
    )
    assert [r.label for r in report.mounted] == ["calc"]


def _line_of(function: Any) -> int:
    return int(function.__code__.co_firstlineno) + 1


def test_required_drivers_and_versions() -> None:
    with pytest.raises(LoadError, match=r"required driver ghost is not installed"):
        make_test_host({"calc": Calculator}, require={"ghost": ""})
    with pytest.raises(
        LoadError,
        match=r"required driver echo >=3 did not mount: required-version: echo 2\.1\.0 does not",
    ):
        make_test_host({"echo": Echo}, require={"echo": ">=3"})
    _, report = make_test_host({"echo": Echo}, require={"echo": ">=2,<3"})
    assert report.ok


def test_required_capabilities() -> None:
    _, report = make_test_host(
        {"calc": Calculator, "healthy": Healthy}, require_capabilities=("healthcheck",)
    )
    calc = report.get("calc")
    assert calc is not None
    assert (calc.reason, calc.message) == (
        "missing-capability",
        "lacks the required capability 'healthcheck'",
    )
    assert [r.label for r in report.mounted] == ["healthy"]


def test_healthcheck_runs_only_when_asked_and_keeps_unhealthy_drivers_out() -> None:
    _, quiet = make_test_host({"h": Healthy}, settings={"h": {"status": "ERROR"}})
    assert [r.label for r in quiet.mounted] == ["h"]
    _, checked = make_test_host(
        {"h": Healthy, "ok": Healthy}, settings={"h": {"status": "ERROR"}}, healthcheck=True
    )
    sick = checked.get("h")
    assert sick is not None
    assert (sick.status, sick.reason) == ("failed", "unhealthy")
    assert "'status': 'ERROR'" in sick.message
    well = checked.get("ok")
    assert well is not None
    assert well.health == {"status": "OK", "detail": "checked"}


class Starter(Calculator, SupportsAutostart):
    meta = DriverMeta(id="start-0001", name="Starter", version="1.0.0", capabilities=("autostart",))
    started: ClassVar[list[dict[str, Any]]] = []

    def autostart(self, kwargs: dict[str, Any]) -> None:
        self.started.append(kwargs)


def test_autostart_runs_only_when_the_configuration_opts_in() -> None:
    Starter.started.clear()
    make_test_host({"s": Starter})
    assert Starter.started == []
    opted_in = DriverSettings(autostart=True, autostart_settings={"port": 8080})
    _, report = make_test_host(
        {"s": Starter, "calc": Calculator}, settings={"s": opted_in, "calc": opted_in}
    )
    assert Starter.started == [{"port": 8080}]
    calc = report.get("calc")
    assert calc is not None
    assert (calc.status, calc.reason) == ("failed", "autostart-unsupported")


def test_an_in_process_label_cannot_take_a_configured_one() -> None:
    from mcs_host import Host, HostConfig

    host = Host(
        HostConfig(
            autoload=False, plugins=False, registries=(), drivers={"calc": DriverSettings()}
        ),
        search_path=[],
    )
    host.add_driver("calc", Calculator)
    _, report = host.load()
    reasons = sorted((r.label, r.reason) for r in report.records)
    assert reasons == [("calc", "label-taken"), ("calc", "not-installed")]


def test_only_the_labels_asked_for_are_loaded() -> None:
    constructed: list[str] = []

    class Counting(Calculator):
        def __init__(self) -> None:
            super().__init__()
            constructed.append("made")

    from mcs_host import Host, HostConfig

    host = Host(HostConfig(autoload=False, plugins=False, registries=()), search_path=[])
    host.add_driver("a", Counting)
    host.add_driver("b", Counting)
    _, report = host.load(["a"])
    assert [(r.label, r.status, r.reason) for r in report.records] == [
        ("a", "mounted", "mounted"),
        ("b", "skipped", "not-requested"),
    ]
    assert constructed == ["made"]
    with pytest.raises(LoadError, match="nope: no driver has this label"):
        host.load(["nope"])


def test_a_prompts_file_gone_since_the_configuration_was_read_fails_before_any_driver_runs(
    tmp_path: Path,
) -> None:
    constructed: list[str] = []

    class Counting(Calculator):
        def __init__(self) -> None:
            super().__init__()
            constructed.append("made")

    prompts = tmp_path / "prompts.toml"
    prompts.write_text("")
    config = HostConfig(autoload=False, plugins=False, registries=(), prompts=str(prompts))
    host = Host(config, search_path=[])
    host.add_driver("a", Counting)
    prompts.unlink()
    with pytest.raises(ValueError, match=r"prompts file .*prompts\.toml: no such file"):
        host.load()
    assert constructed == []


class ConsentPlugin:
    def __init__(self) -> None:
        self.audited: list[tuple[str, Any, Any]] = []
        self.loaded: list[int] = []

    @hookimpl
    def mcs_host_consent(self, call: ToolCall) -> bool | None:
        return False if call.name == "echo" else None

    @hookimpl
    def mcs_host_after_tool_call(
        self, call: ToolCall, result: Any, error: BaseException | None
    ) -> None:
        self.audited.append((call.name, result, error))

    @hookimpl
    def mcs_host_loaded(self, report: Any) -> None:
        self.loaded.append(len(report.records))


def test_plugins_approve_audit_and_see_the_report() -> None:
    plugin = ConsentPlugin()
    driver, report = make_test_host({"calc": Calculator, "echo": Echo}, plugins=[plugin])
    assert [(p.label, p.status) for p in report.plugins] == [("ConsentPlugin", "mounted")]
    assert plugin.loaded == [2]
    denied = driver.process_llm_response('{"tool": "echo", "arguments": {"text": "x"}}')
    assert denied.call_detail == "the call of 'echo' was not approved"
    assert denied.retry_prompt == (
        "The call of echo was not approved. Do not call it again unless asked."
    )
    ran = driver.process_llm_response('{"tool": "calc__add", "arguments": {"a": 1, "b": 2}}')
    assert ran.tool_call_result == 3
    assert plugin.audited == [("calc__add", 3.0, None)]


class Approver:
    @hookimpl
    def mcs_host_consent(self, call: ToolCall) -> bool:
        return True


class OfficeHours:
    @hookimpl
    def mcs_host_consent(self, call: ToolCall) -> str | None:
        return "outside office hours" if call.name == "echo" else None


def test_one_denial_with_a_reason_wins_over_an_approval() -> None:
    driver, _ = make_test_host(
        {"calc": Calculator, "echo": Echo}, plugins=[Approver(), OfficeHours()]
    )
    denied = driver.process_llm_response('{"tool": "echo", "arguments": {"text": "x"}}')
    assert not denied.call_executed
    assert denied.call_detail == "the call of 'echo' was not approved: outside office hours"
    ran = driver.process_llm_response('{"tool": "calc__add", "arguments": {"a": 1, "b": 2}}')
    assert ran.tool_call_result == 3


class BrokenReport:
    @hookimpl
    def mcs_host_loaded(self, report: Any) -> None:
        raise RuntimeError("the dashboard is down")


def test_a_report_hook_that_raises_never_undoes_the_load() -> None:
    with pytest.warns(RuntimeWarning, match="mcs_host_loaded hook raised.*the dashboard is down"):
        driver, report = make_test_host({"calc": Calculator}, plugins=[BrokenReport()])
    assert [r.label for r in report.mounted] == ["calc"]
    assert driver.process_llm_response(
        '{"tool": "add", "arguments": {"a": 1, "b": 2}}'
    ).call_executed


def test_options_over_a_config_object_are_checked_and_trust_merges() -> None:
    base = HostConfig(
        autoload=False, plugins=False, registries=(), trust={"allow_extensions": True}
    )
    merged = override_config(base, trust={"allow_unverified": True}, strict=None)
    assert (merged.trust.allow_unverified, merged.trust.allow_extensions) == (True, True)
    assert merged.strict is base.strict  # None leaves a setting as it is
    with pytest.raises(ConfigError, match="timeout: Input should be greater than 0"):
        load_drivers(base, timeout=-1)


class UnknownHookPlugin:
    @hookimpl
    def mcs_host_before_everything(self) -> None:
        """Not a hook this host specifies."""


def test_a_plugin_with_an_unknown_hook_is_refused_and_the_rest_loads() -> None:
    driver, report = make_test_host(
        {"calc": Calculator}, plugins=[UnknownHookPlugin(), ConsentPlugin()]
    )
    refused, accepted = report.plugins
    assert (refused.status, refused.reason) == ("failed", "invalid-plugin")
    assert "implements unknown hook 'mcs_host_before_everything'" in refused.message
    assert "known hooks: mcs_host_after_tool_call, mcs_host_codecs" in refused.message
    assert accepted.status == "mounted"
    assert [t.name for t in driver.list_tools()] == ["add"]


def test_a_consent_hook_that_raises_denies_the_call() -> None:
    class Broken:
        @hookimpl
        def mcs_host_consent(self, call: ToolCall) -> bool:
            raise RuntimeError("policy server down")

    driver, _ = make_test_host({"calc": Calculator}, plugins=[Broken()])
    with pytest.warns(RuntimeWarning, match="consent hook raised"):
        response = driver.process_llm_response('{"tool": "add", "arguments": {"a": 1, "b": 2}}')
    assert response.call_detail == "the call of 'add' was not approved"


class EditingPlugin:
    @hookimpl
    def mcs_host_consent(self, call: ToolCall) -> ToolCall | None:
        if call.arguments.get("a", 0) > 100:
            return call.with_arguments({**call.arguments, "a": 100})
        return None


def test_a_plugin_can_edit_a_call_before_it_runs() -> None:
    driver, _ = make_test_host({"calc": Calculator}, plugins=[EditingPlugin()])
    response = driver.process_llm_response('{"tool": "add", "arguments": {"a": 5000, "b": 1}}')
    assert response.tool_call_result == 101
