"""Orchestration: read a model's response, run the tool calls it holds, and answer them."""
