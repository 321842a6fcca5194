"""The built-in text formats, one module per model family; :data:`BUILTIN` is all of them in
the order they are tried (:attr:`~mcs_host.orchestration.calls.TextFormat.order`)."""

from __future__ import annotations

from mcs_host.orchestration.calls import TextFormat

from . import dsl, hermes, llama, mistral, phi, pythonic

__all__: list[str] = []  # the formats reach users through TextFormats

BUILTIN: tuple[TextFormat, ...] = tuple(
    sorted(
        (
            *hermes.FORMATS,
            *llama.FORMATS,
            *mistral.FORMATS,
            *phi.FORMATS,
            *dsl.FORMATS,
            *pythonic.FORMATS,
        ),
        key=lambda f: (f.order, f.name),
    )
)
