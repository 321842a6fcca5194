"""Native streams: a provider's stream events -> the final object ``process_llm_response`` takes.

:class:`OpenAIChatStream` adds up OpenAI Chat Completions chunks (``stream=True``),
:class:`ResponsesStream` OpenAI Responses events and :class:`AnthropicStream` Anthropic
Messages events: ``add`` each chunk or event as it arrives (a mapping or the SDK's object, read
as :mod:`.native` reads them), then ``result`` is the whole response in the provider's shape,
for :mod:`.native` to read. They gather only; showing text as it comes is
:class:`~mcs_host.orchestration.streaming.TextStream`'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .native import as_mapping

__all__ = ["AnthropicStream", "OpenAIChatStream", "ResponsesStream"]


class OpenAIChatStream:
    """Chat Completions chunks (``stream=True``) -> the ``ChatCompletion`` they add up to."""

    __slots__ = ("_content", "_finish", "_id", "_model", "_tools")

    def __init__(self) -> None:
        self._content: list[str] = []
        self._tools: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._id = ""
        self._model = ""

    def add(self, chunk: Mapping[str, Any] | Any) -> None:
        data = as_mapping(chunk)
        self._id = data.get("id", self._id)
        self._model = data.get("model", self._model)
        for choice in data.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self._content.append(delta["content"])
            for piece in delta.get("tool_calls") or ():
                call = self._tools.setdefault(
                    piece.get("index", len(self._tools)),
                    {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if piece.get("id"):
                    call["id"] = piece["id"]
                function = piece.get("function") or {}
                if function.get("name"):
                    call["function"]["name"] += function["name"]
                if function.get("arguments"):
                    call["function"]["arguments"] += function["arguments"]
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]

    def result(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content) or None}
        if self._tools:
            message["tool_calls"] = [self._tools[i] for i in sorted(self._tools)]
        return {
            "id": self._id,
            "object": "chat.completion",
            "model": self._model,
            "created": 0,
            "choices": [{"index": 0, "message": message, "finish_reason": self._finish or "stop"}],
        }


class ResponsesStream:
    """Responses API stream events -> the response's output items."""

    __slots__ = ("_completed", "_items")

    def __init__(self) -> None:
        self._items: dict[int, dict[str, Any]] = {}
        self._completed: dict[str, Any] | None = None

    def add(self, event: Mapping[str, Any] | Any) -> None:
        data = as_mapping(event)
        kind = data.get("type")
        index = data.get("output_index", 0)
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = dict(data.get("item") or {})
            if kind == "response.output_item.added" and item.get("type") == "function_call":
                item.setdefault("arguments", "")
            self._items[index] = item
        elif kind == "response.function_call_arguments.delta":
            item = self._items.setdefault(index, {"type": "function_call", "arguments": ""})
            item["arguments"] = item.get("arguments", "") + data.get("delta", "")
        elif kind == "response.function_call_arguments.done":
            self._items.setdefault(index, {"type": "function_call"})["arguments"] = data.get(
                "arguments", ""
            )
        elif kind == "response.completed":
            self._completed = dict(data.get("response") or {})

    def result(self) -> dict[str, Any]:
        if self._completed is not None and self._completed.get("output"):
            return self._completed
        return {"object": "response", "output": [self._items[i] for i in sorted(self._items)]}


class AnthropicStream:
    """Messages API stream events -> the ``Message`` they add up to."""

    __slots__ = ("_blocks", "_json", "_message")

    def __init__(self) -> None:
        self._message: dict[str, Any] = {"type": "message", "role": "assistant", "content": []}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}

    def add(self, event: Mapping[str, Any] | Any) -> None:
        data = as_mapping(event)
        kind = data.get("type")
        if kind == "message_start":
            self._message.update(
                {k: v for k, v in (data.get("message") or {}).items() if k != "content"}
            )
        elif kind == "content_block_start":
            self._blocks[data["index"]] = dict(data.get("content_block") or {})
        elif kind == "content_block_delta":
            block = self._blocks.setdefault(data["index"], {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                self._json.setdefault(data["index"], []).append(delta.get("partial_json", ""))
        elif kind == "message_delta":
            self._message.update(data.get("delta") or {})

    def result(self) -> dict[str, Any]:
        content = []
        for index in sorted(self._blocks):
            block = dict(self._blocks[index])
            if block.get("type") == "tool_use" and index in self._json:
                raw = "".join(self._json[index])
                try:
                    block["input"] = json.loads(raw) if raw else {}
                except ValueError:
                    block["input"] = raw  # unreadable or cut off: detection says which
            content.append(block)
        return {**self._message, "content": content}
