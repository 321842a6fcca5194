"""Verified drivers as the tools of agent frameworks: PydanticAI, the OpenAI Agents SDK,
LangChain and ``llm``; each adapter imports its framework only when used."""
