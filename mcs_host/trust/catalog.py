"""The catalog: what mcs-host ships about the published reference drivers and their libraries.

``catalog.json`` beside this module is a registry document holding exactly the entries of this
repository's ``registry.json`` for the releases ``scripts/lock_reference.py`` pins there (the
reference drivers, which ship no entry point, with their label, object, id, what they import
without declaring it, trust label and notes; the libraries they import), written by that
script from the same data (``tests/system/test_catalog.py`` holds them equal). It was made from the
wheels the package index published, so it is a statement made outside the index a user's pip
asks.

Only ``mcs-host add`` reads it: to know the driver a distribution without entry points
provides (after the configuration's own registries, which win), and to refuse a downloaded
wheel of a version it pins whose files are not that pin's, nor one of its builds'. A load never
reads it: the pins ``add`` writes go into the user's registry, and nothing here is trusted at
load time. It is read from the package's own file, once per process; no setting, option or
environment variable names another.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from mcs_host.discovery import normalize_name

from .registry_format import Pin, Registry, ReleaseEntry, TrustLabel

# used by mcs-host add (mcs_host.loading.adding): CATALOG, ShippedPins, shipped_catalog,
# shipped_pins
__all__: list[str] = []

CATALOG = Path(__file__).with_name("catalog.json")
"""The catalog's file, package data of mcs-host's wheel."""


@functools.cache
def shipped_catalog() -> Registry:
    """The catalog mcs-host ships (read and checked on first use)."""
    return Registry.model_validate_json(CATALOG.read_bytes())


@dataclass(frozen=True, slots=True)
class ShippedPins:
    """What a catalog pins for one version of a distribution."""

    trust: TrustLabel
    """The trust label of the entry that pins it."""
    pins: tuple[Pin, ...]
    """The version's pin, then its other builds' (wheels for other Pythons or platforms)."""

    def holds(self, digest: str) -> bool:
        """Whether files with the ``installed-tree-v2`` ``digest`` are one of these pins'."""
        return any(pin.digest == digest for pin in self.pins)


def shipped_pins(catalog: Registry, project: str, version: str) -> ShippedPins | None:
    """What ``catalog`` pins for ``version`` of the distribution ``project`` (driver entries
    and its library entry together); ``None`` when it pins no release of that version."""
    name = normalize_name(project)
    entries: list[ReleaseEntry] = [e for e in catalog.drivers.values() if e.distribution == name]
    library = catalog.libraries.get(name)
    entries += [library] if library is not None else []
    for entry in entries:
        pin = entry.pin_for(version)
        if pin is not None:
            pins = [pin, *entry.builds_of(version)]
            pins += [
                p
                for other in entries
                if other is not entry
                for p in (other.pin_for(version), *other.builds_of(version))
                if p is not None
            ]
            return ShippedPins(entry.trust, tuple(pins))
    return None
