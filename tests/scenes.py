"""Scenes: a venv with the host and fixture distributions installed, and the files its tests use.

A module's scene fixture returns a :class:`Scene`, or a frozen subclass of it that names the
module's own files as typed fields (a registry, a configuration, a marker...). Every run of the
installed ``mcs-host`` goes through :meth:`Scene.host` (a finished command) or
:meth:`Scene.start` (a running one), so the environment a command sees is written once: the
venv's ``bin`` first on ``PATH``, the host's state under the scene (or the directory given),
and a HOME the test chose, never the developer's.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from distbuild import Venv

__all__ = ["MarkedScene", "Scene", "SealedScene"]


@dataclass(frozen=True)
class Scene:
    """A venv built by a fixture in ``root``."""

    root: Path
    venv: Venv

    def environment(self, *, home: Path | None = None, state: Path | None = None) -> dict[str, str]:
        """What a command started by a client (an MCP client's stdio, a Popen) is given:
        only the venv's ``bin`` and the system's on ``PATH``, the state directory (default:
        ``root/state``) and HOME (default: ``root``)."""
        return {
            "PATH": f"{self.venv.bin}{os.pathsep}/usr/bin{os.pathsep}/bin",
            "MCS_HOST_STATE_DIR": str(state or self.root / "state"),
            "HOME": str(home or self.root),
        }

    def host(
        self,
        *args: str | Path,
        home: Path | None = None,
        state: Path | None = None,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``mcs-host ARGS`` run to its end in ``cwd`` (default: the venv's directory), as
        :meth:`Venv.run` runs it; ``home`` and ``state`` set HOME and the state directory,
        ``env`` adds variables. Never raises."""
        given = dict(env or {})
        if home is not None:
            given["HOME"] = str(home)
        if state is not None:
            given["MCS_HOST_STATE_DIR"] = str(state)
        return self.venv.run("mcs-host", *args, env=given, cwd=cwd)

    def start(
        self,
        *args: str | Path,
        home: Path | None = None,
        state: Path | None = None,
        env: Mapping[str, str] | None = None,
        stdin: int | None = subprocess.DEVNULL,
        output: int | None = subprocess.DEVNULL,
    ) -> subprocess.Popen[str]:
        """``mcs-host ARGS`` running in ``root`` with :meth:`environment` and ``env`` as its
        whole environment; its stdin is ``stdin`` (default: none), its stdout and stderr go
        to ``output`` (default: discarded; ``subprocess.PIPE`` to read them)."""
        return subprocess.Popen(
            [str(self.venv.bin / "mcs-host"), *map(str, args)],
            stdin=stdin,
            stdout=output,
            stderr=output,
            text=True,
            env={**self.environment(home=home, state=state), **(env or {})},
            cwd=self.root,
        )


@dataclass(frozen=True)
class MarkedScene(Scene):
    """A scene whose fixture drivers append a line to ``marker`` when their code runs."""

    marker: Path

    def ran(self) -> list[str]:
        """The lines the drivers' code wrote since the last call (the marker is cleared)."""
        lines = self.marker.read_text().splitlines() if self.marker.exists() else []
        self.marker.unlink(missing_ok=True)
        return lines


@dataclass(frozen=True)
class SealedScene(Scene):
    """A scene whose commands get :meth:`~Scene.environment` (a subclass's override, say a
    local index's pip settings) as their whole environment, nothing of the test's own, and
    no stdin."""

    timeout: ClassVar[float] = 300

    def host(
        self,
        *args: str | Path,
        home: Path | None = None,
        state: Path | None = None,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``mcs-host ARGS`` run to its end in ``cwd`` (default: ``root``) with
        :meth:`~Scene.environment` and ``env``; at most :attr:`timeout` seconds."""
        return subprocess.run(
            [str(self.venv.bin / "mcs-host"), *map(str, args)],
            capture_output=True,
            text=True,
            env={**self.environment(home=home, state=state), **(env or {})},
            cwd=cwd or self.root,
            stdin=subprocess.DEVNULL,
            timeout=self.timeout,
            check=False,
        )
