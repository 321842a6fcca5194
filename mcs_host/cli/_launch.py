"""The ``mcs-host`` console script.

Before it imports anything else, the command line locks the process down: the import gate
(:mod:`mcs_host.trust._gate`) lets it run only the standard library, the host's own installation
and what the host verifies or its policy allows, so a module planted in site-packages under
a name some library probes for (``nt``, ``_winapi``, ``org``, ``bcrypt``...) never runs; and
the unsafe first ``sys.path`` entry (the script's directory, or the current directory under
``python -m``) is dropped unless the host itself was loaded from it. ``mcs-host check``, which
runs a driver's code on purpose, is not locked down. Before even that, a command that
promises something on stdout (``--json``, ``serve`` on stdio) claims it (:mod:`._stdout`):
descriptor 1 goes to stderr for the rest of the process, and only the command's document or
protocol reaches the real stdout.

``mcs-host list --no-verify`` with only ``--json`` and ``--path`` besides is answered here
from metadata, without importing typer or pydantic (together ~70 ms, more than the listing
itself); ``mcs-host --version`` is answered before anything is imported, and ``mcs-host
version`` once the process is locked down (it imports the standard library's ``platform``
alone). Every other command line, including anything ``list`` would reject, goes to
:mod:`mcs_host.cli`.

A command that runs drivers' or a server's code (``call``, ``run``, ``load``, ``tools``,
``serve``, ``verify --live``, ``check``, and the child hosts ``serve --isolated`` and
``run-server``) keeps what they start within its reach on Linux (:func:`_contain`): the process
becomes a child subreaper, so what they orphan (a daemon that called ``setsid``) is handed
to it, and every process left below it is ended when it exits, by an exception, SIGTERM or
SIGHUP. Only this process: an application that loads drivers through the API is never made
one.

Before all of that, the serve token (``MCS_HOST_SERVE_TOKEN``) is taken out of the
environment, ``/proc/PID/environ`` included (:mod:`._secrets`), whatever the command.

``fork-server FD`` (started by a host, never by a user) is the host's fork server
(:mod:`._forkserver`), locked down as ``serve`` is; each child it forks goes on here as the
command line the host gave it (``serve --isolated LABEL``), as if started with it.
"""

import os
import sys

from ._secrets import TOKEN_VARIABLE, withhold
from ._stdout import claim, write_document

# no ``from __future__ import annotations``: that imports the __future__ module, which under
# ``python -m mcs_host`` would be looked for in the current directory first

__all__ = ["main"]

_RUNS_DRIVER_CODE = frozenset({"check"})
"""Commands that import a driver's code on purpose, outside the trust pipeline."""
_CONTAINS = frozenset({"call", "run", "load", "tools", "serve", "run-server", "check"})
"""Commands that run drivers' (or a server's) code, and end what it started when they exit
(``verify`` too, with ``--live``)."""
_EXTRAS = {"serve": ("mcp",), "run-server": ("mcp",), "fork-server": ("mcp",)}
"""The host's extras a command needs from its start: their installed requirements count as
the host's own in that command's process (a load grants ``mcp`` too, once it mounts a driver
over MCP)."""


_parent: "int | None" = None
"""This process's parent when the command line began (a child host compares it with its
parent now, to tell whether the host that started it has died)."""


def parent_at_start() -> "int | None":
    """The parent this process had when :func:`main` began (None: not run by it)."""
    return _parent


def main(argv: list[str] | None = None) -> None:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``)."""
    global _parent  # noqa: PLW0603 - one process, one start
    withhold(TOKEN_VARIABLE)  # first: no child, nor /proc, sees it from here on
    _parent = os.getppid()
    args = list(sys.argv[1:] if argv is None else argv)
    _claim_stdout(args)
    if args == ["--version"]:  # imports nothing: answered before the lock-down
        _say_version(full=False)
        return
    if not (args and args[0] in _RUNS_DRIVER_CODE):
        _isolate(_EXTRAS.get(args[0], ()) if args else ())
    if args == ["version"]:  # the standard library's platform only, once locked down
        _say_version(full=True)
        return
    if args[:1] == ["fork-server"] and len(args) in (2, 3) and args[1].isdigit():
        from ._forkserver import serve

        main(serve(int(args[1])))  # returns only in a child, with the command line it runs
        return
    _contain(args)
    plain = _plain_list(args)
    if plain is None:
        try:
            from .app import main as cli_main

            cli_main(args)
        except ImportError as exc:  # the host's own imports; a driver's never get here
            _cannot_start(exc)
        return
    from mcs_host.discovery import PLUGIN_GROUP, discover

    from ._listing import render_listing

    as_json, paths = plain
    search = paths or None
    plugins = discover(search, group=PLUGIN_GROUP, require_object=False)
    listing = render_listing(discover(search), as_json, plugins)
    if as_json:
        write_document(listing)
    else:
        sys.stdout.write(listing + "\n")
        sys.stdout.flush()


def _say_version(full: bool) -> None:
    """Print what ``mcs-host version`` prints (``full``), or its first line, as typer would
    (``mcs-host --version``)."""
    from mcs_host._version import about

    sys.stdout.write("\n".join(about(full)) + "\n")
    sys.stdout.flush()


def _claim_stdout(args: list[str]) -> None:
    """Keep stdout for what the command promises there, from before anything else runs:
    the one JSON document of ``--json``, the protocol of ``serve`` on stdio (stdin too; the
    ``--isolated`` child as well), nothing at all for ``serve --http``. Descriptor 1 then
    goes to stderr for the whole process (:mod:`._stdout`). ``--help`` prints its text on
    stdout as usual."""
    words = args[: args.index("--")] if "--" in args else args
    if _asks_help(words):
        return
    if words and words[0] == "serve":
        claim(stdin=not any(w == "--http" or w.startswith("--http=") for w in words))
    elif "--json" in words:
        claim()


def _asks_help(words: list[str]) -> bool:
    """Whether the command line asks for help (``--help`` or ``-h``)."""
    return "--help" in words or "-h" in words


def _cannot_start(exc: ImportError) -> None:
    """Say in a few lines why the command line could not import what it needs (the import
    gate refused it), and exit 2; any other import error is a bug and is raised."""
    from mcs_host.trust._gate import IntegrityError
    from mcs_host.trust._origins import host_install

    if not isinstance(exc, IntegrityError):
        raise exc
    lines = [f"error: mcs-host cannot start: {exc}"]
    lines += [f"  {finding}" for finding in host_install().findings]
    sys.stderr.write("\n".join(lines) + "\n")
    raise SystemExit(2)


def _isolate(extras: tuple[str, ...] = ()) -> None:
    """Drop the unsafe first path entry (as ``python -P`` would), then lock the process
    down, with the requirements of the host's ``extras`` counted as the host's. Until then
    only modules the interpreter has loaded already are imported here."""
    if sys.path and not sys.flags.safe_path:
        first = os.path.realpath(sys.path[0] or os.getcwd())
        host_root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
        if first != host_root:
            del sys.path[0]
    # pydantic imports the plugins every distribution may declare (entry point group
    # "pydantic") when it builds its first model: not in this process
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from mcs_host.trust import _origins
    from mcs_host.trust._gate import gate

    _origins.grant_extras(extras)
    gate().lock_down()


def _contain(args: list[str]) -> None:
    """For a command that runs drivers' or a server's code, on Linux: become the parent of
    what they orphan (a child subreaper), and end every process left below this one when it
    exits normally, by an exception, or by SIGTERM or SIGHUP (unless those were ignored when
    it started). SIGKILL cannot be acted on: then an isolated driver's or a server's process
    ends its own (it gets SIGTERM when its parent dies), what an in-process driver started
    survives. Orphans that end while it runs stay zombies until it exits: reaping them would
    take the exit status of a ``subprocess`` a driver is waiting for."""
    words = args[: args.index("--")] if "--" in args else args
    if not words or _asks_help(words):
        return
    if words[0] not in _CONTAINS and not (words[0] == "verify" and "--live" in words):
        return
    from mcs_host._descendants import become_subreaper, end_descendants

    if not become_subreaper():
        return  # elsewhere nothing is handed to this process, and /proc cannot be read
    import atexit
    import signal

    atexit.register(end_descendants)  # registered first, so it runs last
    for number in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(number) == signal.SIG_DFL:
            signal.signal(number, _end_then_die)


def _end_then_die(number: int, frame: object) -> None:
    """End every process below this one, then die of the signal ``number`` as its default
    action would (no handler, no thread, nothing else is waited for)."""
    import signal

    from mcs_host._descendants import end_descendants

    end_descendants()
    signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)
    os._exit(128 + number)  # not reached: the signal ends the process


def _plain_list(args: list[str]) -> tuple[bool, list[str]] | None:
    """``(as_json, paths)`` for a ``list --no-verify`` command line typer would accept as it
    is, else None."""
    if not args or args[0] != "list" or "--no-verify" not in args:
        return None
    as_json, paths = False, []
    rest = iter(args[1:])
    for arg in rest:
        if arg == "--no-verify":
            continue
        if arg == "--json":
            as_json = True
        elif arg == "--path":
            value = next(rest, None)
            if value is None or value.startswith("-"):
                return None
            paths.append(value)
        elif arg.startswith("--path="):
            paths.append(arg.removeprefix("--path="))
        else:
            return None
    if not all(os.path.isdir(p) for p in paths):
        return None  # the typer command says which is not a directory
    return as_json, paths
