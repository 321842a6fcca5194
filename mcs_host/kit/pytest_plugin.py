"""The pytest plugin mcs-host installs: fixtures for testing drivers.

``mcs_conformance(driver, **settings)`` checks a driver with
:func:`mcs_host.kit.conformance.check_driver` and fails the test on any error; it returns every
finding, so a test can look at the warnings too. ``mcs_test_host`` is
:func:`mcs_host.kit.testing.make_test_host`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["mcs_conformance", "mcs_test_host"]


@pytest.fixture
def mcs_conformance() -> Callable[..., tuple[Any, ...]]:
    """``check(driver, **settings)``: check a driver (an instance, a class or a factory;
    ``settings`` are its constructor's keywords) against the MCS contract; fail the test on
    any error, and return every finding, warnings too."""
    # imported here: pytest loads this plugin in every run where mcs-host is installed
    from .conformance import check_driver  # noqa: PLC0415

    def check(driver: Any, **settings: Any) -> tuple[Any, ...]:
        results = check_driver(driver, settings)
        errors = [str(r) for r in results if r.level == "error"]
        if errors:
            pytest.fail("the driver breaks the MCS contract:\n" + "\n".join(errors), pytrace=False)
        return results

    return check


@pytest.fixture
def mcs_test_host() -> Callable[..., Any]:
    """:func:`mcs_host.kit.testing.make_test_host`: ``make(drivers, settings=..., **config)``
    loads ``drivers`` (label -> instance, class or factory) without autoload, plugins or
    registries, and returns the :class:`~mcs_host.loading.records.Loaded` stack to call tools
    through."""
    from .testing import make_test_host  # noqa: PLC0415

    return make_test_host
