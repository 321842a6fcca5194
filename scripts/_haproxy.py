"""HAProxy for the replica benchmark and tests: the one on ``PATH``, else Debian's package,
fetched with ``apt-get download`` and unpacked (not installed) into a cache; and its
configuration in front of replicas of ``serve --http --stateless``."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path

CACHE = Path.home() / ".cache" / "mcs-host" / "haproxy"
PACKAGES = ("haproxy", "liblua5.3-0", "libopentracing-c-wrapper0", "libopentracing1")
"""HAProxy's Debian package and the libraries it needs that a slim system lacks."""


def haproxy(cache: Path = CACHE) -> tuple[list[str], dict[str, str], str]:
    """The HAProxy command, its environment and where it came from; ``FileNotFoundError``
    when there is neither one on ``PATH`` nor ``apt-get`` to fetch Debian's."""
    found = shutil.which("haproxy")
    if found is not None:
        return [found], dict(os.environ), f"{found} (on PATH)"
    binary = cache / "usr" / "sbin" / "haproxy"
    if not binary.exists():
        if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
            raise FileNotFoundError("no haproxy on PATH, and no apt-get and dpkg to fetch it")
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as downloads:
            subprocess.run(
                ["apt-get", "download", *PACKAGES], cwd=downloads, check=True, capture_output=True
            )
            for package in Path(downloads).glob("*.deb"):
                subprocess.run(["dpkg", "-x", str(package), str(cache)], check=True)
    libraries = cache / "usr" / "lib" / "x86_64-linux-gnu"
    env = {**os.environ, "LD_LIBRARY_PATH": str(libraries)}
    return [str(binary)], env, f"Debian's package, unpacked in {cache}"


def configuration(port: int, replicas: Sequence[int]) -> str:
    """HAProxy on ``port`` of 127.0.0.1 in front of the ``replicas``' ports: round robin, no
    session affinity, ``GET /readyz`` every 250 ms, a request whose replica refused the
    connection or closed it unanswered sent to another (health checks logged on stderr)."""
    servers = "".join(
        f"    server r{n} 127.0.0.1:{p} check\n" for n, p in enumerate(replicas, start=1)
    )
    return (
        textwrap.dedent(
            f"""\
            global
                log stderr format raw local0 info
            defaults
                mode http
                log global
                option log-health-checks
                timeout connect 2s
                timeout client 120s
                timeout server 120s
                retries 3
                option redispatch
                option http-buffer-request
                retry-on conn-failure empty-response
            frontend mcp
                bind 127.0.0.1:{port}
                default_backend replicas
            backend replicas
                balance roundrobin
                option httpchk GET /readyz
                http-check expect status 200
                default-server inter 250ms fall 2 rise 1
            """
        )
        + servers
    )
