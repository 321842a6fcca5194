"""The built-in text formats, one module per model family; :data:`BUILTIN` is all of them in
the order they are tried (:attr:`~mcs_host.orchestration.calls.TextFormat.order`)."""

from __future__ import annotations

from mcs_host.orchestration.calls import TextFormat

from . import (
    apertus,
    cohere,
    deepseek,
    dsl,
    functionary,
    gemma,
    gigachat,
    glimmer,
    granite,
    harmony,
    hermes,
    internlm,
    kimi,
    lfm2,
    llama,
    minicpm,
    minimax,
    mistral,
    phi,
    pythonic,
    seed,
)

__all__: list[str] = []  # the formats reach users through TextFormats

BUILTIN: tuple[TextFormat, ...] = tuple(
    sorted(
        (
            format_
            for family in (
                hermes,
                seed,
                llama,
                deepseek,
                kimi,
                harmony,
                glimmer,
                minimax,
                lfm2,
                gemma,
                granite,
                internlm,
                cohere,
                gigachat,
                mistral,
                phi,
                dsl,
                pythonic,
                apertus,
                minicpm,
                functionary,
            )
            for format_ in family.FORMATS
        ),
        key=lambda f: (f.order, f.name),
    )
)
