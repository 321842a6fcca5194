"""Reason codes: every code the host reports for a driver, a host plugin, an MCP server, a
dependency or a registry, with what it means and what to do about it.

One module: the table is one specification, and splitting it would give a code two homes; it
is long because it holds every code the host reports, each with its meaning and its fix.

One table, read by everything that makes or shows a reason:
:class:`~mcs_host.loading.records.Refused`, :class:`~mcs_host.trust.verification.Verification`
and the load records refuse a code that is not in it; the command line prints a ``fix:`` line
from it under each refusal; the ``--json`` schemas publish its codes as an enum; the reason
codes page of the documentation (docs/reference/reason-codes.md) is generated from it
(``scripts/gen_cli_docs.py``). Standard library only, so every layer may read it.

A fix names at most one command, in backticks, that works as printed once its placeholders
are filled in: ``LABEL`` stands for the label of the driver, host plugin or MCP server,
``DISTRIBUTION`` for its distribution, ``PROJECT`` for the directory it was installed from and
``WHEEL`` for its name as wheel files spell it (each filled in where the command line prints
the fix, quoted for the shell inside a command). What no command can do (a value only the
reader knows, a choice) is said in words, never as a command with a blank to fill. A
dependency, or an MCP server run from a distribution, is pinned as a library: its fix says
``mcs-host lock --distribution DISTRIBUTION`` where a driver's says ``mcs-host lock LABEL``,
and a host plugin's ``mcs-host lock --plugin LABEL``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = ["REASONS", "Reason", "is_command", "known_reason"]

Subject = Literal["driver", "plugin", "library", "server"]
"""What a reason is about: an installed driver, a host plugin (pinned only by name: ``mcs-host
lock --plugin LABEL``), a distribution pinned as a library (a dependency, an MCP server run
from its distribution), or an MCP server given by URL or command (``server``)."""


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason code: what it means and what to do about it."""

    code: str
    meaning: str
    fix: str = ""
    """What to do, with the placeholders of the module's docstring; empty when nothing is
    wrong."""
    server_fix: str = ""
    """What to do instead for an MCP server given by URL or command, when that differs."""
    library_fix: str = ""
    """What to do instead for a distribution pinned as a library, when more differs than
    ``mcs-host lock LABEL`` becoming ``mcs-host lock --distribution DISTRIBUTION``."""
    extra: str = ""
    """The extra of mcs-host its fix installs: the command line prints the command that
    installs it from where this mcs-host was installed (:mod:`mcs_host._install_hint`)."""

    def fix_for(
        self,
        label: str | None = None,
        distribution: str | None = None,
        subject: Subject = "driver",
        values: Mapping[str, str] | None = None,
    ) -> str:
        """The fix with ``label``, ``distribution`` and the other placeholders of ``values``
        (``PROJECT``, ``WHEEL``) filled in for ``subject``, each quoted for the shell inside
        a command; empty when there is nothing to do."""
        text = self.server_fix if subject == "server" and self.server_fix else self.fix
        if subject == "library":
            text = self.library_fix or text.replace(
                "mcs-host lock LABEL", "mcs-host lock --distribution DISTRIBUTION"
            )
        elif subject == "plugin":
            text = text.replace("mcs-host lock LABEL", "mcs-host lock --plugin LABEL")
        filled = {"LABEL": label, "DISTRIBUTION": distribution, **(values or {})}
        known = {name: value for name, value in filled.items() if value}
        if not known:
            return text
        parts = text.split("`")
        for n, part in enumerate(parts):
            quote = shlex.quote if n % 2 and is_command(part) else str
            for name, value in known.items():
                escaped = quote(value).replace("\\", "\\\\")
                parts[n] = re.sub(rf"\b{name}\b", escaped, parts[n])
        return "`".join(parts)


COMMANDS = ("mcs-host ", "pip ")
"""How a command a fix names in backticks begins, but for an interpreter's pip (``PYTHON -m
pip ...``); the rest in backticks, such as ``--allow-unverified`` or ``allow_extensions =
false``, is an option or a setting."""


def is_command(text: str) -> bool:
    """Whether ``text``, in backticks in a fix, is a command to run."""
    return text.startswith(COMMANDS) or " -m pip " in text


_REINSTALL = (
    "if you did not change its files yourself, find out what did first; then reinstall the "
    "release from where it came: `pip install --force-reinstall --no-deps DISTRIBUTION` from "
    "your package index, else the wheel or directory you installed it from"
)
_PUBLISHER = "its publisher fixes it and releases a new version (mcs-host check in the project)"
_LOCK_OR_ALLOW = (
    "check where it came from, then pin it and what it needs as installed: "
    "`mcs-host lock LABEL`; "
    "`--allow-unverified` (a driver alone: `allow_unverified = true` in its table) runs it "
    "unpinned, for development only"
)

_EXTRA_MCP = (
    "install the mcp extra into the environment mcs-host runs in, from where mcs-host was "
    "installed (from a clone of it: `pip install '.[mcp]'` in the clone, with that "
    "environment's pip); the command line prints the command"
)

_TABLE = (
    # -- what a registry decides about one release (driver, host plugin, dependency) --------
    Reason("pinned", "its files match the registry's pin for this version"),
    Reason("signed", "a publisher key the registry trusts for this driver signed these files"),
    Reason(
        "not-in-registry",
        "no registry pins it or knows its driver id, so nothing vouches for its files",
        _LOCK_OR_ALLOW,
        "if you trust it, pin the server as your configuration names it: `mcs-host lock "
        "--server LABEL`; `allow_unverified = true` in its [mcp_servers.LABEL] table starts "
        "it unvouched, for development only",
        # a library: a driver's own allowance does not reach what it imports
        "check where it came from, then pin what is installed: `mcs-host lock --distribution "
        "DISTRIBUTION`",
    ),
    Reason(
        "no-pin-or-signature",
        "a registry knows the driver, but neither pins this version nor has a publisher "
        "signature for it",
        "install a version the registry pins, or check this release and pin it: "
        "`mcs-host lock LABEL`",
    ),
    Reason(
        "no-pin",
        "a registry knows the library, but does not pin this version",
        "install a version the registry pins, or check this release and pin it: "
        "`mcs-host lock --distribution DISTRIBUTION`",
    ),
    Reason(
        "digest-mismatch",
        "its files differ from the registry's pin for this version: RECORD was rewritten to "
        "match them, or it is another build of the same version",
        "if you changed it and trust what is installed now, pin it again: "
        "`mcs-host lock LABEL --replace`; else reinstall the release that was pinned (a "
        "changed project is released under a new version: mcs-host bump in it)",
    ),
    Reason(
        "revoked",
        "the registry revokes this version (the message says why)",
        "install another version the registry pins",
    ),
    Reason(
        "below-minimum",
        "its version is below the registry's `minimum_version` (no downgrades)",
        "upgrade to a version the registry pins: `pip install --upgrade DISTRIBUTION`",
    ),
    Reason(
        "version-not-allowed",
        "its version is outside the registry's allowed `versions`",
        "install a version the registry allows and pins",
    ),
    Reason(
        "invalid-version",
        "its version is not a PEP 440 version",
        "its publisher releases it with a valid version",
    ),
    Reason(
        "registry-conflict",
        "two registries disagree about it (its distribution, its object, or a version's pin)",
        "make the registries agree, or name only the one you trust with `--registry FILE`",
    ),
    Reason(
        "typosquat",
        "it claims a driver id the registry gives to another distribution",
        "uninstall DISTRIBUTION unless you know why it claims that id: it may impersonate "
        "the registered driver",
    ),
    Reason(
        "id-mismatch",
        "its manifest declares another driver id than the registry's entry for its distribution",
        "reinstall the release the registry knows; if the new id is right, pin it under "
        "that id: `mcs-host lock LABEL`",
    ),
    Reason(
        "entry-point-mismatch",
        "its entry point names another object than the registry's entry, or is a driver's "
        "where the entry is a host plugin's (or the other way round)",
        "reinstall the release the registry knows; if the new object is intended (a class "
        "renamed), record it: `mcs-host lock LABEL`",
    ),
    Reason(
        "bad-signature",
        "its publisher signature is malformed, or a signature by a trusted key does not verify",
        "reinstall the wheel as published, or its publisher signs it again (mcs-host sign)",
    ),
    Reason(
        "untrusted-key",
        "it is signed, but by no key the registry trusts for this driver",
        "if you trust the signer, add its key to the driver's entry: mcs-host lock LABEL with "
        "--publisher-key and the key (it checks that the key signed the installed release)",
    ),
    Reason(
        "statement-mismatch",
        "its signed release statement is for other files, another distribution or version, "
        "or another object or id",
        "reinstall the wheel as published, or its publisher signs the release again "
        "(mcs-host sign)",
    ),
    Reason(
        "publisher-changed",
        "its PEP 740 provenance was attested by another publisher than the one the registry "
        "records for it: another repository (or another one under the same name), workflow "
        "or environment",
        "do not install it unless its publisher confirms the change (the message says when "
        "the repository's number is unchanged: a rename or transfer); then accept the new "
        "publisher as you add the release, stating the identity the message says its "
        "certificate proves: mcs-host add DISTRIBUTION with --publisher and that identity "
        "shows both and asks you to confirm (--yes for scripts)",
        library_fix="do not install it unless its publisher confirms the change (the message "
        "says when the repository's number is unchanged: a rename or transfer); then remove "
        "its entry from the registry's libraries and add the driver that needs it again "
        "(`mcs-host add`), which records the publisher its certificate proves",
    ),
    Reason(
        "provenance-missing",
        "the registry records a Trusted Publisher for it, and this release is pinned (or "
        "being pinned) without its provenance: a downgrade from attested releases",
        "install a release the registry pins with its provenance (`mcs-host verify "
        "--provenance` lists them) with pip, naming its version; if its publisher has "
        "stopped attesting releases, confirm that with them, then remove `publisher` from its "
        "entry in the registry and pin it by its files",
    ),
    Reason(
        "editable-install",
        "an editable install (`pip install -e`): its code is a working tree, not a release, "
        "so no pin can vouch for it",
        "build a wheel of its project (PROJECT, its directory) into dist and install that "
        "in place of the editable install: `pip wheel --no-deps --wheel-dir dist PROJECT && "
        "pip install --force-reinstall --no-deps dist/WHEEL-*.whl`, then pin it; "
        "`--allow-unverified` runs it unpinned, for development",
    ),
    Reason(
        "extension-module",
        "it ships extension modules (native code, linked from its verified bytes; what it "
        "does is not checked), and the policy refuses native code (`allow_extensions = "
        "false` under `[trust]`, or `--no-allow-extensions`)",
        "if you trust its native code, set `allow_extensions = true` under `[trust]` in your "
        "configuration, or give this command `--allow-extensions`",
    ),
    Reason(
        "foreign-module",
        "the entry point's module, or a package above it, is not among its distribution's "
        "files: its code would come from elsewhere",
        "remove what provides that module instead (the message names it), or reinstall "
        "DISTRIBUTION",
    ),
    Reason(
        "manifest-invalid",
        "its `mcs-driver.json` cannot be read or is not a valid driver manifest",
        _PUBLISHER,
    ),
    # -- the installed files, against RECORD ----------------------------------------------------
    Reason(
        "file-modified",
        "an installed file does not match its RECORD hash or size: it changed after installation",
        _REINSTALL,
    ),
    Reason("file-missing", "a file RECORD lists is not installed", _REINSTALL),
    Reason(
        "file-unlisted",
        "a file in its package directories is not in RECORD",
        "remove the file the message names, or reinstall DISTRIBUTION into a clean environment",
    ),
    Reason(
        "file-shadowing",
        "an unlisted package directory or extension module would be imported instead of a "
        "listed module",
        "remove what the message names",
    ),
    Reason(
        "path-escapes",
        "a listed file's directory leads out of the site directory through a symlink",
        "remove the symlink, then reinstall: `pip install --force-reinstall --no-deps "
        "DISTRIBUTION`",
    ),
    Reason(
        "not-a-regular-file",
        "a listed file is a symlink, a directory or a special file, or cannot be opened",
        _REINSTALL,
    ),
    Reason("record-invalid", "its RECORD is missing, unreadable or malformed", _REINSTALL),
    Reason(
        "member-invalid",
        "a wheel member's name is unsafe (absolute, with `..`, listed twice, or the same as "
        "another where names are case-folded)",
        "build the wheel with a standard build backend",
    ),
    # -- what discovery finds in the installed metadata --------------------------------------
    Reason(
        "invalid-entry-point",
        "an entry point is not `module:object`, or its line in entry_points.txt is not "
        "`label = value`",
        _PUBLISHER,
    ),
    Reason(
        "invalid-label",
        "a label must be 1 to 32 letters, digits, '-' or single '_', starting with a letter or "
        "digit",
        "rename the `[drivers.LABEL]` table, or (an entry point's name) its publisher renames it",
    ),
    Reason(
        "label-conflict",
        "two installed distributions claim the same label, so neither is used",
        "uninstall one, or leave one out with `deny` in the configuration",
    ),
    Reason(
        "plugin-shadows-driver",
        "a host plugin has the label of an installed driver: `mcs-host lock LABEL` pins the "
        "driver alone, and the plugin, once pinned, runs in every command",
        "if you did not install the plugin for its hooks, uninstall the distribution the "
        "message names for it; if you did, pin it by name: mcs-host lock --plugin LABEL with "
        "--distribution and that distribution",
    ),
    Reason(
        "duplicate-distribution",
        "the distribution is installed more than once on the search path",
        "uninstall the copies the message names until one remains",
    ),
    Reason(
        "unreadable-metadata",
        "its METADATA or entry_points.txt cannot be read",
        "reinstall it: `pip install --force-reinstall --no-deps DISTRIBUTION`",
    ),
    # -- what a load plans ----------------------------------------------------------------------
    Reason("mounted", "mounted"),
    Reason("not-requested", "left out: other labels were asked for"),
    Reason(
        "disabled",
        "left out: `enabled = false` in its configuration",
        "set `enabled = true` in its `[drivers.LABEL]` (or `[mcp_servers.LABEL]`) table",
    ),
    Reason(
        "denied",
        "left out: the configuration's `deny` names its label or distribution",
        "remove it from `deny` in the configuration",
    ),
    Reason(
        "not-allowed",
        "left out: the configuration's `allow` does not name it",
        "add LABEL to `allow` in the configuration",
    ),
    Reason(
        "not-installed",
        "no installed driver has the label a `[drivers.LABEL]` table names",
        "install the driver, or correct `driver =` in `[drivers.LABEL]`",
    ),
    Reason(
        "label-taken",
        "an in-process driver or an MCP server has a label another mount already has",
        "give one of them another label",
    ),
    # -- before import: compatibility ---------------------------------------------------------
    Reason(
        "incompatible-host",
        "the driver's `Requires-Dist: mcs-host` excludes this host's version",
        "install an mcs-host the driver accepts (the message says which), or a release of the "
        "driver that accepts this host",
    ),
    Reason(
        "invalid-requirement",
        "a `Requires-Dist` line of the driver cannot be parsed",
        _PUBLISHER,
    ),
    Reason(
        "required-version",
        "its version does not satisfy the version the configuration's `require` asks for",
        "install a version of DISTRIBUTION that does, or change `require` in the configuration",
    ),
    # -- what it needs ------------------------------------------------------------------------
    Reason(
        "missing-dependency",
        "a distribution it requires is not installed",
        "install what DISTRIBUTION requires that is missing: `pip install DISTRIBUTION`; a "
        "load then says whether what it installed needs pinning",
        library_fix="install what is missing: `pip install DISTRIBUTION` (with what it "
        "requires); a load then says whether it needs pinning",
    ),
    Reason(
        "dependency-rejected",
        "a distribution it requires is refused (its own reason is in the message)",
        "`mcs-host verify LABEL` shows the dependency's reason and its fix",
    ),
    Reason(
        "unverified-dependency",
        "a distribution it requires is not verified, and the policy refuses unverified code "
        '(the default, `dependencies = "refuse"` under `[trust]`; strict mode even for a '
        "driver allowed unverified)",
        "check the dependency the message names, then pin LABEL with everything it needs, as "
        "installed: `mcs-host lock LABEL`",
        "check the dependency the message names, then pin the server with everything it "
        "needs, as installed: `mcs-host lock --server LABEL`",
    ),
    Reason(
        "undeclared-dependency",
        "a warning: the registry says it needs a distribution it does not declare",
        "its publisher declares the dependency",
    ),
    Reason(
        "unreadable",
        "a file could not be read: a registry, or a dependency's installed files",
        "check that the file the message names exists and is readable",
    ),
    # -- import and start ---------------------------------------------------------------------
    Reason(
        "plugin-refused",
        "a host plugin's `mcs_host_verify` hook refused it (the message is the plugin's)",
        "ask whoever installed that host plugin, or disable plugins (`plugins = false`)",
    ),
    Reason(
        "integrity",
        "code that was verified was not what would run: a module was imported from elsewhere "
        "before the load, two verified distributions claim one module, or a file changed "
        "after verification",
        "load in a fresh process (the message names the module imported first); a changed "
        "file: `mcs-host verify LABEL`",
    ),
    Reason(
        "import-refused",
        "the import gate refused a module the driver imported, whose file is not verified: "
        "a warning (the driver went on as if the module were absent), a refusal in strict mode",
        "nothing of the module ran. If the driver needs it, the distribution that ships the "
        "file the message names must be declared as its dependency (by its publisher, or in "
        "`requires` of its registry entry) and pinned with it (mcs-host lock LABEL); if it "
        "does not, uninstall that distribution, or load without --strict",
    ),
    Reason(
        "unverified-import",
        "a warning: code the policy allows ran from unverified files (one line per "
        "distribution; `load -v` lists the modules)",
        "pin the driver with everything it needs, as installed: `mcs-host lock LABEL`",
    ),
    Reason(
        "import-error",
        "importing the driver raised an exception",
        "read the traceback (`load --json` has it); often a module it imports is not installed",
    ),
    Reason(
        "invalid-meta",
        "its `meta` is missing or not a valid DriverMeta",
        _PUBLISHER,
    ),
    Reason(
        "meta-mismatch",
        "its runtime `meta` differs from its verified `mcs-driver.json`",
        _PUBLISHER,
    ),
    Reason(
        "version-mismatch",
        "`meta.version` differs from its distribution's version (refused with `--strict`)",
        "its publisher bumps both together (mcs-host bump in the project)",
    ),
    Reason(
        "false-capability",
        "it declares a capability whose methods it does not implement",
        _PUBLISHER,
    ),
    Reason(
        "missing-capability",
        "it lacks a capability the configuration requires",
        "use a driver that has it, or stop requiring it (`require_capabilities`, or "
        "`capabilities` in `[drivers.LABEL]`)",
    ),
    Reason(
        "invalid-settings",
        "settings are given, but its entry point is an instance, not a class or factory",
        "remove the settings of `[drivers.LABEL]`",
    ),
    Reason(
        "constructor-error",
        "its class raised when constructed with its settings",
        "check `[drivers.LABEL.settings]` (or `--set LABEL.KEY=VALUE`) against the settings "
        "the driver takes; the message has what it raised",
    ),
    Reason(
        "autostart-unsupported",
        "autostart is configured, but the driver has no `autostart()`",
        "remove `autostart` from `[drivers.LABEL]`",
    ),
    Reason(
        "autostart-error",
        "its `autostart()` raised",
        "check `autostart_settings` in `[drivers.LABEL]`; the message has what it raised",
    ),
    Reason(
        "healthcheck-error",
        "its `healthcheck()` raised",
        "what it checks (a service, a credential) is likely not there; the message has what "
        "it raised",
    ),
    Reason(
        "unhealthy",
        "its healthcheck returned a status other than OK",
        "what it checks (a service, a credential) is likely not there; the message has its answer",
    ),
    Reason(
        "list-tools-error",
        "its `list_tools()` raised",
        "the message has what it raised; check its settings",
    ),
    Reason(
        "timeout",
        "a step of the driver (constructor, autostart, healthcheck, list_tools) did not "
        "return in time",
        "find why it hangs, or give it longer: `timeout` in `[drivers.LABEL]`",
    ),
    Reason(
        "not-a-driver",
        "its entry point's object has neither `list_tools`/`execute_tool` nor "
        "`process_llm_response`",
        _PUBLISHER,
    ),
    Reason(
        "no-tools",
        "it lists no tools",
        "its settings or its healthcheck usually say why (the message quotes the healthcheck)",
    ),
    Reason(
        "invalid-tools",
        "its tools are not a list of valid tools, repeat a name, or have a schema that "
        "cannot be checked",
        _PUBLISHER,
    ),
    Reason(
        "host-error",
        "loading it raised an unforeseen error in the host",
        "report it with the traceback (`load --json` has it)",
    ),
    Reason(
        "invalid-plugin",
        "the host plugin is not a valid plugin (an unknown hook, or one with wrong arguments)",
        _PUBLISHER,
    ),
    # -- in a process of its own, and MCP servers -------------------------------------------
    Reason(
        "isolation-unavailable",
        "it is to run isolated, which needs the mcp extra",
        _EXTRA_MCP,
        extra="mcp",
    ),
    Reason(
        "isolated-start",
        "its process of its own did not start or did not serve its tools",
        "`mcs-host verify LABEL --live` shows what the process said",
    ),
    Reason(
        "restarts-exhausted",
        "it failed more times in a row than it may be restarted, and is not started again",
        "find why it fails (its earlier errors), then load again",
    ),
    Reason("registered", "a registry entry names exactly this MCP server's URL or command"),
    Reason(
        "mcp-unavailable",
        "mounting an MCP server needs the mcp extra",
        _EXTRA_MCP,
        extra="mcp",
    ),
    Reason(
        "console-script",
        "the MCP server's distribution has no such console script, or it is not a "
        "`module:function` that can be run",
        "name a console script it ships: `script = ...` in `[mcp_servers.LABEL]`",
    ),
    Reason(
        "server-start",
        "the MCP server did not start, or did not answer",
        "run its command (or open its URL) by hand to see why",
    ),
    Reason(
        "not-configured",
        "the configuration has no MCP server under this label",
        "add `[mcp_servers.LABEL]` to the configuration",
    ),
    # -- registries -------------------------------------------------------------------------
    Reason(
        "invalid",
        "a registry is not JSON, or not a valid registry (a signed one must set `expires` and "
        "`name`)",
        "correct the file at the place the message names",
    ),
    Reason(
        "unsigned",
        "a plain registry where a signed one is required: registry keys were given, or it was "
        "signed when last accepted",
        "sign it (mcs-host sign-registry), or name it without `--registry-key` to use it "
        "as a local lock",
    ),
    Reason(
        "expired",
        "a signed registry is past its `expires`",
        "get the registry's current version from its publisher",
    ),
    Reason(
        "no-keys",
        "a signed registry is named without the keys that may sign it",
        "give them: `--registry-key KEY` (or `registry_keys` in the configuration)",
    ),
    Reason(
        "malformed",
        "a signed registry is not a valid signature envelope",
        "get the registry again from its publisher",
    ),
    Reason(
        "under-signed",
        "a signed registry has fewer valid signatures by the trusted keys than the threshold",
        "check `--registry-key` and `--threshold`, or get the registry again from its publisher",
    ),
    Reason(
        "rollback",
        "a signed registry is older than one this host accepted before (a replay)",
        "get the registry's current version from its publisher",
    ),
    Reason(
        "state-unreadable",
        "the file recording the signed registry versions this host accepted is damaged or "
        "unreadable",
        "move the file the message names away to start over (every signed registry is then "
        "accepted afresh)",
    ),
    Reason(
        "state-unwritable",
        "the host cannot record the version of a signed registry it accepted",
        "make the state directory writable (or set `MCS_HOST_STATE_DIR`)",
    ),
)

REASONS: Mapping[str, Reason] = MappingProxyType({r.code: r for r in _TABLE})
"""Every reason code, in the table's order."""


def known_reason(code: str) -> str:
    """``code`` when the table has it; a :class:`ValueError` naming it otherwise (a code
    that is not in the table is a bug: it would reach the user without a meaning or fix)."""
    if code not in REASONS:
        raise ValueError(f"{code!r} is not a reason code of mcs_host/_reasons.py")
    return code
