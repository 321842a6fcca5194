"""A driver's settings as its constructor gets them: relative paths made the config file's.

A setting read from a configuration file is resolved against that file's directory
(``DriverSettings.relative_to``) when the constructor types the parameter as a path
(``pathlib.Path``, ``os.PathLike``, or a union holding one), so a client that starts the host
in another directory reaches the same files. A parameter typed ``str`` is given the text as
written: the host does not guess from a name or a value which text is a path.
"""

from __future__ import annotations

import inspect
import os
import pathlib
import re
import types
import typing
from typing import Any

from .config_schema import DriverSettings

__all__: list[str] = []  # used by mcs_host.loading.stages; nothing public

_PATH_WORDS = re.compile(r"\b(?:PathLike|PurePath|Path|PosixPath|WindowsPath|StrPath)\b")
"""A path type named in an annotation that cannot be evaluated (a string annotation)."""


def resolved_settings(obj: object, settings: DriverSettings) -> dict[str, Any]:
    """The constructor arguments of ``settings``, each relative path given to a path-typed
    parameter of ``obj`` joined to the directory ``relative_to`` names for it (``~``
    expanded first)."""
    kwargs = dict(settings.settings)
    if not settings.relative_to:
        return kwargs
    typed = path_parameters(obj)
    for key, directory in settings.relative_to.items():
        value = kwargs.get(key)
        if key in typed and isinstance(value, str) and value:
            expanded = os.path.expanduser(value)
            kwargs[key] = expanded if os.path.isabs(expanded) else os.path.join(directory, value)
    return kwargs


def path_parameters(obj: object) -> frozenset[str]:
    """The names of ``obj``'s parameters typed as a path; none when it has no signature."""
    if not callable(obj):
        return frozenset()
    try:
        signature = inspect.signature(obj, eval_str=True)
    except Exception:  # an annotation naming what its module cannot resolve
        try:
            signature = inspect.signature(obj)
        except (TypeError, ValueError):
            return frozenset()
    return frozenset(
        name for name, parameter in signature.parameters.items() if _is_path(parameter.annotation)
    )


def _is_path(annotation: object) -> bool:
    if isinstance(annotation, str):
        return _PATH_WORDS.search(annotation) is not None
    if annotation is os.PathLike or typing.get_origin(annotation) is os.PathLike:
        return True
    if isinstance(annotation, type):
        return issubclass(annotation, (os.PathLike, pathlib.PurePath))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_path(arg) for arg in typing.get_args(annotation))
    return False
