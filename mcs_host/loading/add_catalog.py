"""What the catalog mcs-host ships (:mod:`mcs_host.trust.catalog`) says of what ``mcs-host add``
adds.

:func:`held` holds a release to the catalog: where the catalog pins its version, its files must
be that pin's (or one of its builds'), else ``add`` refuses before anything changes
(``digest-mismatch``, naming both digests); :func:`described` gives each driver entry ``add``
writes for a driver the catalog declares the catalog's trust label, notes and what it needs.
Both compare digests already computed; neither reads a file.
"""

from __future__ import annotations

from mcs_host.trust.catalog import shipped_pins
from mcs_host.trust.registry import Registry, TrustLabel
from mcs_host.trust.release import Release

from .add_offers import Ships
from .add_records import AddError

# used by mcs-host add: described, held
__all__: list[str] = []


def held(
    release: Release, catalog: Registry, needed_by: str | None = None, installed: bool = False
) -> TrustLabel | None:
    """The trust label of ``catalog``'s pin of ``release``'s version when its files are that
    pin's or a build's; ``None`` when the catalog pins no release of that version; an
    :class:`AddError` (``digest-mismatch``) when they are other files. ``installed``: the
    release is the installed one, not a downloaded wheel."""
    shipped = shipped_pins(catalog, release.project, release.version)
    if shipped is None:
        return None
    digest = release.pin().digest
    if shipped.holds(digest):
        return shipped.trust
    name, version = release.distribution, release.version
    what = "its installed files are" if installed else "the downloaded wheel's files are"
    builds = len(shipped.pins) - 1
    others = f" (or one of its {builds} other builds')" if builds else ""
    needed = f"{needed_by} needs it, and " if needed_by is not None else ""
    message = (
        f"{needed}{name} {version} is not the release mcs-host ships a pin of: {what} "
        f"{digest}, the pin mcs-host ships ({shipped.trust}) is {shipped.pins[0].digest}{others}"
    )
    if installed:
        fix = (
            f"find out what changed the installed files, then reinstall it from PyPI "
            f"(`pip install --force-reinstall --no-deps '{name}=={version}'`) and add again"
        )
    else:
        fix = (
            f"do not install it: your index serves other files as {name} {version} than the "
            "ones published (check the indexes your pip asks: `pip config list`); add it from "
            "an index you trust"
        )
    raise AddError(name, "pin", message, fix, "digest-mismatch")


def described(registry: Registry, ships: Ships) -> Registry:
    """``registry`` with each driver the catalog declares (``ships.shipped``) given the
    catalog's trust label, security notes and what it needs without declaring it: a load
    reads only the user's registries, so the entry ``add`` writes carries them."""
    drivers = dict(registry.drivers)
    for label, entry in ships.shipped.items():
        driver_id = ships.ids[label]
        written = drivers.get(driver_id)
        if written is None:
            continue
        drivers[driver_id] = written.model_copy(
            update={
                "trust": entry.trust,
                "security_notes": entry.security_notes,
                "requires": entry.requires,
            }
        )
    return registry.model_copy(update={"drivers": drivers})
