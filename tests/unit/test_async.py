"""The orchestrator and the Runner on an event loop: async tools awaited, sync tools in a
worker thread while the loop goes on, the same detection, consent and messages as the sync
path, and cancellation left to the client."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from sample_drivers import AddArgs, Calculator, Greeter

from mcs_host import DriverMeta, MCSToolDriver, Orchestrator, Runner, Tool, ToolCall
from mcs_host.kit import parse_arguments, tool_from_model

CALL = '{"tool": "add", "arguments": {"a": 2, "b": 3}}'


class AsyncCalculator(MCSToolDriver):
    """``add`` as a coroutine: notes the loop it ran on, and can be told to wait."""

    meta = DriverMeta(id="acalc-0001", name="AsyncCalculator", version="1.0.0")

    def __init__(self, delay: float = 0.0, error: BaseException | None = None) -> None:
        self.delay = delay
        self.error = error
        self.loops: list[asyncio.AbstractEventLoop] = []

    def list_tools(self) -> list[Tool]:
        return [tool_from_model("add", AddArgs, description="Add two numbers.")]

    async def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.loops.append(asyncio.get_running_loop())
        await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        args = parse_arguments(tool_name, AddArgs, arguments)
        return args.a + args.b


class Waiting(Calculator):
    """A sync ``add`` that blocks until ``release`` is set (by a coroutine on the loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.threads: list[threading.Thread] = []

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.threads.append(threading.current_thread())
        if not self.release.wait(10):
            raise RuntimeError("the event loop never ran while this tool worked")
        return super().execute_tool(tool_name, arguments)


def test_an_async_tool_is_awaited_and_answered_as_the_sync_path_answers() -> None:
    driver = AsyncCalculator()
    orchestrator = Orchestrator({"calc": driver})

    async def main() -> Any:
        response = await orchestrator.aprocess_llm_response(CALL)
        return response, asyncio.get_running_loop()

    response, loop = asyncio.run(main())
    assert response.call_executed
    assert response.tool_call_result == 5
    assert driver.loops == [loop]  # awaited on the client's own loop
    same = Orchestrator({"calc": Calculator()}).process_llm_response(CALL)
    assert response.messages == same.messages


def test_a_sync_tool_runs_in_a_worker_thread_while_the_loop_goes_on() -> None:
    driver = Waiting()
    orchestrator = Orchestrator({"calc": driver})

    async def main() -> Any:
        call = asyncio.create_task(orchestrator.aprocess_llm_response(CALL))
        while not driver.threads:  # the loop runs this while the tool waits in its thread
            await asyncio.sleep(0.01)
        driver.release.set()
        return await call

    response = asyncio.run(main())
    assert response.call_executed
    assert response.tool_call_result == 5
    assert driver.threads[0] is not threading.main_thread()


def test_async_consent_approves_edits_and_denies() -> None:
    async def consent(call: ToolCall) -> bool | str | ToolCall:
        await asyncio.sleep(0)
        if call.arguments["a"] == 2:
            return call.with_arguments({"a": 10, "b": 1})
        return "not today"

    orchestrator = Orchestrator({"calc": AsyncCalculator()}, consent=consent)
    edited = asyncio.run(orchestrator.aprocess_llm_response(CALL))
    assert edited.tool_call_result == 11
    denied = asyncio.run(orchestrator.aprocess_llm_response(CALL.replace('"a": 2', '"a": 1')))
    assert denied.call_failed
    assert "was not approved: not today" in (denied.call_detail or "")
    # the sync path runs the same async consent on a loop of its own
    assert orchestrator.process_llm_response(CALL).tool_call_result == 11


def test_the_call_timeout_bounds_an_async_tool_and_a_tools_own_timeout_is_its_error() -> None:
    slow = Orchestrator({"calc": AsyncCalculator(delay=30)}, call_timeout=0.2)
    response = asyncio.run(slow.aprocess_llm_response(CALL))
    assert response.call_failed
    assert response.call_detail == "add did not finish within 0.2 s"
    own = Orchestrator({"calc": AsyncCalculator(error=TimeoutError("upstream took too long"))})
    failed = asyncio.run(own.aprocess_llm_response(CALL))
    assert failed.call_detail == "add failed: TimeoutError: upstream took too long"


def test_cancelling_the_client_task_cancels_the_call_and_reaches_the_client() -> None:
    driver = AsyncCalculator(delay=30)
    orchestrator = Orchestrator({"calc": driver})

    async def main() -> None:
        task = asyncio.create_task(orchestrator.aprocess_llm_response(CALL))
        while not driver.loops:
            await asyncio.sleep(0.01)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())


def test_an_async_tool_from_sync_code_runs_on_a_loop_of_its_own() -> None:
    response = Orchestrator({"calc": AsyncCalculator()}).process_llm_response(CALL)
    assert response.call_executed
    assert response.tool_call_result == 5


def test_an_async_tool_from_sync_code_inside_a_running_loop_fails_with_the_way_out() -> None:
    orchestrator = Orchestrator({"calc": AsyncCalculator()})

    async def main() -> Any:
        return orchestrator.process_llm_response(CALL)  # the sync call, by mistake

    response = asyncio.run(main())
    assert response.call_failed
    assert "call aprocess_llm_response (or aexecute) instead" in (response.call_detail or "")


def test_a_stacked_orchestrator_awaits_its_async_tools_on_the_same_loop() -> None:
    driver = AsyncCalculator()
    outer = Orchestrator({"inner": Orchestrator({"calc": driver})})

    async def main() -> Any:
        return await outer.aprocess_llm_response(CALL), asyncio.get_running_loop()

    response, loop = asyncio.run(main())
    assert response.tool_call_result == 5
    assert driver.loops == [loop]


def test_chained_drivers_answer_on_the_loop_too() -> None:
    orchestrator = Orchestrator({"calc": Calculator(), "greeter": Greeter()})
    response = asyncio.run(orchestrator.aprocess_llm_response("greet:Ann"))
    assert response == orchestrator.process_llm_response("greet:Ann")
    assert response.call_executed


def test_the_runner_has_an_async_twin_with_the_same_turns() -> None:
    answers = [CALL, "The sum is 5."]

    async def chat(history: list[dict[str, Any]]) -> str:
        await asyncio.sleep(0)
        return answers[len([m for m in history if m["role"] == "assistant"])]

    def sync_chat(history: list[dict[str, Any]]) -> str:
        return answers[len([m for m in history if m["role"] == "assistant"])]

    orchestrator = Orchestrator({"calc": AsyncCalculator()})
    result = asyncio.run(Runner(orchestrator, chat).arun("What is 2 + 3?"))
    assert (result.output, result.stopped, result.turns) == ("The sum is 5.", "final", 2)
    again = Runner(Orchestrator({"calc": Calculator()}), sync_chat).run("What is 2 + 3?")
    assert result.messages == again.messages
