"""Every open-model family's text tool calls, as the servers that run those models produce them.

For each family: one call, parallel calls, calls after reasoning, calls with prose around
them, a malformed or cut-off call (reported with its problem, never run), and a response
that only mentions the format (no call, and no failed call). The shapes were learnt from the
parser tests of vLLM, SGLang and llama.cpp; the cases are our own.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcs_host import DriverMeta, MCSToolDriver, Orchestrator, Tool, ToolParameter, detect

KNOWN = {"get_weather", "lookup_flight", "search_docs", "get_quote", "get_time"}

B = "\uff5c"  # DeepSeek's and Step-3's bar
U = "\u2581"  # DeepSeek's separator

Expected = list[tuple[str, Any]]


def found(text: str) -> Expected:
    """``(name, arguments)`` per runnable call, ``(name, "problem: ...")`` per failed one."""
    return [
        (c.name, dict(c.arguments) if c.problem is None else f"problem: {c.problem}")
        for c in detect(text, KNOWN).calls
    ]


def ds(name: str) -> str:
    return f"<{B}{name.replace(' ', U)}{B}>"


DS_CALLS, DS_END = ds("tool calls begin"), ds("tool calls end")
DS_CALL, DS_CALL_END, DS_SEP = ds("tool call begin"), ds("tool call end"), ds("tool sep")
DSML = f"{B}DSML{B}"
K3, K3C, K3S = "<|open|>", "<|close|>", "<|sep|>"  # Kimi K3's XTML tokens
NS = "]<]minimax[>["  # MiniMax-M3's namespace token, before each of its tags
M3, M3_END = f"{NS}<tool_call>\n", f"{NS}</tool_call>"


def m3(name: str, **arguments: str) -> str:
    """A MiniMax-M3 invoke, each argument its own tag."""
    inner = "".join(f"{NS}<{key}>{value}{NS}</{key}>" for key, value in arguments.items())
    return f'{NS}<invoke name="{name}">{inner}{NS}</invoke>\n'


WEATHER = ("get_weather", {"city": "Oslo"})
QUOTE_A, QUOTE_B = ("get_quote", {"ticker": "NVDA"}), ("get_quote", {"ticker": "AMD"})
FLIGHT = ("lookup_flight", {"flight_no": "LH404", "date": "2025-03-14"})

# family -> case -> (text, expected); a failed call's expected value starts with "problem:"
CASES: dict[str, dict[str, tuple[str, Expected]]] = {
    "hermes": {
        "single": (
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
            [WEATHER],
        ),
        "parallel": (
            '<tool_call>\n{"name": "get_quote", "arguments": {"ticker": "NVDA"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "get_quote", "arguments": "{\\"ticker\\": \\"AMD\\"}"}\n</tool_call>',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '<think>\nMaybe <tool_call>{"name": "get_time", "arguments": {}}</tool_call>? No.\n</think>\n\n'
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
            [WEATHER],
        ),
        "content": (
            'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\nOne moment.',
            [WEATHER],
        ),
        "malformed": (  # one brace short: mended inside a closed tag, cut off at the end
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (</tool_call> never came); it was not run",
                )
            ],
        ),
        "none": ("Wrap each call in a <tool_call> tag and close it with </tool_call>.", []),
    },
    "qwen3-coder": {
        "single": (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>",
            [WEATHER],
        ),
        "parallel": (
            "<tool_call>\n<function=get_quote>\n<parameter=ticker>\nNVDA\n</parameter>\n</function>\n</tool_call>\n"
            "<tool_call>\n<function=get_quote>\n<parameter=ticker>\nAMD\n</parameter>\n</function>\n</tool_call>",
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            "<think>The date matters.</think>\n<tool_call>\n<function=lookup_flight>\n"
            "<parameter=flight_no>\nLH404\n</parameter>\n<parameter=date>\n2025-03-14\n</parameter>\n"
            "</function>\n</tool_call>",
            [FLIGHT],
        ),
        "content": (
            "I'll look.\n<tool_call>\n<function=search_docs>\n<parameter=query>\nrate limits\n"
            "<parameter=top_k>\n3\n</parameter>\n</function>\n</tool_call>",
            [("search_docs", {"query": "rate limits", "top_k": 3})],  # a </parameter> missing
        ),
        "malformed": (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nOs",
            [
                (
                    "get_weather",
                    "problem: the call was cut off (</tool_call> never came); it was not run",
                )
            ],
        ),
        "none": ("The <function=name> syntax is what Qwen3-Coder writes.", []),
    },
    "glm": {
        "single": (
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>",
            [WEATHER],
        ),
        "parallel": (
            "<tool_call>get_quote<arg_key>ticker</arg_key><arg_value>NVDA</arg_value></tool_call>"
            "<tool_call>get_quote<arg_key>ticker</arg_key><arg_value>AMD</arg_value></tool_call>",
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            "\n<think>Flight status needed.</think>\n<tool_call>lookup_flight\n<arg_key>flight_no</arg_key>\n"
            "<arg_value>LH404</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2025-03-14</arg_value>\n</tool_call>",
            [FLIGHT],
        ),
        "content": (
            "Let me check the time.\n<tool_call>get_time</tool_call>",
            [("get_time", {})],
        ),
        "malformed": (
            "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Os",
            [
                (
                    "get_weather",
                    "problem: the call was cut off (</tool_call> never came); it was not run",
                )
            ],
        ),
        "none": ("GLM puts the name right after <tool_call> and then key/value tags.", []),
    },
    "seed-oss": {
        "single": (
            "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n</function>\n</seed:tool_call>",
            [WEATHER],
        ),
        "parallel": (
            "<seed:tool_call><function=get_quote><parameter=ticker>NVDA</parameter></function></seed:tool_call>"
            "<seed:tool_call><function=get_quote><parameter=ticker>AMD</parameter></function></seed:tool_call>",
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            "<seed:think>I could write <seed:tool_call><function=get_time></function></seed:tool_call>"
            " but the weather is asked.</seed:think>\n"
            "<seed:tool_call><function=get_weather><parameter=city>Oslo</parameter></function></seed:tool_call>",
            [WEATHER],
        ),
        "content": (
            "Checking now.\n<seed:tool_call><function=get_weather><parameter=city>Oslo</parameter></function></seed:tool_call>",
            [WEATHER],
        ),
        "malformed": (
            "<seed:tool_call><function=get_weather><parameter=city>Os",
            [
                (
                    "get_weather",
                    "problem: the call was cut off (</seed:tool_call> never came); it was not run",
                )
            ],
        ),
        "none": (
            "<seed:think>Should I use <seed:tool_call> here? No.</seed:think>It is 12 degrees.",
            [],
        ),
    },
    "mistral": {
        "single": ('[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}', [WEATHER]),
        "parallel": (
            '[TOOL_CALLS]get_quote[ARGS]{"ticker": "NVDA"}[TOOL_CALLS]get_quote{"ticker": "AMD"}',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '[THINK]Maybe [TOOL_CALLS]get_time[ARGS]{}? No.[/THINK][TOOL_CALLS] [{"name": "get_weather", '
            '"arguments": {"city": "Oslo"}, "id": "a1b2c3d4e"}]',
            [WEATHER],
        ),
        "content": (
            'Sure.[TOOL_CALLS]get_weather[CALL_ID]k3J9sQ1xZ[ARGS]{"city": "Oslo"} I will report back.',
            [WEATHER],
        ),
        "malformed": (
            '[TOOL_CALLS]get_weather[ARGS]{"city": "Os',
            [("get_weather", "problem: the call was cut off")],
        ),
        "none": ("Mistral models start calls with [TOOL_CALLS] followed by JSON.", []),
    },
    "mistral-array": {
        "single": (
            '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
            [WEATHER],
        ),
        "parallel": (
            '[TOOL_CALLS] [{"name": "get_quote", "arguments": {"ticker": "NVDA"}}, '
            '{"name": "get_quote", "arguments": {"ticker": "AMD"}}]',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '<think>Oslo.</think>[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
            [WEATHER],
        ),
        "content": (
            'Okay [TOOL_CALLS] here you go: [{"name": "get_weather", "arguments": {"city": "Oslo"}}] done',
            [WEATHER],
        ),
        "malformed": (
            '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Os',
            [("get_weather", "problem: the call was cut off")],
        ),
        "none": ("[TOOL_CALLS] is a special token.", []),
    },
    "llama": {
        "single": (
            '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}<|eom_id|>',
            [WEATHER],
        ),
        "parallel": (
            '<|python_tag|>{"name": "get_quote", "parameters": {"ticker": "NVDA"}}<|eom_id|>'
            '<|python_tag|>{"name": "get_quote", "parameters": {"ticker": "AMD"}}<|eom_id|>',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '<think>Weather.</think><|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}',
            [WEATHER],
        ),
        "content": (
            'Looking it up. <|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}; '
            '{"name": "get_time", "parameters": {}}',
            [WEATHER, ("get_time", {})],
        ),
        "malformed": (
            '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Os',
            [("get_weather", "problem: the call was cut off")],
        ),
        "none": ("Llama writes <|python_tag|> before its calls.", []),
    },
    "llama4": {
        "single": ("<|python_start|>[get_weather(city='Oslo')]<|python_end|>", [WEATHER]),
        "parallel": ("[get_quote(ticker='NVDA'), get_quote(ticker=\"AMD\")]", [QUOTE_A, QUOTE_B]),
        "reasoning": ("<think>Oslo.</think>\n[get_weather(city='Oslo')]", [WEATHER]),
        "content": ("Scheduling that now. [get_weather(city='Oslo')]", [WEATHER]),
        "malformed": (
            "[get_weather(city=b'Oslo'), get_time()]",
            [
                ("get_weather", "problem: an argument is not a JSON value (bytes, a set, inf...)"),
                ("get_time", {}),
            ],
        ),
        "none": ("Use a list such as [f(x=1), g(y=2)] to call tools.", []),
    },
    "deepseek-v3": {
        "single": (
            f'{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n{{"city": "Oslo"}}\n```{DS_CALL_END}{DS_END}',
            [WEATHER],
        ),
        "parallel": (
            f'{DS_CALLS}{DS_CALL}function{DS_SEP}get_quote\n```json\n{{"ticker": "NVDA"}}\n```{DS_CALL_END}\n'
            f'{DS_CALL}function{DS_SEP}get_quote\n```json\n{{"ticker": "AMD"}}\n```{DS_CALL_END}{DS_END}',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            f"<think>It starts with {DS_CALLS} and ends with {DS_END}.</think>\n\n"
            f'{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n{{"city": "Oslo"}}\n```{DS_CALL_END}{DS_END}',
            [WEATHER],
        ),
        "content": (
            f'Checking both rates.{DS_CALLS}{DS_CALL}get_quote{DS_SEP}{{"ticker": "NVDA"}}{DS_CALL_END}'
            f'{DS_CALL}get_quote{DS_SEP}{{"ticker": "AMD"}}{DS_CALL_END}{DS_END} some suffix',
            [QUOTE_A, QUOTE_B],  # V3.1: no type, no fence
        ),
        "malformed": (
            f'{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n{{"city": "Oslo"}}',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (the tool call's end token never came)",
                )
            ],
        ),
        "none": ("DeepSeek's tokens use fullwidth bars, like <\uff5cend of sentence\uff5c>.", []),
    },
    "deepseek-dsml": {
        "single": (
            f'\n\n<{DSML}function_calls>\n<{DSML}invoke name="get_weather">\n'
            f'<{DSML}parameter name="city" string="true">Oslo</{DSML}parameter>\n</{DSML}invoke>\n</{DSML}function_calls>',
            [WEATHER],
        ),
        "parallel": (
            f'<{DSML}function_calls>\n<{DSML}invoke name="search_docs">\n'
            f'<{DSML}parameter name="query" string="true">rate limits</{DSML}parameter>\n'
            f'<{DSML}parameter name="top_k" string="false">3</{DSML}parameter>\n</{DSML}invoke>\n'
            f'<{DSML}invoke name="search_docs">\n<{DSML}parameter name="query" string="true">42</{DSML}parameter>\n'
            f'<{DSML}parameter name="filters" string="false">{{"section": "api"}}</{DSML}parameter>\n'
            f"</{DSML}invoke>\n</{DSML}function_calls>",
            [
                ("search_docs", {"query": "rate limits", "top_k": 3}),
                ("search_docs", {"query": "42", "filters": {"section": "api"}}),
            ],
        ),
        "reasoning": (
            f'<think>One search.</think><{DSML}function_calls>\n<{DSML}invoke name="get_weather">\n'
            f'<{DSML}parameter name="city" string="true">Oslo</{DSML}parameter>\n</{DSML}invoke>\n</{DSML}function_calls>',
            [WEATHER],
        ),
        "content": (
            f'I will look.\n\n<{DSML}function_calls>\n<{DSML}invoke name="get_time">\n</{DSML}invoke>\n'
            f"</{DSML}function_calls>",
            [("get_time", {})],
        ),
        "malformed": (
            f'<{DSML}function_calls>\n<{DSML}invoke name="get_weather">\n'
            f'<{DSML}parameter name="city" string="true">Os',
            [
                (
                    "get_weather",
                    f"problem: the call was cut off (</{DSML}invoke> never came); it was not run",
                )
            ],
        ),
        "none": (f"V3.2 writes {DSML} tags.", []),
    },
    "step3": {
        "single": (
            f'<{B}tool_calls_begin{B}>\n<{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_weather">\n'
            f'<steptml:parameter name="city">Oslo</steptml:parameter>\n</steptml:invoke><{B}tool_call_end{B}>\n<{B}tool_calls_end{B}>',
            [WEATHER],
        ),
        "parallel": (
            f'<{B}tool_calls_begin{B}><{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_quote">'
            f'<steptml:parameter name="ticker">NVDA</steptml:parameter></steptml:invoke><{B}tool_call_end{B}>'
            f'<{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_quote">'
            f'<steptml:parameter name="ticker">AMD</steptml:parameter></steptml:invoke><{B}tool_call_end{B}><{B}tool_calls_end{B}>',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            f"<think>weather</think><{B}tool_calls_begin{B}><{B}tool_call_begin{B}>function<{B}tool_sep{B}>"
            f'<steptml:invoke name="get_weather"><steptml:parameter name="city">Oslo</steptml:parameter>'
            f"</steptml:invoke><{B}tool_call_end{B}><{B}tool_calls_end{B}>",
            [WEATHER],
        ),
        "content": (
            f"Let me look.\n<{B}tool_calls_begin{B}><{B}tool_call_begin{B}>function<{B}tool_sep{B}>"
            f'<steptml:invoke name="search_docs"><steptml:parameter name="query">a < b</steptml:parameter>'
            f"</steptml:invoke><{B}tool_call_end{B}><{B}tool_calls_end{B}>\nDone.",
            [("search_docs", {"query": "a < b"})],
        ),
        "malformed": (
            f'<{B}tool_calls_begin{B}><{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_weather">'
            f'<steptml:parameter name="city">Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (</steptml:invoke> never came)",
                )
            ],
        ),
        "none": ("Step-3 uses <steptml:invoke> tags inside its tool call section.", []),
    },
    # vLLM tests/tool_parsers/test_deepseekv4_tool_parser.py: V3.2's invokes in a tool_calls block
    "deepseek-v4-dsml": {
        "single": (
            f'<{DSML}tool_calls>\n<{DSML}invoke name="get_weather">\n'
            f'<{DSML}parameter name="city" string="true">Oslo</{DSML}parameter>\n</{DSML}invoke>\n</{DSML}tool_calls>',
            [WEATHER],
        ),
        "parallel": (
            f'<{DSML}tool_calls>\n<{DSML}invoke name="get_quote">\n'
            f'<{DSML}parameter name="ticker" string="true">NVDA</{DSML}parameter>\n</{DSML}invoke>\n'
            f'<{DSML}invoke name="get_quote">\n<{DSML}parameter name="ticker" string="true">AMD</{DSML}parameter>\n'
            f"</{DSML}invoke>\n</{DSML}tool_calls>",
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            f'<think>maybe <{DSML}tool_calls><{DSML}invoke name="get_time"></{DSML}invoke></{DSML}tool_calls>'
            f'</think>\n\n<{DSML}tool_calls>\n<{DSML}invoke name="get_weather">\n'
            f'<{DSML}parameter name="city" string="true">Oslo</{DSML}parameter>\n</{DSML}invoke>\n</{DSML}tool_calls>',
            [WEATHER],
        ),
        "content": (
            f'Let me search.\n\n<{DSML}tool_calls>\n<{DSML}invoke name="search_docs">\n'
            f'<{DSML}parameter name="query" string="true">rate limits</{DSML}parameter>\n'
            f'<{DSML}parameter name="top_k" string="false">3</{DSML}parameter>\n</{DSML}invoke>\n'
            f"</{DSML}tool_calls>",
            [("search_docs", {"query": "rate limits", "top_k": 3})],
        ),
        "malformed": (
            f'<{DSML}tool_calls>\n<{DSML}invoke name="get_weather">\n'
            f'<{DSML}parameter name="city" string="true">Os',
            [
                (
                    "get_weather",
                    f"problem: the call was cut off (</{DSML}invoke> never came); it was not run",
                )
            ],
        ),
        "none": (f"V4 wraps its {DSML} invokes in a tool_calls block.", []),
    },
    # Step-3 without the tool_calls_begin section around its calls (vLLM
    # tests/tool_parsers/test_step3_tool_parser.py feeds the calls inside the section; the
    # calls are the same)
    "step3-without-section": {
        "single": (
            f'<{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_weather">\n'
            f'<steptml:parameter name="city">Oslo</steptml:parameter>\n</steptml:invoke><{B}tool_call_end{B}>',
            [WEATHER],
        ),
        "parallel": (
            f'<{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_quote">'
            f'<steptml:parameter name="ticker">NVDA</steptml:parameter></steptml:invoke><{B}tool_call_end{B}>\n'
            f'<{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_quote">'
            f'<steptml:parameter name="ticker">AMD</steptml:parameter></steptml:invoke><{B}tool_call_end{B}>',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            f"<think>maybe <{B}tool_call_begin{B}>function<{B}tool_sep{B}>"
            f'<steptml:invoke name="get_time"></steptml:invoke><{B}tool_call_end{B}>? no</think>'
            f"<{B}tool_call_begin{B}>function<{B}tool_sep{B}>"
            f'<steptml:invoke name="get_weather"><steptml:parameter name="city">Oslo</steptml:parameter>'
            f"</steptml:invoke><{B}tool_call_end{B}>",
            [WEATHER],
        ),
        "content": (
            f"Let me look.\n<{B}tool_call_begin{B}>function<{B}tool_sep{B}>"
            f'<steptml:invoke name="search_docs"><steptml:parameter name="query">a < b</steptml:parameter>'
            f"</steptml:invoke><{B}tool_call_end{B}>\nDone.",
            [("search_docs", {"query": "a < b"})],
        ),
        "malformed": (
            f'<{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_weather">'
            f'<steptml:parameter name="city">Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (</steptml:invoke> never came)",
                )
            ],
        ),
        "none": (
            f"Step-3 opens each call with <{B}tool_call_begin{B}> and a <steptml:invoke> tag.",
            [],
        ),
    },
    "kimi-k2": {
        "single": (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
            '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>',
            [WEATHER],
        ),
        "parallel": (
            "<|tool_calls_section_begin|>\n<|tool_call_begin|> functions.get_quote:3 <|tool_call_argument_begin|>"
            ' {"ticker": "NVDA"} <|tool_call_end|>\n<|tool_call_begin|>functions.get_quote:4<|tool_call_argument_begin|>'
            '{"ticker": "AMD"}<|tool_call_end|><|tool_calls_section_end|>',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            "<think>Oslo weather.</think><|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
            '<|tool_call_argument_begin|>{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>',
            [WEATHER],
        ),
        "content": (
            "I'll check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
            '<|tool_call_argument_begin|>{"city": "Oslo"}<|tool_call_end|>'
            "<|tool_call_begin|>functions.get_time.1<|tool_call_argument_begin|>{}<|tool_call_end|>"
            "<|tool_calls_section_end|>Hello!",
            [WEATHER],  # functions.get_time.1 is no NAME:INDEX id: left out, as Kimi's parsers do
        ),
        "malformed": (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
            '<|tool_call_argument_begin|>{"city": "Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (<|tool_call_end|> never came); it was not run",
                )
            ],
        ),
        "none": ("Kimi opens a section with <|tool_calls_section_begin|>.", []),
    },
    # vLLM vllm/tool_parsers/kimi_k3_tool_parser.py (its docstring's XTML layout) and
    # tests/tool_parsers/test_kimi_k3_tool_parser.py
    "kimi-k3": {
        "single": (
            f'{K3}tools{K3S}{K3}call tool="get_weather" index="1"{K3S}'
            f'{K3}argument key="city" type="string"{K3S}Oslo{K3C}argument{K3S}{K3C}call{K3S}{K3C}tools{K3S}',
            [WEATHER],
        ),
        "parallel": (
            f'{K3}tools{K3S}\n{K3}call tool="get_quote" index="1"{K3S}'
            f'{K3}argument key="ticker" type="string"{K3S}NVDA{K3C}argument{K3S}{K3C}call{K3S}\n'
            f'{K3}call tool="search_docs" index="2"{K3S}'
            f'{K3}argument key="query" type="string"{K3S}a < b{K3C}argument{K3S}'
            f'{K3}argument key="filters" type="object"{K3S}{{"top_k": 3}}{K3C}argument{K3S}'
            f"{K3C}call{K3S}\n{K3C}tools{K3S}",
            [QUOTE_A, ("search_docs", {"query": "a < b", "filters": {"top_k": 3}})],
        ),
        "reasoning": (
            f'{K3}think{K3S}Maybe {K3}tools{K3S}{K3}call tool="get_time" index="1"{K3S}{K3C}call{K3S}'
            f"{K3C}tools{K3S}? No.{K3C}think{K3S}"
            f'{K3}tools{K3S}{K3}call tool="get_weather" index="1"{K3S}'
            f'{K3}argument key="city" type="string"{K3S}Oslo{K3C}argument{K3S}{K3C}call{K3S}{K3C}tools{K3S}',
            [WEATHER],
        ),
        "content": (
            f"{K3}response{K3S}Let me check.{K3C}response{K3S}"
            f'{K3}tools{K3S}{K3}call tool="get_time" index="1"{K3S}{K3C}call{K3S}{K3C}tools{K3S}',
            [("get_time", {})],
        ),
        "malformed": (
            f'{K3}tools{K3S}{K3}call tool="get_weather" index="1"{K3S}'
            f'{K3}argument key="city" type="string"{K3S}Os',
            [
                (
                    "get_weather",
                    f"problem: the call was cut off ({K3C}call{K3S} never came); it was not run",
                )
            ],
        ),
        "none": (f"Kimi K3 opens its calls with {K3}tools{K3S}.", []),
    },
    "harmony": {
        "single": (
            "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            '{"city":"Oslo"}<|call|>',
            [WEATHER],
        ),
        "parallel": (
            "<|channel|>commentary to=functions.get_quote <|constrain|>json<|message|>"
            '{"ticker":"NVDA"}<|call|><|start|>assistant<|channel|>commentary to=functions.get_quote'
            ' <|constrain|>json<|message|>{"ticker":"AMD"}<|call|>',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            "<|channel|>analysis<|message|>I could send to=functions.get_time <|constrain|>json"
            "<|message|>{}<|call|> but no.<|end|><|start|>assistant<|channel|>commentary "
            'to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>',
            [WEATHER],
        ),
        "content": (
            "<|channel|>commentary<|message|>Fetching it.<|end|><|start|>assistant to=functions.get_weather"
            '<|channel|>commentary json<|message|>{"city":"Oslo"}<|call|>',
            [WEATHER],
        ),
        "malformed": (
            '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (<|call|> never came); it was not run",
                )
            ],
        ),
        "none": (
            "<|channel|>analysis<|message|>Just answer.<|end|><|start|>assistant<|channel|>final"
            '<|message|>Use {"tool": "get_time", "arguments": {}} next time.<|return|>',
            [],
        ),
    },
    "minimax-m2": {
        "single": (
            '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n'
            "</invoke>\n</minimax:tool_call>",
            [WEATHER],
        ),
        "parallel": (
            '<minimax:tool_call><invoke name="get_quote"><parameter name="ticker">NVDA</parameter></invoke>'
            '<invoke name="get_quote"><parameter name="ticker">AMD</parameter></invoke></minimax:tool_call>',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            'Oslo asked.\n</think>\n\n<minimax:tool_call>\n<invoke name="get_weather">\n'
            '<parameter name="city">Oslo</parameter>\n</invoke>\n</minimax:tool_call>',
            [WEATHER],
        ),
        "content": (
            'Two searches.\n<minimax:tool_call>\n<invoke name="search_docs">\n<parameter name="query">'
            'retries</parameter>\n<parameter name="top_k">3</parameter>\n</invoke>\n</minimax:tool_call>\nDone.',
            [("search_docs", {"query": "retries", "top_k": 3})],
        ),
        "malformed": (
            '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (</invoke> never came); it was not run",
                )
            ],
        ),
        "none": ("MiniMax wraps calls in <minimax:tool_call>.", []),
    },
    "tool_calls-tag": {
        "single": (
            '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]</tool_calls>',
            [WEATHER],
        ),
        "parallel": (
            '<tool_calls>\n{"name": "get_quote", "arguments": {"ticker": "NVDA"}}\n'
            '{"name": "get_quote", "arguments": {"ticker": "AMD"}}\n</tool_calls>',
            [QUOTE_A, QUOTE_B],  # MiniMax-M1: one call per line
        ),
        "reasoning": (
            '<think>\n<tool_calls>\n{"name": "get_time", "arguments": {}}\n</tool_calls>\n</think>\n'
            '<answer>\n<tool_calls>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]</tool_calls>\n</answer>',
            [WEATHER],
        ),
        "content": (
            ' <tool_calls>[\n  {"name": "get_weather", "arguments": {"city": "Oslo"}}\n]</tool_calls>\nThanks!',
            [WEATHER],
        ),
        "malformed": (
            '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Oslo"}}',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (</tool_calls> never came); it was not run",
                )
            ],
        ),
        "none": ("Jamba writes <tool_calls> blocks.", []),
    },
    "xlam": {  # and Llama 3.x JSON: the JSON protocol, no tags
        "single": ('[{"name": "get_weather", "arguments": {"city": "Oslo"}}]', [WEATHER]),
        "parallel": (
            '[{"name": "get_quote", "arguments": {"ticker": "NVDA"}}, '
            '{"name": "get_quote", "arguments": {"ticker": "AMD"}}]',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '<think>I could call [{"name": "get_time", "arguments": {}}]</think>\n'
            '[{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
            [WEATHER],
        ),
        "content": (
            'Sure.\n```json\n[{"name": "get_weather", "arguments": {"city": "Oslo"}}]\n```\nDone.',
            [WEATHER],
        ),
        "malformed": (
            '[{"name": "get_weather", "arguments": {"city": "Oslo"}',
            [("get_weather", "problem: the call was cut off")],
        ),
        "none": ("xLAM answers with a JSON list such as [{name: ...}].", []),
    },
    "lfm2": {
        "single": ('<|tool_call_start|>[get_weather(city="Oslo")]<|tool_call_end|>', [WEATHER]),
        "parallel": (
            '<|tool_call_start|>[get_quote(ticker="NVDA"), get_quote(ticker="AMD")]<|tool_call_end|>',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '<think>weather</think><|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]<|tool_call_end|>',
            [WEATHER],
        ),
        "content": (
            '<|tool_call_start|>[get_weather(city="Oslo")]<|tool_call_end|>Checking Oslo for you.',
            [WEATHER],
        ),
        "malformed": (
            '<|tool_call_start|>[get_weather(city="Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (<|tool_call_end|> never came); it was not run",
                )
            ],
        ),
        "none": ("LFM2 opens calls with <|tool_call_start|>.", []),
    },
    "functiongemma": {
        "single": (
            "<start_function_call>call:get_weather{city:<escape>Oslo<escape>}<end_function_call>",
            [WEATHER],
        ),
        "parallel": (
            "<start_function_call>call:get_quote{ticker:<escape>NVDA<escape>}<end_function_call>"
            "<start_function_call>call:search_docs{query:<escape>a, b<escape>,top_k:3,opts:{deep:true}}"
            "<end_function_call><start_function_response>",
            [QUOTE_A, ("search_docs", {"query": "a, b", "top_k": 3, "opts": {"deep": True}})],
        ),
        "reasoning": (
            "<think>x</think><start_function_call>call:get_weather{city:<escape>Oslo<escape>}<end_function_call>",
            [WEATHER],
        ),
        "content": (
            "Let me check.<start_function_call>call:get_time{}<end_function_call>",
            [("get_time", {})],
        ),
        "malformed": (
            "<start_function_call>call:get_weather{city:<escape>Os",
            [
                (
                    "get_weather",
                    "problem: the call was cut off (<end_function_call> never came); it was not run",
                )
            ],
        ),
        "none": ("FunctionGemma's calls start with <start_function_call>.", []),
    },
    # vLLM tests/tool_parsers/test_gemma4_tool_parser.py
    "gemma4": {
        "single": ('<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>', [WEATHER]),
        "parallel": (
            '<|tool_call>call:get_quote{ticker:<|"|>NVDA<|"|>}<tool_call|>'
            '<|tool_call>call:search_docs{query:<|"|>a, b<|"|>,top_k:3,filters:{tags:[<|"|>x<|"|>]}}'
            "<tool_call|>",
            [QUOTE_A, ("search_docs", {"query": "a, b", "top_k": 3, "filters": {"tags": ["x"]}})],
        ),
        "reasoning": (
            "<|channel>thought\nMaybe <|tool_call>call:get_time{}<tool_call|>? No.<channel|>"
            '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>',
            [WEATHER],
        ),
        "content": (
            'Let me check the weather. <|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}<tool_call|>',
            [WEATHER],
        ),
        "malformed": (
            '<|tool_call>call:get_weather{city:<|"|>Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (<tool_call|> never came); it was not run",
                )
            ],
        ),
        "none": ("Gemma 4 opens a call with <|tool_call> and ends it with <tool_call|>.", []),
    },
    # vLLM tests/tool_parsers/test_apertus_tool_parser.py
    "apertus": {
        "single": (
            '<|tools_prefix|>[{"get_weather": {"city": "Oslo"}}]<|tools_suffix|>',
            [WEATHER],
        ),
        "parallel": (
            '<|tools_prefix|>[{"get_quote": {"ticker": "NVDA"}}, {"get_quote": {"ticker": "AMD"}}]'
            "<|tools_suffix|>",
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '<|inner_prefix|>Maybe <|tools_prefix|>[{"get_time": {}}]<|tools_suffix|>? No.'
            '<|inner_suffix|><|tools_prefix|>[{"get_weather": {"city": "Oslo"}}]<|tools_suffix|>',
            [WEATHER],
        ),
        "content": (
            'I will check. <|tools_prefix|>[{"get_time": {}}]<|tools_suffix|> One moment.',
            [("get_time", {})],
        ),
        "malformed": (
            '<|tools_prefix|>[{"get_weather": {"city": "Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (<|tools_suffix|> never came); it was not run",
                )
            ],
        ),
        "none": ("Apertus wraps its calls in <|tools_prefix|> and <|tools_suffix|>.", []),
    },
    # vLLM tests/tool_parsers/test_minimax_m3_tool_parser.py (the namespace token, nested
    # tags) and _llm_nom/m3_text.py (reasoning in <mm:think>)
    "minimax-m3": {
        "single": (f"{M3}{m3('get_weather', city='Oslo')}{M3_END}", [WEATHER]),
        "parallel": (
            f"{M3}{m3('get_quote', ticker='NVDA')}{m3('get_quote', ticker='AMD')}{M3_END}",
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            f"<mm:think>Maybe {M3}{m3('get_time')}{M3_END}? No.</mm:think>\n"
            f"{M3}{m3('get_weather', city='Oslo')}{M3_END}",
            [WEATHER],
        ),
        "content": (
            f"I will check.\n{M3}{m3('get_time')}{M3_END}\nOne moment.",
            [("get_time", {})],
        ),
        "malformed": (
            f'{M3}{NS}<invoke name="get_weather">{NS}<city>Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (</invoke> never came); it was not run",
                )
            ],
        ),
        "none": (f"MiniMax-M3 opens its calls with {NS}<tool_call>.", []),
    },
    # vLLM tests/tool_parsers/test_minicpm5xml_tool_parser.py
    "minicpm5": {
        "single": (
            '<function name="get_weather"><param name="city">Oslo</param></function>\n',
            [WEATHER],
        ),
        "parallel": (
            'Head\n<function name="get_quote"><param name="ticker">NVDA</param></function>\nTXT\n'
            '<function name="search_docs"><param name="query"><![CDATA[a\n< b]]></param>'
            '<param name="top_k">3</param></function>\nTail\n',
            [QUOTE_A, ("search_docs", {"query": "a\n< b", "top_k": 3})],
        ),
        "reasoning": (
            '<think>Maybe <function name="get_time"></function>? No.</think>\n'
            '<function name="get_weather"><param name="city">Oslo</param></function>',
            [WEATHER],
        ),
        "content": (
            'Intro before.\n<function name="get_time"></function>\nOutro after.\n',
            [("get_time", {})],
        ),
        "malformed": (
            '<function name="get_weather"><param name="city">Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (</function> never came); it was not run",
                )
            ],
        ),
        "none": ('MiniCPM-5 writes <function name="..."> tags with <param> children.', []),
    },
    # llama.cpp common/chat.cpp (Functionary v3.2: ">>>all\\nlet's call functions>>>fn1\\n{...}")
    # and tests/test-chat.cpp
    "functionary-v3.2": {
        "single": ('>>>get_weather\n{"city": "Oslo"}', [WEATHER]),
        "parallel": (
            '>>>get_quote\n{"ticker": "NVDA"}\n>>>get_quote\n{"ticker": "AMD"}',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '<think>Maybe >>>get_time\n{}? No.</think>>>>get_weather\n{"city": "Oslo"}',
            [WEATHER],
        ),
        "content": (
            ">>>all\nLet me check the time.>>>get_time\n{}",
            [("get_time", {})],
        ),
        "malformed": (
            '>>>get_weather\n{"city": "Os',
            [("get_weather", "problem: the call was cut off")],
        ),
        "none": ("Functionary writes >>>all before text and >>>NAME before a call.", []),
    },
    "granite": {
        "single": (
            '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
            [WEATHER],
        ),
        "parallel": (
            '<|tool_call|>[{"name": "get_quote", "arguments": {"ticker": "NVDA"}}, '
            '{"name": "get_quote", "arguments": {"ticker": "AMD"}}]',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '<think>Oslo</think><|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
            [WEATHER],
        ),
        "content": (
            'Pulling it up.\n<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
            [WEATHER],
        ),
        "malformed": (
            '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Os',
            [("get_weather", "problem: the call was cut off")],
        ),
        "none": ("Granite 3 writes <|tool_call|> and then an array.", []),
    },
    "internlm": {
        "single": (
            '<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"city": "Oslo"}}<|action_end|>',
            [WEATHER],
        ),
        "parallel": (
            '<|action_start|> <|plugin|>\n{"name": "get_quote", "parameters": {"ticker": "NVDA"}}<|action_end|>'
            '<|action_start|> <|plugin|>\n{"name": "get_quote", "parameters": {"ticker": "AMD"}}<|action_end|>',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '<think>x</think><|action_start|><|plugin|>{"name": "get_weather", "parameters": {"city": "Oslo"}}<|action_end|>',
            [WEATHER],
        ),
        "content": (
            'Let me check your calendar.<|action_start|><|plugin|>\n{"name": "get_time", "parameters": {}}<|action_end|>',
            [("get_time", {})],
        ),
        "malformed": (
            '<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"city": "Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (<|action_end|> never came); it was not run",
                )
            ],
        ),
        "none": ("InternLM uses <|action_start|> tokens.", []),
    },
    "command": {
        "single": (
            '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Oslo"}}]<|END_ACTION|>',
            [WEATHER],
        ),
        "parallel": (
            '<|START_ACTION|>[\n{"tool_call_id": "0", "tool_name": "get_quote", "parameters": {"ticker": "NVDA"}},\n'
            '{"tool_call_id": "1", "tool_name": "get_quote", "parameters": {"ticker": "AMD"}}\n]<|END_ACTION|>',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '<|START_THINKING|>I will call <|START_ACTION|>[{"tool_name": "get_time", "parameters": {}}]<|END_ACTION|>'
            '? No.<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", '
            '"parameters": {"city": "Oslo"}}]<|END_ACTION|>',
            [WEATHER],
        ),
        "content": (
            'Action: ```json\n[\n  {"tool_name": "get_weather", "parameters": {"city": "Oslo"}}\n]\n```',
            [WEATHER],
        ),
        "malformed": (
            '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Os',
            [
                (
                    "get_weather",
                    "problem: the call was cut off (<|END_ACTION|> never came); it was not run",
                )
            ],
        ),
        "none": ("<|START_RESPONSE|>It is sunny.<|END_RESPONSE|>", []),
    },
    "gigachat": {
        "single": (
            'Let me check.<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}',
            [WEATHER],
        ),
        "parallel": (
            '<|function_call|>{"name": "get_weather", "arguments": {"city": "Oslo"}}</s>',
            [WEATHER],
        ),
        "reasoning": (
            '<think>x</think><|function_call|>{"name": "get_weather", "arguments": {"city": "Oslo"}}',
            [WEATHER],
        ),
        "content": (
            'Checking.<|function_call|>{"name": "get_time", "arguments": {}}',
            [("get_time", {})],
        ),
        "malformed": (
            '<|function_call|>{"name": "get_weather", "arguments": {"city": "Os',
            [("get_weather", "problem: the call was cut off")],
        ),
        "none": ("GigaChat separates roles with <|role_sep|>.", []),
    },
    "phi4-mini": {
        "single": ('functools[{"name": "get_weather", "arguments": {"city": "Oslo"}}]', [WEATHER]),
        "parallel": (
            'functools[{"name": "get_quote", "arguments": {"ticker": "NVDA"}}, '
            '{"name": "get_quote", "arguments": {"ticker": "AMD"}}]',
            [QUOTE_A, QUOTE_B],
        ),
        "reasoning": (
            '<think>one</think>functools[{"name": "search_docs", "arguments": {"query": "x", "tags": ["a", "b"]}}]',
            [("search_docs", {"query": "x", "tags": ["a", "b"]})],
        ),
        "content": (
            'Sure: functools[{"name": "get_weather", "arguments": {"city": "Oslo"}}] done.',
            [WEATHER],
        ),
        "malformed": (
            'functools[{"name": "get_weather", "arguments": {"city": "Os',
            [("get_weather", "problem: the call was cut off")],
        ),
        "none": ("Python's functools[...] is not what I mean here.", []),
    },
}

_IDS = [(family, case) for family, cases in CASES.items() for case in cases]


@pytest.mark.parametrize(("family", "case"), _IDS, ids=[f"{f}-{c}" for f, c in _IDS])
def test_each_family_single_parallel_reasoning_content_malformed_and_no_call(
    family: str, case: str
) -> None:
    text, expected = CASES[family][case]
    got = found(text)
    if case == "malformed":  # the problem's start is enough: it names the cut-off
        got = [
            (n, g[: len(e)] if isinstance(e, str) and isinstance(g, str) else g)
            for (n, g), (_, e) in zip(got, expected, strict=True)
        ]
    assert got == expected


class Recorder(MCSToolDriver):
    """Offers every tool the cases call, taking any arguments; records what ran."""

    meta = DriverMeta(id="recorder-0001", name="Recorder", version="1.0.0")

    def __init__(self) -> None:
        self.ran: list[str] = []

    def list_tools(self) -> list[Tool]:
        parameters = [
            ToolParameter(name=key, description=key)
            for key in ("city", "ticker", "flight_no", "date", "query", "top_k", "filters", "tags")
        ]
        return [
            Tool(name=name, description=f"The {name} tool.", parameters=parameters)
            for name in sorted(KNOWN)
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        self.ran.append(tool_name)
        return "ok"


@pytest.mark.parametrize("family", list(CASES))
def test_a_malformed_or_cut_off_call_fails_with_a_retry_prompt_and_never_runs(family: str) -> None:
    text, _ = CASES[family]["malformed"]
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(text)
    assert response.call_failed, response
    assert response.retry_prompt is not None
    assert tools.ran == [] or family == "llama4"  # llama4's case has one good call beside


@pytest.mark.parametrize("family", list(CASES))
def test_a_response_that_only_mentions_a_format_is_not_a_failed_call(family: str) -> None:
    text, _ = CASES[family]["none"]
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(text)
    assert (response.call_executed, response.call_failed) == (False, False), response
    assert tools.ran == []


@pytest.mark.parametrize("family", list(CASES))
def test_the_single_call_of_each_family_runs_through_the_orchestrator(family: str) -> None:
    text, expected = CASES[family]["single"]
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(text)
    assert (response.call_executed, response.call_failed) == (True, False), response
    assert tools.ran == [expected[0][0]]


# -- the known wrong cases ---------------------------------------------------------------------

CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'


def cut_responses(text: str) -> dict[str, dict[str, Any]]:
    """``text`` as each provider returns it when the output hit its length limit."""
    return {
        "openai": {
            "choices": [
                {"finish_reason": "length", "message": {"role": "assistant", "content": text}}
            ]
        },
        "anthropic": {
            "type": "message",
            "role": "assistant",
            "stop_reason": "max_tokens",
            "content": [{"type": "text", "text": text}],
        },
        "gemini": {
            "candidates": [
                {
                    "finishReason": "MAX_TOKENS",
                    "content": {"role": "model", "parts": [{"text": text}]},
                }
            ]
        },
        "ollama": {
            "model": "m",
            "done": True,
            "done_reason": "length",
            "message": {"role": "assistant", "content": text},
        },
        "openai-responses": {
            "object": "response",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                }
            ],
        },
    }


CUT_RESPONSES = cut_responses(CALL_TEXT)


@pytest.mark.parametrize("provider", list(CUT_RESPONSES))
def test_a_text_call_in_a_response_cut_at_the_length_limit_is_never_run(provider: str) -> None:
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(CUT_RESPONSES[provider])
    assert (response.call_executed, response.call_failed) == (False, True), response
    assert "output limit" in (response.call_detail or "")
    assert tools.ran == []


def test_every_fenced_call_is_found_not_only_the_first() -> None:
    text = (
        "First the weather:\n```json\n"
        '{"tool": "get_weather", "arguments": {"city": "Oslo"}}\n```\n'
        "then the time:\n```\n"
        '{"tool": "get_time", "arguments": {}}\n```\n'
        'and a code sample that is no call:\n```python\nprint("x")\n```'
    )
    assert found(text) == [WEATHER, ("get_time", {})]


@pytest.mark.parametrize(
    "text",
    [
        "Qwen wraps calls in <tool_call> and </tool_call>; mine has none.",
        "The [TOOL_CALLS] token tells the server a call follows.",
        "Llama 3.1 emits <|python_tag|> for built-in tools.",
        "Use functools[partial] sparingly, and functools.reduce rarely.",
        "Kimi's <|tool_calls_section_begin|> opens a section.",
        '<think>should I call get_time? <tool_call>{"name": "get_time"}</tool_call></think>It is noon.',
    ],
)
def test_prose_that_mentions_a_format_is_neither_a_call_nor_a_failed_call(text: str) -> None:
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(text)
    assert (response.call_executed, response.call_failed) == (False, False), response
    assert found(text) == []


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_weather", "city": "Oslo"}',
        'Result: {"name": "get_time", "value": "noon"}',
        '[{"name": "get_weather", "description": "The weather."}]',
    ],
)
def test_a_json_object_with_a_name_and_no_arguments_key_is_not_a_call(text: str) -> None:
    assert found(text) == []


class Lookup(MCSToolDriver):
    """``lookup(zip: string, n: integer, tags: string | array)``: returns its arguments."""

    meta = DriverMeta(id="lookup-0001", name="Lookup", version="1.0.0")

    def list_tools(self) -> list[Tool]:
        return [
            Tool(
                name="lookup",
                description="Look a postcode up.",
                parameters=[
                    ToolParameter(name="zip", description="A postcode.", schema={"type": "string"}),
                    ToolParameter(name="n", description="How many.", schema={"type": "integer"}),
                    ToolParameter(
                        name="tags", description="Tags.", schema={"type": ["string", "array"]}
                    ),
                ],
            )
        ]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return arguments


_DSML_BAR = "\uff5cDSML\uff5c"
WRITTEN = {
    "qwen3-coder": "<tool_call>\n<function=lookup>\n<parameter=zip>\n{zip}\n</parameter>\n"
    "<parameter=n>\n3\n</parameter>\n<parameter=tags>\n[1]\n</parameter>\n</function>\n</tool_call>",
    "glm": "<tool_call>lookup<arg_key>zip</arg_key><arg_value>{zip}</arg_value>"
    "<arg_key>n</arg_key><arg_value>3</arg_value><arg_key>tags</arg_key><arg_value>[1]</arg_value>"
    "</tool_call>",
    "glm-4.6 json string": "<tool_call>lookup<arg_key>zip</arg_key><arg_value>{zip}</arg_value>"
    '<arg_key>n</arg_key><arg_value>3</arg_value><arg_key>tags</arg_key><arg_value>"[1]"</arg_value>'
    "</tool_call>",
    "minimax-m2": '<minimax:tool_call>\n<invoke name="lookup">\n<parameter name="zip">{zip}</parameter>\n'
    '<parameter name="n">3</parameter>\n<parameter name="tags">[1]</parameter>\n</invoke>\n'
    "</minimax:tool_call>",
    "deepseek-dsml": f'<{_DSML_BAR}function_calls>\n<{_DSML_BAR}invoke name="lookup">\n'
    f'<{_DSML_BAR}parameter name="zip">{{zip}}</{_DSML_BAR}parameter>\n'
    f'<{_DSML_BAR}parameter name="n" string="false">3</{_DSML_BAR}parameter>\n'
    f'<{_DSML_BAR}parameter name="tags">[1]</{_DSML_BAR}parameter>\n'
    f"</{_DSML_BAR}invoke>\n</{_DSML_BAR}function_calls>",
}


@pytest.mark.parametrize("family", list(WRITTEN))
@pytest.mark.parametrize("zip_code", ["02134", "2134", "1.50", "true", "null", '"02134"'])
def test_a_parameter_written_as_text_is_typed_by_the_tools_schema(
    family: str, zip_code: str
) -> None:
    # the text families write every value as text: a string parameter gets the text as
    # written (quotes too: llama.cpp's StepFun 3.5 test, "quoted and unquoted"), an integer
    # one the number, and [1] stays a list where the schema takes one
    text = WRITTEN[family].replace("{zip}", zip_code)
    response = Orchestrator({"lookup": Lookup()}).process_llm_response(text)
    assert response.call_executed, response.call_detail
    assert response.tool_call_result == {"zip": zip_code, "n": 3, "tags": [1]}


class Search(MCSToolDriver):
    """``search(tags: array, filters: object, note: string)``: returns its arguments."""

    meta = DriverMeta(id="search-0001", name="Search", version="1.0.0")

    def list_tools(self) -> list[Tool]:
        parameters = [
            ToolParameter(name=key, description=key, schema={"type": kind})
            for key, kind in (("tags", "array"), ("filters", "object"), ("note", "string"))
        ]
        return [Tool(name="search", description="Search.", parameters=parameters)]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return arguments


def test_a_glm_array_or_object_written_as_a_json_string_is_read_where_the_schema_takes_one() -> (
    None
):
    # GLM-4.6/4.7 write an array or object as a JSON string, its quotes escaped (the value
    # vLLM's and SGLang's GLM parsers json.loads once); a string parameter keeps the string
    text = (
        '<tool_call>search\n<arg_key>tags</arg_key>\n<arg_value>"[\\"a\\", \\"b\\"]"</arg_value>\n'
        '<arg_key>filters</arg_key>\n<arg_value>"{\\"year\\": 2024}"</arg_value>\n'
        '<arg_key>note</arg_key>\n<arg_value>"[\\"x\\"]"</arg_value>\n</tool_call>'
    )
    response = Orchestrator({"search": Search()}).process_llm_response(text)
    assert response.call_executed, response.call_detail
    assert response.tool_call_result == {
        "tags": ["a", "b"],
        "filters": {"year": 2024},
        "note": '["x"]',
    }


def test_a_glm_json_string_that_holds_no_array_or_object_stays_a_string() -> None:
    text = (
        '<tool_call>search<arg_key>note</arg_key><arg_value>"[not json"</arg_value>'
        '<arg_key>tags</arg_key><arg_value>"a, b"</arg_value></tool_call>'
    )
    assert found(text) == [("search", {"note": "[not json", "tags": "a, b"})]


KIMI_COUNTER = (
    "<|tool_calls_section_begin|><|tool_call_begin|>0 <|tool_call_argument_begin|>"
    '{"city": "Oslo"}<|tool_call_end|><|tool_call_begin|> 1<|tool_call_argument_begin|>'
    '{"city": "Bergen"}<|tool_call_end|><|tool_calls_section_end|>'
)


class Weather(Recorder):
    """Offers ``get_weather`` alone."""

    def list_tools(self) -> list[Tool]:
        return [tool for tool in super().list_tools() if tool.name == "get_weather"]


def test_a_kimi_call_whose_id_is_a_bare_counter_is_to_the_one_tool_on_offer() -> None:
    calls = detect(KIMI_COUNTER, {"get_weather"}).calls
    assert [(c.name, dict(c.arguments), c.id, c.problem) for c in calls] == [
        ("get_weather", {"city": "Oslo"}, "functions.get_weather:0", None),
        ("get_weather", {"city": "Bergen"}, "functions.get_weather:1", None),
    ]
    tools = Weather()
    response = Orchestrator({"weather": tools}).process_llm_response(KIMI_COUNTER)
    assert (response.call_executed, response.call_failed) == (True, False), response
    assert tools.ran == ["get_weather", "get_weather"]


@pytest.mark.parametrize("known", [set(), {"get_weather", "get_time"}], ids=["none", "two"])
def test_a_kimi_call_whose_id_is_a_bare_counter_fails_unless_one_tool_is_on_offer(
    known: set[str],
) -> None:
    calls = detect(KIMI_COUNTER, known).calls
    assert len(calls) == 2
    assert all(c.problem and "names no tool" in c.problem for c in calls), calls
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(KIMI_COUNTER)
    assert (response.call_executed, response.call_failed) == (False, True), response
    assert response.retry_prompt is not None
    assert tools.ran == []


class Orders(MCSToolDriver):
    """``create_order``, the nested schema of vLLM's MiniMax-M3 test: returns its arguments."""

    meta = DriverMeta(id="orders-0001", name="Orders", version="1.0.0")

    def list_tools(self) -> list[Tool]:
        item = {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
        }
        schemas: dict[str, dict[str, Any]] = {
            "user_id": {"type": "integer"},
            "urgent": {"type": "boolean"},
            "note": {"type": "string"},
            "shipping": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}},
            },
            "items": {"type": "array", "items": item},
            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
            "tags": {"type": "object"},
        }
        parameters = [
            ToolParameter(name=key, description=key, schema=schema, required=False)
            for key, schema in schemas.items()
        ]
        return [Tool(name="create_order", description="Order.", parameters=parameters)]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return arguments


def _tags(**values: str) -> str:
    return "".join(f"{NS}<{key}>{value}{NS}</{key}>" for key, value in values.items())


def test_minimax_m3_nested_tags_are_objects_item_lists_and_repeated_names_typed_by_the_schema() -> (
    None
):
    # the nested call of vLLM's test_minimax_m3_tool_parser.py: objects from tags, an array
    # where every child is <item>, a list where a name repeats; leaves typed by the schema
    item = f"{NS}<item>{_tags(sku='book-001', qty='2')}{NS}</item>"
    text = (
        f"I will create it.\n{M3}"
        f'{NS}<invoke name="create_order">{_tags(user_id="42", urgent="true")}'
        f"{NS}<note>  Leave at the desk.\n{NS}</note>"
        f"{NS}<shipping>{_tags(city='Singapore', zip='018956')}{NS}</shipping>"
        f"{NS}<items>{item}{item.replace('book-001', 'pen-007')}{NS}</items>"
        f"{NS}<metadata>{_tags(source='mobile', campaign='may-launch')}{NS}</metadata>"
        f"{NS}<tags>{NS}<tag>a{NS}</tag>{NS}<tag>b{NS}</tag>{NS}</tags>"
        f"{NS}</invoke>\n{M3_END}"
    )
    response = Orchestrator({"orders": Orders()}).process_llm_response(text)
    assert response.call_executed, response.call_detail
    assert response.tool_call_result == {
        "user_id": 42,
        "urgent": True,
        "note": "  Leave at the desk.\n",
        "shipping": {"city": "Singapore", "zip": 18956},
        "items": [{"sku": "book-001", "qty": 2}, {"sku": "pen-007", "qty": 2}],
        "metadata": {"source": "mobile", "campaign": "may-launch"},
        "tags": {"tag": ["a", "b"]},
    }


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (f"{NS}<city>Oslo{NS}</town>", "</town> closes no open <town>"),
        (f"{NS}<filters>{NS}<a>1{NS}</a>b{NS}</filters>", "text 'b' between tags"),
        (f"{NS}<filters>x{NS}<a>1{NS}</a>{NS}</filters>", "<filters> holds both text and tags"),
        (f"{NS}<city>Oslo{NS}</city>{NS}<city>Bergen{NS}</city>", "'city' is given twice"),
        (f"{NS}<filters>{NS}<a>1{NS}</a>", "<filters> was not closed before </invoke>"),
    ],
    ids=["mismatched", "text after a tag", "text and tags", "twice", "unclosed"],
)
def test_a_minimax_m3_invoke_whose_tags_do_not_nest_fails_and_never_runs(
    body: str, problem: str
) -> None:
    text = f'{M3}{NS}<invoke name="get_weather">{body}{NS}</invoke>\n{M3_END}'
    (call,) = detect(text, KNOWN).calls
    assert problem in (call.problem or "")
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(text)
    assert (response.call_executed, response.call_failed, tools.ran) == (False, True, [])


def test_a_native_json_number_for_a_string_parameter_is_still_refused() -> None:
    call = '{"tool": "lookup", "arguments": {"zip": 2134, "n": 3}}'
    response = Orchestrator({"lookup": Lookup()}).process_llm_response(call)
    assert response.call_failed
    assert (
        response.call_detail
        == "lookup: argument 'zip': expected string, got integer 2134 (rule: type)"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # DeepSeek V3.2 with a JSON object in the invoke instead of parameter tags
            f'<{_DSML_BAR}function_calls>\n<{_DSML_BAR}invoke name="get_weather">\n'
            f'{{"city": "Oslo"}}\n</{_DSML_BAR}invoke>\n</{_DSML_BAR}function_calls>',
            [WEATHER],
        ),
        (  # ... and with neither: never run with no arguments
            f'<{_DSML_BAR}function_calls>\n<{_DSML_BAR}invoke name="get_weather">\nOslo please\n'
            f"</{_DSML_BAR}invoke>\n</{_DSML_BAR}function_calls>",
            [("get_weather", "problem: the invoke holds no parameters")],
        ),
        (  # the template put <think> in the prompt: the response starts inside reasoning
            'Let me think about <tool_call>\n{"name": "get_time", "arguments": {}}</tool_call>'
            ' hmm\n</think>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}'
            "\n</tool_call>",
            [WEATHER],
        ),
        (  # GigaChat: a name without arguments is no call
            '<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "get_time"}',
            [],
        ),
        (  # MiniMax-M1: the line without arguments is left out, the others run
            '<tool_calls>\n{"name": "get_quote", "arguments": {"ticker": "NVDA"}}\n'
            '{"name": "get_time"}\n{"name": "get_quote", "arguments": {"ticker": "AMD"}}\n'
            "</tool_calls>",
            [QUOTE_A, QUOTE_B],
        ),
    ],
    ids=["dsml-json", "dsml-text", "prefilled-think", "gigachat-bare", "minimax-m1-bare"],
)
def test_shapes_the_upstream_parsers_read_in_their_own_way(
    text: str, expected: list[tuple[str, Any]]
) -> None:
    assert found(text) == expected


# -- the end of the text: a stop token taken off is not a cut-off -----------------------------

# Each response ends where the server stopped the model and took the stop token off (Ollama
# and llama.cpp hand gpt-oss's call over without <|call|>), or where the model stopped right
# after a body that closes itself (a JSON value, a pythonic list, a fenced block), or after an
# XML invoke that closed, its block's closing tag never written: the call is whole as written
# and runs. The outputs are what the named upstream tests feed their parsers, with our tools'
# names and arguments.
AT_THE_END: dict[str, tuple[str, Expected]] = {
    # llama.cpp tests/test-chat.cpp, test_gpt_oss_parser: the call after the analysis channel
    "gpt-oss after its analysis": (
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary"
        ' to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}',
        [WEATHER],
    ),
    # ... the recipient in the role header, the prompt having written <|start|>assistant
    "gpt-oss recipient in the role header": (
        ' to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city": "Oslo"}',
        [WEATHER],
    ),
    "gpt-oss role header after its analysis": (
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant to=functions.get_weather"
        '<|channel|>commentary <|constrain|>json<|message|>{"city": "Oslo"}',
        [WEATHER],
    ),
    # ... and after a preamble in the commentary channel
    "gpt-oss after a commentary preamble": (
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary"
        "<|message|>Hello, world!\nWhat's up?<|end|><|start|>assistant<|channel|>commentary"
        ' to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}',
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_hermes_tool_parser.py, ..._tool_call_until_eos
    "hermes at EOS": (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}',
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_minimax_tool_parser.py, tool_call_incomplete_tag
    "minimax-m1 without </tool_calls>": (
        '<tool_calls>\n{"name": "get_quote", "arguments": {"ticker": "NVDA"}}\n'
        '{"name": "get_quote", "arguments": {"ticker": "AMD"}}',
        [QUOTE_A, QUOTE_B],
    ),
    # vLLM tests/tool_parsers/test_granite_tool_parser.py: Granite 3.0's token, 3.1's string;
    # neither has a closing tag
    "granite 3.0 token": (
        '<|tool_call|> [{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
        [WEATHER],
    ),
    "granite 3.1 string": (
        '<tool_call> [{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Oslo"\n  }\n}]',
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_qwen3coder_tool_parser.py: the template's layout, cut
    # where a stop sequence ended it
    "qwen3-coder without </tool_call>": (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n",
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_seed_oss_tool_parser.py
    "seed-oss without </seed:tool_call>": (
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n</function>",
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_minimax_m2_tool_parser.py
    "minimax-m2 without </minimax:tool_call>": (
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n'
        "</invoke>\n",
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_step3_tool_parser.py
    "step3 without its end tokens": (
        f'<{B}tool_calls_begin{B}>\n<{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_weather">\n'
        '<steptml:parameter name="city">Oslo</steptml:parameter>\n</steptml:invoke>',
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_deepseekv32_tool_parser.py
    "deepseek-dsml without </function_calls>": (
        f'<{DSML}function_calls>\n<{DSML}invoke name="get_weather">\n'
        f'<{DSML}parameter name="city" string="true">Oslo</{DSML}parameter>\n</{DSML}invoke>\n',
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_deepseekv3_tool_parser.py and test_deepseekv31_tool_parser.py
    "deepseek v3 without its end tokens": (
        f'{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n{{"city": "Oslo"}}\n```',
        [WEATHER],
    ),
    "deepseek v3.1 without its end tokens": (
        f'{DS_CALLS}{DS_CALL}get_weather{DS_SEP}{{"city": "Oslo"}}',
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_kimi_k2_tool_parser.py
    "kimi-k2 without <|tool_call_end|>": (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Oslo"}',
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_lfm2_tool_parser.py
    "lfm2 without <|tool_call_end|>": ('<|tool_call_start|>[get_weather(city="Oslo")]', [WEATHER]),
    # vLLM tests/tool_parsers/test_functiongemma_tool_parser.py
    "functiongemma without <end_function_call>": (
        "<start_function_call>call:get_weather{city:<escape>Oslo<escape>}",
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_internlm2_tool_parser.py
    "internlm without <|action_end|>": (
        '<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"city": "Oslo"}}',
        [WEATHER],
    ),
    # vLLM tests/tool_parsers/test_cohere_command_tool_parser.py
    "command without <|END_ACTION|>": (
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", '
        '"parameters": {"city": "Oslo"}}]',
        [WEATHER],
    ),
    # the families added since, from the same upstream tests as their cases above
    "step3 without a section or its end token": (
        f'<{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_weather">\n'
        '<steptml:parameter name="city">Oslo</steptml:parameter>\n</steptml:invoke>',
        [WEATHER],
    ),
    "gemma4 without <tool_call|>": ('<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}', [WEATHER]),
    "apertus without <|tools_suffix|>": (
        '<|tools_prefix|>[{"get_weather": {"city": "Oslo"}}]',
        [WEATHER],
    ),
    "kimi-k3 without <|close|>tools<|sep|>": (
        f'{K3}tools{K3S}{K3}call tool="get_weather" index="1"{K3S}'
        f'{K3}argument key="city" type="string"{K3S}Oslo{K3C}argument{K3S}{K3C}call{K3S}',
        [WEATHER],
    ),
    "llama python_tag without <|eom_id|>": (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}',
        [WEATHER],
    ),
    "mistral arguments at the end": ('[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}', [WEATHER]),
    "gigachat without </s>": (
        '<|function_call|>{"name": "get_weather", "arguments": {"city": "Oslo"}}',
        [WEATHER],
    ),
    "minimax-m3 without </tool_call>": (f"{M3}{m3('get_weather', city='Oslo')}", [WEATHER]),
    "deepseek-v4-dsml without </tool_calls>": (
        f'<{DSML}tool_calls>\n<{DSML}invoke name="get_weather">\n'
        f'<{DSML}parameter name="city" string="true">Oslo</{DSML}parameter>\n</{DSML}invoke>',
        [WEATHER],
    ),
}


@pytest.mark.parametrize("case", list(AT_THE_END))
def test_a_whole_call_whose_closing_tag_or_stop_token_was_taken_off_runs(case: str) -> None:
    text, expected = AT_THE_END[case]
    assert found(text) == expected
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(text)
    assert (response.call_executed, response.call_failed) == (True, False), response
    assert tools.ran == [name for name, _ in expected]


# What does not parse whole at the end of the text was cut off: nothing in it runs, and a
# body that needed a repair is not whole, though the same inside a closed tag is mended.
CUT_AT_THE_END: dict[str, str] = {
    # llama.cpp tests/test-chat.cpp, test_gpt_oss_parser: a partial call
    "gpt-oss arguments cut": (
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary"
        ' to=functions.get_weather <|constrain|>json<|message|>{"city"'
    ),
    "gpt-oss empty body": "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>",
    "gpt-oss next message before <|call|>": (
        '<|channel|>commentary to=functions.get_weather<|message|>{"city": "Oslo"}'
        "<|start|>assistant<|channel|>final<|message|>Done."
    ),
    # vLLM tests/tool_parsers/test_hermes_tool_parser.py, ..._tool_call_invalid_json
    "hermes one brace short": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}',
    "hermes single quotes": "<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Oslo'}}",
    "hermes prose after the call": (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\nand then'
    ),
    # vLLM tests/tool_parsers/test_granite_tool_parser.py, malformed_input_outputs
    "granite array open": '<|tool_call|> [{"name": "get_weather", "arguments": {',
    "granite one brace short": '<|tool_call|>{"name": "get_weather", "arguments": {"city": "Oslo"}',
    "minimax-m1 array open": '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    "minimax-m1 line cut": (
        '<tool_calls>\n{"name": "get_quote", "arguments": {"ticker": "NVDA"}}\n{"name": "get_quo'
    ),
    "qwen3-coder parameter open": "<tool_call>\n<function=get_weather>\n<parameter=city>\nOs",
    "qwen3-coder next parameter begun": (
        "<tool_call>\n<function=lookup_flight>\n<parameter=flight_no>\nLH404\n</parameter>\n"
        "<parameter=da"
    ),
    "qwen3-coder function without parameters": "<tool_call>\n<function=get_time>\n",
    "glm next key begun": (
        "<tool_call>lookup_flight\n<arg_key>flight_no</arg_key>\n<arg_value>LH404</arg_value>\n"
        "<arg_key>date</arg_key>"
    ),
    "glm name only": "<tool_call>get_time",
    "minimax-m2 next parameter begun": (
        '<minimax:tool_call>\n<invoke name="lookup_flight">\n'
        '<parameter name="flight_no">LH404</parameter>\n<parameter name="da'
    ),
    "deepseek-dsml parameter open": (
        f'<{DSML}function_calls>\n<{DSML}invoke name="get_weather">\n'
        f'<{DSML}parameter name="city" string="true">Os'
    ),
    "deepseek v3 fence open": (
        f'{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n{{"city": "Oslo"}}'
    ),
    "kimi-k2 one brace short": (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Oslo"'
    ),
    "lfm2 list open": '<|tool_call_start|>[get_weather(city="Oslo")',
    "functiongemma object open": "<start_function_call>call:get_weather{city:<escape>Oslo<escape>",
    "apertus array open": '<|tools_prefix|>[{"get_weather": {"city": "Oslo"}}',
    "minicpm5 next parameter begun": (
        '<function name="lookup_flight"><param name="flight_no">LH404</param><param name="da'
    ),
    "kimi-k3 argument open": (
        f'{K3}tools{K3S}{K3}call tool="get_weather" index="1"{K3S}'
        f'{K3}argument key="city" type="string"{K3S}Os'
    ),
    "minimax-m3 nested tag open": (
        f'{M3}{NS}<invoke name="search_docs">{NS}<query>x{NS}</query>{NS}<filters>'
        f"{NS}<tags>a{NS}</tags>"
    ),
    "gemma4 object open": '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>',
    "functionary json open": '>>>get_weather\n{"city": "Oslo"',
    # llama.cpp tests/test-chat.cpp, Functionary v3.2: python's code, cut inside a string
    "functionary python code open": ">>>python\nprint('he",
    # the families whose stop token servers take off, one brace short at the end of the text
    # (llama.cpp tests/test-chat.cpp partial Llama 3.x, Mistral and GigaChat outputs)
    "llama python_tag one brace short": (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}'
    ),
    "mistral arguments one brace short": '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"',
    "gigachat one brace short": (
        '<|function_call|>{"name": "get_weather", "arguments": {"city": "Oslo"}'
    ),
}


@pytest.mark.parametrize("case", list(CUT_AT_THE_END))
def test_a_call_that_does_not_parse_whole_at_the_end_of_the_text_is_cut_off_and_not_run(
    case: str,
) -> None:
    text = CUT_AT_THE_END[case]
    calls = detect(text, KNOWN).calls
    assert calls
    assert all(call.problem and "cut off" in call.problem for call in calls), calls
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(text)
    assert (response.call_executed, response.call_failed) == (False, True), response
    assert tools.ran == []


@pytest.mark.parametrize(
    ("case", "end"),
    [
        ("llama python_tag one brace short", "<|eom_id|>"),
        ("mistral arguments one brace short", "[TOOL_CALLS]get_time[ARGS]{}"),
        ("gigachat one brace short", "</s>"),
    ],
)
def test_the_same_brace_short_call_before_its_end_token_is_mended_and_runs(
    case: str, end: str
) -> None:
    (call, *_) = detect(CUT_AT_THE_END[case] + end, KNOWN).calls
    assert (call.name, dict(call.arguments), call.problem) == (
        "get_weather",
        {"city": "Oslo"},
        None,
    )
    assert call.healed == ("added a missing closing brace",)


@pytest.mark.parametrize("provider", list(CUT_RESPONSES))
@pytest.mark.parametrize(
    "case",
    ["gpt-oss after its analysis", "hermes at EOS", "minimax-m2 without </minimax:tool_call>"],
)
def test_a_whole_call_at_the_end_of_a_response_cut_at_the_length_limit_is_still_not_run(
    provider: str, case: str
) -> None:
    # the provider's own length signal says the model was stopped, whatever the text reads as
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(
        cut_responses(AT_THE_END[case][0])[provider]
    )
    assert (response.call_executed, response.call_failed) == (False, True), response
    assert "output limit" in (response.call_detail or "")
    assert tools.ran == []


def test_no_call_in_reasoning_runs_though_its_closing_tag_never_came() -> None:
    # the analysis channel that never ends is reasoning still: no call yet
    text = (
        "<|channel|>analysis<|message|>I will send to=functions.get_weather <|constrain|>json"
        '<|message|>{"city": "Oslo"}'
    )
    assert detect(text, KNOWN).calls == ()
    assert detect('<think>\n<tool_call>\n{"name": "get_time", "arguments": {}}', KNOWN).calls == ()


# -- each family's end: a stop token the server takes off, or text the model writes ----------

# Per family: its end marker, whether that marker is a stop token (servers take it off before
# they hand the text over) or text the model writes before its stop token, the response as a
# server hands it over when the model finished (its stop token taken off: the call runs), and
# the response cut where an end the model writes never came (the call is cut off, its problem
# naming what never came). A body that closes itself (a JSON value, a pythonic list, a fenced
# block) has said that its arguments are done, so it runs whole as written whether its
# closing tag is text or a stop token (vLLM's Hermes parser test "until EOS"); an XML invoke
# does not close itself (another parameter may follow the last closed one), so without its
# closing tag, text every XML family writes, it was cut off, however whole it reads. The
# table in docs/reference/detection-formats.md gives the source of each row.
ENDS: dict[str, tuple[str, str, str, Expected, str]] = {
    # family: (end marker, "stop" or "text", finished response, its calls, cut response)
    "harmony": (
        "<|call|>",
        "stop",
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}',
        [WEATHER],
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Os',
    ),
    "llama": (
        "<|eom_id|>",
        "stop",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}',
        [WEATHER],
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}',
    ),
    "gigachat": (
        "</s>",
        "stop",
        '<|function_call|>{"name": "get_weather", "arguments": {"city": "Oslo"}}',
        [WEATHER],
        '<|function_call|>{"name": "get_weather", "arguments": {"city": "Oslo"}',
    ),
    "internlm": (
        "<|action_end|>",
        "stop",
        '<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"city": "Oslo"}}',
        [WEATHER],
        '<|action_start|><|plugin|>\n{"name": "get_weather", "parameters": {"city": "Oslo"}',
    ),
    # no end marker of their own: the model stops on its end-of-sequence token right after the
    # arguments' JSON (Mistral's </s>, Functionary's <|eot_id|>, Granite 3's <|end_of_text|>)
    "mistral": (
        "the end of its arguments",
        "stop",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}',
        [WEATHER],
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"',
    ),
    "functionary-v3.2": (
        "the end of its arguments",
        "stop",
        '>>>get_weather\n{"city": "Oslo"}',
        [WEATHER],
        '>>>get_weather\n{"city": "Oslo"',
    ),
    "granite": (
        "the closing bracket",
        "stop",
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
        [WEATHER],
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    ),
    # text the model writes, after a body that closes itself
    "hermes": (
        "</tool_call>",
        "text",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}',
        [WEATHER],
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}',
    ),
    "kimi-k2": (
        "<|tool_call_end|>",
        "text",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Oslo"}',
        [WEATHER],
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Oslo"',
    ),
    "lfm2": (
        "<|tool_call_end|>",
        "text",
        '<|tool_call_start|>[get_weather(city="Oslo")]',
        [WEATHER],
        '<|tool_call_start|>[get_weather(city="Oslo")',
    ),
    "tool_calls-tag": (
        "</tool_calls>",
        "text",
        '<tool_calls>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}',
        [WEATHER],
        '<tool_calls>\n{"name": "get_weather", "arguments": {"city": "Oslo"}',
    ),
    "apertus": (
        "<|tools_suffix|>",
        "text",
        '<|tools_prefix|>[{"get_weather": {"city": "Oslo"}}]',
        [WEATHER],
        '<|tools_prefix|>[{"get_weather": {"city": "Oslo"}}',
    ),
    "command": (
        "<|END_ACTION|>",
        "text",
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", '
        '"parameters": {"city": "Oslo"}}]',
        [WEATHER],
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", '
        '"parameters": {"city": "Oslo"}}',
    ),
    "deepseek-v3": (
        "the tool call's end token",
        "text",
        f'{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n{{"city": "Oslo"}}\n```',
        [WEATHER],
        f'{DS_CALLS}{DS_CALL}function{DS_SEP}get_weather\n```json\n{{"city": "Oslo"}}',
    ),
    "llama4": (
        "<|python_end|>",
        "text",
        '<|python_start|>[get_weather(city="Oslo")]',
        [WEATHER],
        '<|python_start|>[get_weather(city="Oslo")',
    ),
    "functiongemma": (
        "<end_function_call>",
        "text",
        "<start_function_call>call:get_weather{city:<escape>Oslo<escape>}",
        [WEATHER],
        "<start_function_call>call:get_weather{city:<escape>Oslo<escape>",
    ),
    "gemma4": (
        "<tool_call|>",
        "text",
        '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>}',
        [WEATHER],
        '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>',
    ),
    # text the model writes, closing an XML invoke: without it, cut off whatever it holds
    "qwen3-coder": (
        "</function>",
        "text",
        "<tool_call>\n<function=lookup_flight>\n<parameter=flight_no>\nLH404\n</parameter>\n"
        "<parameter=date>\n2025-03-14\n</parameter>\n</function>\n</tool_call>",
        [FLIGHT],
        "<tool_call>\n<function=lookup_flight>\n<parameter=flight_no>\nLH404\n</parameter>\n"
        "<parameter=date>\n2025-03-14\n</parameter>\n",
    ),
    "seed-oss": (
        "</function>",
        "text",
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n</function>\n"
        "</seed:tool_call>",
        [WEATHER],
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Oslo</parameter>\n",
    ),
    "glm": (
        "</tool_call>",
        "text",
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>",
        [WEATHER],
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n",
    ),
    "minicpm5": (
        "</function>",
        "text",
        '<function name="get_weather"><param name="city">Oslo</param></function>',
        [WEATHER],
        '<function name="get_weather"><param name="city">Oslo</param>',
    ),
    "minimax-m2": (
        "</invoke>",
        "text",
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n'
        "</invoke>\n</minimax:tool_call>",
        [WEATHER],
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo</parameter>\n',
    ),
    "minimax-m3": (
        "</invoke>",
        "text",
        f"{M3}{m3('get_weather', city='Oslo')}{M3_END}",
        [WEATHER],
        f"{M3}{m3('get_weather', city='Oslo')}".removesuffix(f"{NS}</invoke>\n"),
    ),
    "step3": (
        "</steptml:invoke>",
        "text",
        f'<{B}tool_calls_begin{B}><{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_weather">'
        f'<steptml:parameter name="city">Oslo</steptml:parameter></steptml:invoke><{B}tool_call_end{B}><{B}tool_calls_end{B}>',
        [WEATHER],
        f'<{B}tool_calls_begin{B}><{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_weather">'
        '<steptml:parameter name="city">Oslo</steptml:parameter>',
    ),
    "step3-without-section": (
        "</steptml:invoke>",
        "text",
        f'<{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_weather">'
        f'<steptml:parameter name="city">Oslo</steptml:parameter></steptml:invoke><{B}tool_call_end{B}>',
        [WEATHER],
        f'<{B}tool_call_begin{B}>function<{B}tool_sep{B}><steptml:invoke name="get_weather">'
        '<steptml:parameter name="city">Oslo</steptml:parameter>',
    ),
    "deepseek-dsml": (
        f"</{DSML}invoke>",
        "text",
        f'<{DSML}function_calls>\n<{DSML}invoke name="get_weather">\n'
        f'<{DSML}parameter name="city" string="true">Oslo</{DSML}parameter>\n</{DSML}invoke>\n'
        f"</{DSML}function_calls>",
        [WEATHER],
        f'<{DSML}function_calls>\n<{DSML}invoke name="get_weather">\n'
        f'<{DSML}parameter name="city" string="true">Oslo</{DSML}parameter>\n',
    ),
    "deepseek-v4-dsml": (
        f"</{DSML}invoke>",
        "text",
        f'<{DSML}tool_calls>\n<{DSML}invoke name="get_weather">\n'
        f'<{DSML}parameter name="city" string="true">Oslo</{DSML}parameter>\n</{DSML}invoke>\n'
        f"</{DSML}tool_calls>",
        [WEATHER],
        f'<{DSML}tool_calls>\n<{DSML}invoke name="get_weather">\n'
        f'<{DSML}parameter name="city" string="true">Oslo</{DSML}parameter>\n',
    ),
    "kimi-k3": (
        f"{K3C}call{K3S}",
        "text",
        f'{K3}tools{K3S}{K3}call tool="get_weather" index="1"{K3S}'
        f'{K3}argument key="city" type="string"{K3S}Oslo{K3C}argument{K3S}{K3C}call{K3S}'
        f"{K3C}tools{K3S}",
        [WEATHER],
        f'{K3}tools{K3S}{K3}call tool="get_weather" index="1"{K3S}'
        f'{K3}argument key="city" type="string"{K3S}Oslo{K3C}argument{K3S}',
    ),
}


@pytest.mark.parametrize("family", list(ENDS))
def test_a_call_runs_when_the_server_took_only_its_stop_token_off(family: str) -> None:
    _, _, text, expected, _ = ENDS[family]
    assert found(text) == expected
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(text)
    assert (response.call_executed, response.call_failed) == (True, False), response
    assert tools.ran == [name for name, _ in expected]


@pytest.mark.parametrize("family", list(ENDS))
def test_a_call_whose_end_never_came_is_cut_off_and_says_what_never_came(family: str) -> None:
    end, _, _, _, text = ENDS[family]
    calls = detect(text, KNOWN).calls
    assert calls
    problem = f"the call was cut off ({end} never came); it was not run"
    assert all(call.problem == problem for call in calls), calls
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(text)
    assert (response.call_executed, response.call_failed) == (False, True), response
    assert f"({end} never came)" in (response.call_detail or "")
    assert tools.ran == []


# vLLM tests/tool_parsers/test_deepseekv4_tool_parser.py, test_function_calls_block_is_not_accepted:
# V4's parser takes no V3.2 function_calls block. The two are separate formats here: each
# reads only its own blocks, up to its own closing tag. The V4 test's text (V4's call with the
# block renamed) is exactly V3.2's call (tests/tool_parsers/test_deepseekv32_tool_parser.py),
# and the host does not know which model wrote it, so V3.2's format reads it.
V4_CALL = (
    f'<{DSML}tool_calls>\n<{DSML}invoke name="search_docs">\n'
    f'<{DSML}parameter name="query" string="true">vllm</{DSML}parameter>\n'
    f"</{DSML}invoke>\n</{DSML}tool_calls>"
)


def test_deepseek_v4s_format_takes_no_v3_2_function_calls_block() -> None:
    v3_2 = V4_CALL.replace("tool_calls", "function_calls")
    assert (detect(V4_CALL, KNOWN).format, found(V4_CALL)) == (
        "deepseek-v4-dsml",
        [("search_docs", {"query": "vllm"})],
    )
    assert (detect(v3_2, KNOWN).format, found(v3_2)) == (
        "deepseek-dsml",
        [("search_docs", {"query": "vllm"})],
    )


def test_two_mistral_call_lists_before_v11_are_refused_and_none_runs() -> None:
    # vLLM test_mistral_tool_parser.py, test_extract_tool_calls_pre_v11_multiple_bot_tokens_
    # raises: before tokenizer v11 one [TOOL_CALLS] starts the one list of every call
    one = '[TOOL_CALLS] [{"name": "search_docs", "arguments": {"query": "a"}}]'
    assert found(one) == [("search_docs", {"query": "a"})]
    two = one + one.replace('"a"', '"b"')
    problem = (
        "problem: [TOOL_CALLS] starts two lists of calls, where one list holds every call: "
        "which to run is a guess, so none was run"
    )
    assert found(two) == [("?", problem)]
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(two)
    assert (response.call_executed, response.call_failed, tools.ran) == (False, True, [])
    # v11's NAME[ARGS]{...} repeats [TOOL_CALLS] once per call: both run
    v11 = '[TOOL_CALLS]search_docs[ARGS]{"query": "a"}[TOOL_CALLS]search_docs[ARGS]{"query": "b"}'
    assert found(v11) == [("search_docs", {"query": "a"}), ("search_docs", {"query": "b"})]


def test_every_family_with_an_end_of_its_own_has_its_end_in_the_table() -> None:
    # the rest have no end of their own: their JSON ends them (xLAM, Phi-4-mini, Mistral's
    # array)
    assert set(CASES) - set(ENDS) == {"mistral-array", "xlam", "phi4-mini"}
    assert {kind for _, kind, *_ in ENDS.values()} == {"stop", "text"}


# -- values arrive byte-exact -----------------------------------------------------------------

OLD = "    if x:\n        return 1\n"
NEW = "\n    if x:\n        return 2\n\n"
EDIT = {"path": "a.py", "old_string": OLD, "new_string": NEW}
# Each family's template layout (and the upstream test that feeds its parser such a value):
# Qwen3-Coder and Seed-OSS write a newline after <parameter=k> and one before </parameter>,
# the one newline the parsers take off each side (vLLM tool_chat_template_qwen3coder.jinja,
# tests/tool_parsers/test_qwen3coder_tool_parser.py, test_seed_oss_tool_parser.py); GLM,
# MiniMax-M2, Step-3 and DeepSeek V3.2 write the value right after the opening tag
# (SGLang test_whitespace_preserved_in_arg_values for GLM; vLLM's fixes for MiniMax-M2,
# Qwen3 and Step-3, PRs 48846 and 49567).
EDIT_FILE: dict[str, str] = {
    "qwen3-coder": "<tool_call>\n<function=edit_file>\n<parameter=path>\na.py\n</parameter>\n"
    f"<parameter=old_string>\n{OLD}\n</parameter>\n<parameter=new_string>\n{NEW}\n</parameter>\n"
    "</function>\n</tool_call>",
    "seed-oss": "<seed:tool_call>\n<function=edit_file>\n<parameter=path>\na.py\n</parameter>\n"
    f"<parameter=old_string>\n{OLD}\n</parameter>\n<parameter=new_string>\n{NEW}\n</parameter>\n"
    "</function>\n</seed:tool_call>",
    "glm": "<tool_call>edit_file\n<arg_key>path</arg_key>\n<arg_value>a.py</arg_value>\n"
    f"<arg_key>old_string</arg_key>\n<arg_value>{OLD}</arg_value>\n"
    f"<arg_key>new_string</arg_key>\n<arg_value>{NEW}</arg_value>\n</tool_call>",
    "minimax-m2": '<minimax:tool_call>\n<invoke name="edit_file">\n<parameter name="path">a.py'
    f'</parameter>\n<parameter name="old_string">{OLD}</parameter>\n'
    f'<parameter name="new_string">{NEW}</parameter>\n</invoke>\n</minimax:tool_call>',
    "step3": f"<{B}tool_calls_begin{B}>\n<{B}tool_call_begin{B}>function<{B}tool_sep{B}>"
    '<steptml:invoke name="edit_file">\n<steptml:parameter name="path">a.py</steptml:parameter>\n'
    f'<steptml:parameter name="old_string">{OLD}</steptml:parameter>\n'
    f'<steptml:parameter name="new_string">{NEW}</steptml:parameter>\n'
    f"</steptml:invoke><{B}tool_call_end{B}>\n<{B}tool_calls_end{B}>",
    "deepseek-dsml": f'<{DSML}function_calls>\n<{DSML}invoke name="edit_file">\n'
    f'<{DSML}parameter name="path" string="true">a.py</{DSML}parameter>\n'
    f'<{DSML}parameter name="old_string" string="true">{OLD}</{DSML}parameter>\n'
    f'<{DSML}parameter name="new_string" string="true">{NEW}</{DSML}parameter>\n'
    f"</{DSML}invoke>\n</{DSML}function_calls>",
}


class Editor(MCSToolDriver):
    """``edit_file(path, old_string, new_string)``, all strings: returns its arguments."""

    meta = DriverMeta(id="editor-0001", name="Editor", version="1.0.0")

    def list_tools(self) -> list[Tool]:
        parameters = [
            ToolParameter(name=key, description=key, schema={"type": "string"})
            for key in ("path", "old_string", "new_string")
        ]
        return [Tool(name="edit_file", description="Edit a file.", parameters=parameters)]

    def execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return arguments


# The families added since, whose values are written right after the opening tag: Kimi K3's
# string arguments raw (vLLM kimi_k3_tool_parser.py), MiniCPM-5's in CDATA or as they are,
# MiniMax-M3's between its tags (vLLM _llm_nom/m3_text.py)
EDIT_FILE_SINCE: dict[str, str] = {
    "minimax-m3": f"{M3}{m3('edit_file', **EDIT)}{M3_END}",
    "kimi-k3": f'{K3}tools{K3S}{K3}call tool="edit_file" index="1"{K3S}'
    + "".join(
        f'{K3}argument key="{key}" type="string"{K3S}{value}{K3C}argument{K3S}'
        for key, value in EDIT.items()
    )
    + f"{K3C}call{K3S}{K3C}tools{K3S}",
    "minicpm5": '<function name="edit_file"><param name="path">a.py</param>'
    f'<param name="old_string">{OLD}</param>'
    f'<param name="new_string"><![CDATA[{NEW}]]></param></function>',
}


@pytest.mark.parametrize("family", list(EDIT_FILE_SINCE))
def test_a_string_value_arrives_byte_exact_in_the_families_added_since(family: str) -> None:
    text = EDIT_FILE_SINCE[family]
    assert found(text) == [("edit_file", EDIT)]
    response = Orchestrator({"editor": Editor()}).process_llm_response(text)
    assert response.call_executed, response.call_detail
    assert response.tool_call_result == EDIT


@pytest.mark.parametrize("family", list(EDIT_FILE))
def test_a_string_value_arrives_byte_exact_in_every_xml_family(family: str) -> None:
    text = EDIT_FILE[family]
    assert found(text) == [("edit_file", EDIT)]
    response = Orchestrator({"editor": Editor()}).process_llm_response(text)
    assert response.call_executed, response.call_detail
    assert response.tool_call_result == EDIT


INVOKE_CLOSING = {
    "qwen3-coder": "</function>",
    "seed-oss": "</function>",
    "minimax-m2": "</invoke>",
    "step3": "</steptml:invoke>",
    "deepseek-dsml": f"</{DSML}invoke>",
}
"""The tag that closes an invoke inside its family's block (GLM's call has none: its
``</tool_call>`` closes both)."""


@pytest.mark.parametrize("family", list(INVOKE_CLOSING))
def test_a_string_value_arrives_byte_exact_when_the_blocks_closing_tag_was_taken_off(
    family: str,
) -> None:
    # cut right after the invoke's closing tag: the same value, and a call that runs
    text = EDIT_FILE[family]
    closing = INVOKE_CLOSING[family]
    text = text[: text.rindex(closing) + len(closing)]
    assert found(text) == [("edit_file", EDIT)]
    response = Orchestrator({"editor": Editor()}).process_llm_response(text)
    assert response.call_executed, response.call_detail
    assert response.tool_call_result == EDIT


@pytest.mark.parametrize("family", list(EDIT_FILE))
def test_an_xml_call_cut_right_after_its_last_parameter_is_cut_off_and_not_run(
    family: str,
) -> None:
    # every parameter is whole, but the invoke's closing tag is text the model writes before
    # its stop token: another parameter may have followed, so the call is not run
    text = EDIT_FILE[family]
    last = max(text.rfind("</parameter>"), text.rfind("</arg_value>"))
    last = max(last, text.rfind(f"</{DSML}parameter>"), text.rfind("</steptml:parameter>"))
    text = text[: text.index(">", last) + 1]
    ((name, problem),) = found(text)
    assert name == "edit_file"
    assert problem.startswith("problem: the call was cut off (")
    response = Orchestrator({"editor": Editor()}).process_llm_response(text)
    assert (response.call_executed, response.call_failed) == (False, True), response


# -- the shapes the upstream parser tests write, read as those tests expect -------------------

# Each row is a model output in the shape the cited upstream test feeds its parser (the
# format reproduced as data, our tools' names and arguments), and the calls that test expects.
STEP3_CALL = f"<{B}tool_call_begin{B}>"
STEP3_END = f"<{B}tool_call_end{B}><{B}tool_calls_end{B}>"
STEP3_CALLS = f"<{B}tool_calls_begin{B}>{STEP3_CALL}"
G = "\u0120"  # Ġ: a byte-level tokenizer's space
UPSTREAM: dict[str, tuple[str, Expected]] = {
    # vLLM tests/tool_parsers/test_step3_tool_parser.py, TestStep3ToolParser: the invoke right
    # after <|tool_call_begin|> (bars U+FF5C), no function<|tool_sep|> before it
    "step3 single_tool_call_output": (
        f'{STEP3_CALLS}<steptml:invoke name="get_weather">'
        f'<steptml:parameter name="city">Oslo</steptml:parameter></steptml:invoke>{STEP3_END}',
        [WEATHER],
    ),
    "step3 parallel_tool_calls_output": (  # a <|tool_sep|> between the two calls
        f'{STEP3_CALLS}<steptml:invoke name="get_weather">'
        f'<steptml:parameter name="city">Oslo</steptml:parameter></steptml:invoke>'
        f"<{B}tool_call_end{B}><{B}tool_sep{B}>{STEP3_CALL}"
        f'<steptml:invoke name="get_quote"><steptml:parameter name="ticker">NVDA'
        f"</steptml:parameter></steptml:invoke>{STEP3_END}",
        [WEATHER, QUOTE_A],
    ),
    "step3 various_data_types_output": (
        f'{STEP3_CALLS}<steptml:invoke name="search_docs">'
        '<steptml:parameter name="query">hello</steptml:parameter>'
        '<steptml:parameter name="top_k">42</steptml:parameter>'
        '<steptml:parameter name="ratio">3.14</steptml:parameter>'
        '<steptml:parameter name="exact">true</steptml:parameter>'
        '<steptml:parameter name="cursor">null</steptml:parameter>'
        '<steptml:parameter name="tags">["a", "b", "c"]</steptml:parameter>'
        '<steptml:parameter name="filters">{"nested": "value"}</steptml:parameter>'
        f"</steptml:invoke>{STEP3_END}",
        [
            (
                "search_docs",
                {
                    "query": "hello",
                    "top_k": 42,
                    "ratio": 3.14,
                    "exact": True,
                    "cursor": None,
                    "tags": ["a", "b", "c"],
                    "filters": {"nested": "value"},
                },
            )
        ],
    ),
    "step3 empty_arguments_output": (
        f'{STEP3_CALLS}<steptml:invoke name="get_time"></steptml:invoke>{STEP3_END}',
        [("get_time", {})],
    ),
    "step3 surrounding_text_output": (
        f'Let me check.\n\n{STEP3_CALLS}<steptml:invoke name="get_weather">'
        f'<steptml:parameter name="city">Oslo</steptml:parameter></steptml:invoke>{STEP3_END}'
        "\n\nOne moment.",
        [WEATHER],
    ),
    "step3 escaped_strings_output": (
        f'{STEP3_CALLS}<steptml:invoke name="search_docs">'
        '<steptml:parameter name="query">He said "hello"</steptml:parameter>'
        '<steptml:parameter name="path">C:\\Users\\file.txt</steptml:parameter>'
        '<steptml:parameter name="lines">line1\nline2</steptml:parameter>'
        f"</steptml:invoke>{STEP3_END}",
        [
            (
                "search_docs",
                {
                    "query": 'He said "hello"',
                    "path": "C:\\Users\\file.txt",
                    "lines": "line1\nline2",
                },
            )
        ],
    ),
    # ... malformed_input_outputs: an invoke cut off, and one with neither the section nor
    # function<|tool_sep|> (no call: vLLM's parser reads none from it either)
    "step3 malformed, invoke cut off": (
        f'{STEP3_CALLS}<steptml:invoke name="get_weather">',
        [
            (
                "get_weather",
                "problem: the call was cut off (</steptml:invoke> never came); it was not run",
            )
        ],
    ),
    "step3 malformed, no section and no separator": (
        f'{STEP3_CALL}<steptml:invoke name="get_time"></steptml:invoke><{B}tool_call_end{B}>',
        [],
    ),
    # vLLM tests/tool_parsers/test_minicpm5xml_tool_parser.py: the tokenizer's Ġ for the space
    # inside a tag (test_tokenizer_space_marker), tags whose space is gone
    # (test_collapsed_function_and_param_tags), both at once
    # (test_collapsed_param_tags_with_tokenizer_space_function)
    "minicpm5 tokenizer space marker": (
        f'<function{G}name="get_weather"><param{G}name="city">Oslo</param>'
        f'<param{G}name="date">2025-03-14</param></function>\n',
        [("get_weather", {"city": "Oslo", "date": "2025-03-14"})],
    ),
    "minicpm5 collapsed tags": (
        '<functionname="get_weather"><paramname="city">Oslo</param>'
        '<paramname="date">2025-03-14</param></function>\n',
        [("get_weather", {"city": "Oslo", "date": "2025-03-14"})],
    ),
    "minicpm5 collapsed params, Ġ in the function tag": (
        f'<function{G}name="get_weather"><paramname="city">Oslo</param>'
        '<paramname="date">2025-03-14</param></function>\n',
        [("get_weather", {"city": "Oslo", "date": "2025-03-14"})],
    ),
    # ... the arguments in one parameter named properties, written with Python's quotes
    # (test_properties_wrapped_arguments), or named arguments (test_arguments_wrapped_arguments)
    "minicpm5 properties wrapper": (
        "<function name=\"lookup_flight\"><param name=\"properties\">{'flight_no': 'LH404'}"
        "</param></function>",
        [("lookup_flight", {"flight_no": "LH404"})],
    ),
    "minicpm5 arguments wrapper": (
        '<function name="get_weather"><param name="arguments">'
        '{"city": "Oslo", "date": "2025-03-14"}</param></function>',
        [("get_weather", {"city": "Oslo", "date": "2025-03-14"})],
    ),
    # llama.cpp tests/test-chat.cpp, the Hermes 2 Pro parse tests: the function's name as an
    # attribute, its JSON arguments as the body
    "hermes 2 pro function name attribute": (
        '<function name="get_weather">\n{"city": "Oslo"}\n</function>',
        [WEATHER],
    ),
    # llama.cpp tests/test-chat.cpp, the Functionary v3.2 parse tests: python's code as it is
    # (message_assist_call_python_lines), and whitespace after the arguments
    "functionary python code": (
        ">>>python\n# This is a program:\nprint('hey')",
        [("python", {"code": "# This is a program:\nprint('hey')"})],
    ),
    "functionary whitespace after the arguments": (
        '>>>get_weather\n{"city": "Oslo"} \n                    ',
        [WEATHER],
    ),
    # SGLang test/registered/function_call/test_glm47_moe_detector.py,
    # test_array_argument_with_escaped_json: the array as a JSON string's inside, its quotes
    # escaped, no quotes around it ("raw string escaped JSON")
    "glm array as escaped json": (
        '<tool_call>search_docs<arg_key>filters</arg_key><arg_value>[{\\"id\\": \\"1\\", '
        '\\"task\\": \\"Check the backend\\", \\"status\\": \\"in_progress\\"}]</arg_value>\n'
        "</tool_call>",
        [
            (
                "search_docs",
                {"filters": [{"id": "1", "task": "Check the backend", "status": "in_progress"}]},
            )
        ],
    ),
    # ... the same test's raw string: a literal backslash-n after the name and after the key
    "glm raw string with literal backslash-n": (
        '<tool_call>search_docs\\n<arg_key>filters</arg_key>\\n<arg_value>[{\\"id\\": '
        '\\"1\\"}]</arg_value>\n</tool_call>',
        [("search_docs", {"filters": [{"id": "1"}]})],
    ),
    # llama.cpp tests/test-chat.cpp, Qwen3-Coder, "parallel, first without <tool_call>": the
    # first function closed by a </tool_call> whose opening tag was left out
    "qwen3-coder first call without <tool_call>": (
        "<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
        "</tool_call>\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
        [WEATHER, ("get_time", {})],
    ),
    # SGLang test_function_call_parser.py, TestQwen3CoderDetector,
    # test_parse_streaming_multiple_tools: every line of the block indented by 8 spaces
    "qwen3-coder indented block": (
        "<tool_call>\n        <function=get_weather>\n        <parameter=city>\n        Oslo\n"
        "        </parameter>\n        </function>\n        </tool_call>\n        Then:\n"
        "        <tool_call>\n        <function=search_docs>\n        <parameter=query>\n"
        "        a\n          b\n        </parameter>\n        <parameter=filters>\n"
        '        {"year": 2024}\n        </parameter>\n        </function>\n        </tool_call>',
        [WEATHER, ("search_docs", {"query": "a\n  b", "filters": {"year": 2024}})],
    ),
    # llama.cpp tests/test-chat.cpp, Kimi-K2-Thinking, "real life: execute_command, no end
    # markers": no section, no end marker, the JSON whole
    "kimi k2 without its section": (
        '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Oslo"}',
        [WEATHER],
    ),
    # llama.cpp tests/test-chat.cpp, LLM-jp-4.1-8b-thinking, "recipient in channel header",
    # "recipient in role header", "two calls separated by <|end|>": a space after each token
    "llm-jp harmony, recipient in the channel": (
        '<|channel|> commentary to=functions.get_weather<|message|> {"city": "Oslo"}',
        [WEATHER],
    ),
    "llm-jp harmony, two calls in role headers": (
        "<|channel|> analysis<|message|> I'm\nthinking<|end|><|start|> assistant "
        "to=functions.get_weather<|channel|> commentary <|constrain|>  json<|message|> "
        '{"city": "Oslo"}<|end|><|start|> assistant to=functions.get_time<|channel|> '
        "commentary <|constrain|>  json<|message|> {}",
        [WEATHER, ("get_time", {})],
    ),
    # llama.cpp tests/test-chat.cpp, gpt-oss-120b, "recipient in the role header", "analysis
    # then call": a message to functions.NAME is a call whatever its channel
    "gpt-oss call in the analysis channel, recipient in the role": (
        ' to=functions.get_weather<|channel|>analysis<|message|>{"city": "Oslo"}',
        [WEATHER],
    ),
    "gpt-oss analysis, then a call in the analysis channel": (
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant"
        ' to=functions.get_weather<|channel|>analysis<|message|>{"city": "Oslo"}',
        [WEATHER],
    ),
    # llama.cpp tests/test-chat.cpp, muse-glimmer, "call as the first message", "inform then
    # act": the first header without the prompt's <|start|>assistant; a message to=user first
    "glimmer call as the first message": (
        ' to=get_weather<|message|><atem:function_calls>\n<atem:invoke name="get_weather">\n'
        '<atem:parameter name="city">Oslo</atem:parameter>\n</atem:invoke>\n'
        "</atem:function_calls>",
        [WEATHER],
    ),
    "glimmer inform then act": (
        " to=user<|message|>Hello, world!\nWhat's up?<|eom|><|start|>assistant to=get_weather"
        '<|message|><atem:function_calls>\n<atem:invoke name="get_weather">\n'
        '<atem:parameter name="city">Oslo</atem:parameter>\n</atem:invoke>\n'
        "</atem:function_calls>",
        [WEATHER],
    ),
    # ... "plain answer", "markup quoted in an answer", "markup inside the analysis channel":
    # markup in a message to=user or to=self is no call
    "glimmer plain answer": (" to=user<|message|>Hello, world!\nWhat's up?<|eot|>", []),
    "glimmer markup quoted in an answer": (
        ' to=user<|message|>You invoke it like this:\n<atem:function_calls>\n<atem:invoke name="'
        'get_weather">\n<atem:parameter name="city">Oslo</atem:parameter>\n</atem:invoke>\n'
        "</atem:function_calls><|eot|>",
        [],
    ),
    "glimmer markup inside the analysis channel": (
        ' to=self<|message|>I could use <atem:function_calls>\n<atem:invoke name="get_weather">'
        '\n<atem:parameter name="city">Oslo</atem:parameter>\n</atem:invoke>\n'
        "</atem:function_calls> here<|eom|><|start|>assistant to=user<|message|>Hello!<|eot|>",
        [],
    ),
    # Ollama tools/tools_test.go, TestParser, deepseek: the template's ASCII bars with U+2581
    "deepseek with ascii bars": (
        f"<|tool{U}calls{U}begin|><|tool{U}call{U}begin|>function<|tool{U}sep|>get_weather\n"
        f'```json\n{{"city": "Oslo"}}\n```<|tool{U}call{U}end|><|tool{U}calls{U}end|>',
        [WEATHER],
    ),
}


@pytest.mark.parametrize("case", list(UPSTREAM))
def test_each_shape_an_upstream_parser_test_writes_is_read_as_that_test_expects(case: str) -> None:
    text, expected = UPSTREAM[case]
    assert found(text) == expected


@pytest.mark.parametrize(
    "case",
    [
        "step3 single_tool_call_output",
        "step3 parallel_tool_calls_output",
        "minicpm5 collapsed tags",
        "minicpm5 properties wrapper",
        "hermes 2 pro function name attribute",
        "glm array as escaped json",
        "gpt-oss call in the analysis channel, recipient in the role",
        "gpt-oss analysis, then a call in the analysis channel",
        "glimmer call as the first message",
        "glimmer inform then act",
    ],
)
def test_an_upstream_shape_runs_through_the_orchestrator(case: str) -> None:
    text, expected = UPSTREAM[case]
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(text)
    assert (response.call_executed, response.call_failed) == (True, False), response
    assert tools.ran == [name for name, _ in expected]


def test_a_glm_value_written_as_an_escaped_json_strings_inside_is_typed_by_the_schema() -> None:
    # SGLang's test_array_argument_with_escaped_json: an array where the schema takes one, an
    # object likewise; a string parameter gets the text as written, backslashes and all
    text = (
        '<tool_call>search<arg_key>tags</arg_key><arg_value>[\\"a\\", \\"b\\"]</arg_value>'
        '<arg_key>filters</arg_key><arg_value>{\\"year\\": 2024}</arg_value>'
        '<arg_key>note</arg_key><arg_value>[\\"x\\"]</arg_value></tool_call>'
    )
    response = Orchestrator({"search": Search()}).process_llm_response(text)
    assert response.call_executed, response.call_detail
    assert response.tool_call_result == {
        "tags": ["a", "b"],
        "filters": {"year": 2024},
        "note": '[\\"x\\"]',
    }


def test_minicpm5_keeps_a_tokenizer_space_inside_a_value_as_written() -> None:
    # only the tags' heads are mended: a value is the model's text, byte for byte
    text = f'<function{G}name="search_docs"><param{G}name="query">a{G}b</param></function>'
    assert found(text) == [("search_docs", {"query": f"a{G}b"})]


# Where the host reads differently from the upstream test, on purpose (each reason is in
# docs/reference/detection-formats.md): what runs is never more than what the model wrote,
# never a tool it did not name, and never a call whose end was cut off or that nothing marks.
DIFFERS: dict[str, tuple[str, Expected]] = {
    # vLLM test_minicpm5xml_tool_parser.py, test_extra_arguments_ignored_when_required_present:
    # vLLM drops the parameter the tool does not take and runs; here the call keeps it, and
    # the tool's schema refuses it with a retry prompt
    "minicpm5 extra argument": (
        '<function name="get_weather"><param name="city">Oslo</param>'
        '<param name="unknown">ignored</param></function>',
        [("get_weather", {"city": "Oslo", "unknown": "ignored"})],
    ),
    # ... test_wrapped_arguments_still_validate_schema: the wrapper's keys are the arguments,
    # which the schema refuses (vLLM: no call either)
    "minicpm5 wrapper of unknown arguments": (
        '<function name="get_weather"><param name="properties">{"unknown": "x"}</param></function>',
        [("get_weather", {"unknown": "x"})],
    ),
    # ... an empty wrapper is no arguments either way (vLLM: no call); the schema refuses it
    "minicpm5 empty wrapper": (
        '<function name="get_weather"><param name="properties">{}</param></function>',
        [("get_weather", {"properties": {}})],
    ),
    # ... test_alias_get_details_by_phone: vLLM runs another tool than the one named
    "minicpm5 tool name not on offer": (
        '<function name="get_details_by_phone"><param name="phone_number">555-123-2002</param>'
        "</function>",
        [("get_details_by_phone", {"phone_number": "555-123-2002"})],
    ),
    # llama.cpp tests/test-chat-peg-parser-minicpm5.cpp, "stripped tags": a server took the
    # special tokens <function, <param and the closing tags off; nothing marks the call
    "minicpm5 stripped tags": (' name="get_weather"> name="city">Oslo', []),
    # llama.cpp tests/test-chat.cpp, Functionary v3.2: the text after a generation prompt that
    # ended with >>>, so the first header is not in the response; nothing marks the call
    "functionary without its first >>>": ('get_weather\n{"city": "Oslo"} \n    ', []),
    "functionary python code without its first >>>": (
        "python\n# This is a program:\nprint('hey')",
        [],
    ),
    # vLLM tests/tool_parsers/test_apertus_tool_parser.py, test_incomplete_tool_call: the
    # arguments closed, then the text ends inside the call and the list; vLLM runs it
    "apertus cut off after its last argument": (
        '<|tools_prefix|>[{"get_weather": {"city": "Oslo"}',
        [
            (
                "get_weather",
                "problem: the call was cut off (<|tools_suffix|> never came); it was not run",
            )
        ],
    ),
    # llama.cpp tests/test-chat.cpp, Kimi-K2-Thinking, "calls inside an unclosed <think>":
    # llama.cpp ends the reasoning at the section marker; here a <think> never closed is
    # reasoning still, and nothing in it runs
    "kimi k2 calls inside an unclosed think": (
        "<think>I need to call it<|tool_calls_section_begin|><|tool_call_begin|>"
        'functions.get_weather:0<|tool_call_argument_begin|>{"city": "Oslo"}<|tool_call_end|>'
        "<|tool_calls_section_end|>",
        [],
    ),
    # vLLM test_kimi_k2_tool_parser.py, test_bare_counter_multiple_tools_infers_by_args: vLLM
    # picks the tool whose parameters match the argument names; here a bare counter with more
    # than one tool on offer names none, and the call fails
    "kimi k2 bare counter, tool inferred from the arguments": (
        "<|tool_calls_section_begin|><|tool_call_begin|>0 <|tool_call_argument_begin|>"
        '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>',
        [
            (
                "?",
                "problem: the call's id '0' names no tool and 5 tools are on offer: give it "
                "as functions.NAME:0",
            )
        ],
    ),
}


@pytest.mark.parametrize("case", list(DIFFERS))
def test_where_the_host_reads_otherwise_than_upstream_nothing_runs(case: str) -> None:
    text, expected = DIFFERS[case]
    assert found(text) == expected
    tools = Recorder()
    response = Orchestrator({"tools": tools}).process_llm_response(text)
    assert not response.call_executed, response
    assert response.call_failed == bool(expected), response
    assert tools.ran == []
