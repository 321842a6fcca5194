"""The deployment recipe, ``scripts/deploy/``, checked as far as this machine can: the
Dockerfile's commands run in order as a script (in a fresh venv and a fresh HOME, its paths
moved under a temporary directory; only ``useradd`` is left out, which needs root), its
entry point then serves the drivers it added, verified, with the probes and the token; and the
Kubernetes manifests parse and name what the image and the server have."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from distbuild import ROOT, free_port, wait_for_port

from mcs_host.bridge.readiness import PROBES
from mcs_host.cli._secrets import TOKEN_VARIABLE

pytestmark = [pytest.mark.network, pytest.mark.venv]

DEPLOY = ROOT / "scripts" / "deploy"
TOKEN = "deploy-token-0b6e2f9a41c8d573"  # noqa: S105 - a test's token


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """``(INSTRUCTION, its text)`` of each line of ``dockerfile``, continuations joined."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in dockerfile.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if line.endswith("\\"):
            continue
        word, _, rest = pending.strip().partition(" ")
        found.append((word.upper(), rest.strip()))
        pending = ""
    return found


def environment(dockerfile: list[tuple[str, str]]) -> dict[str, str]:
    """The image's ENV and ARG values."""
    values: dict[str, str] = {}
    for word, rest in dockerfile:
        if word == "ARG":
            name, _, default = rest.partition("=")
            values[name] = default.strip('"')
        elif word == "ENV":
            for name, value in re.findall(r'(\w+)=("[^"]*"|\S+)', rest):
                values[name] = value.strip('"')
    return values


def test_the_dockerfile_builds_a_replica_that_serves_its_verified_drivers(
    tmp_path: Path,
) -> None:
    dockerfile = instructions(DEPLOY / "Dockerfile")
    image = environment(dockerfile)
    # the image's paths, moved under tmp_path; python is the one running the tests
    moved = {
        "VENV": tmp_path / "venv",
        "HOME": tmp_path / "home",
        "DATA": tmp_path / "data",
        "MCS_HOST_STATE_DIR": tmp_path / "state",
    }
    for path in moved.values():
        path.mkdir(parents=True, exist_ok=True)
    moved["VENV"].rmdir()
    (moved["DATA"] / "sales.csv").write_text("month,units\nJan,61\nFeb,90\n")
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python").symlink_to(sys.executable)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MCS_HOST_", "PIP_", "UV_"))},
        **image,
        **{name: str(path) for name, path in moved.items()},
        "SRC": str(ROOT),
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    ran = []
    for word, rest in dockerfile:
        if word != "RUN" or rest.startswith("useradd "):
            continue
        done = subprocess.run(
            ["bash", "-e", "-c", rest], env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"RUN {rest}\n{done.stdout}\n{done.stderr}"
        ran.append(rest)
    assert len(ran) == 2  # the venv, then init, add and verify
    # the entry point, on loopback with the Kubernetes example's arguments and the token
    (entry,) = [json.loads(rest) for word, rest in dockerfile if word == "ENTRYPOINT"]
    assert entry[0] == f"{image['VENV']}/bin/mcs-host"
    port = free_port()
    command = [str(moved["VENV"] / "bin" / "mcs-host"), *entry[1:]]
    command[command.index("--http") + 1] = f"127.0.0.1:{port}"
    process = subprocess.Popen(
        [*command, *container(manifests())["args"]],
        env={**env, TOKEN_VARIABLE: TOKEN},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        wait_for_port(port, process, seconds=120)
        base = f"http://127.0.0.1:{port}"
        assert httpx2.get(base + "/readyz", timeout=60).json()["ready"] is True
        assert httpx2.get(base + "/healthz", timeout=60).status_code == 200
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Accept": "application/json, text/event-stream"}
        refused = httpx2.post(base + "/mcp", json=listing, headers=headers, timeout=60)
        assert refused.status_code == 401
        headers["Authorization"] = f"Bearer {TOKEN}"
        listed = httpx2.post(base + "/mcp", json=listing, headers=headers, timeout=60)
        assert listed.status_code == 200, listed.text
        tools = {tool["name"] for tool in listed.json()["result"]["tools"]}
        assert "list_csv_files" in tools
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "list_csv_files", "arguments": {}},
        }
        answered = httpx2.post(base + "/mcp", json=call, headers=headers, timeout=60)
        assert "sales.csv" in answered.text, answered.text
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=60)
    assert process.returncode == 0, errors
    assert "verified" in errors or "reference" in errors, errors


def manifests() -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = list(
        yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text())
    )
    return documents


def container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [d for d in documents if d["kind"] == "Deployment"]
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = only
    return found


def test_the_kubernetes_manifests_name_what_the_image_and_the_server_have() -> None:
    documents = manifests()
    assert [d["kind"] for d in documents] == ["Deployment", "Service"]
    deployment, service = documents
    pod = deployment["spec"]["template"]["spec"]
    main = container(documents)
    image = environment(instructions(DEPLOY / "Dockerfile"))
    dockerfile = instructions(DEPLOY / "Dockerfile")
    (entry,) = [json.loads(rest) for word, rest in dockerfile if word == "ENTRYPOINT"]
    listening = int(entry[entry.index("--http") + 1].rpartition(":")[2])
    (port,) = main["ports"]
    assert port["containerPort"] == listening
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    # the probes are the server's, on its port
    assert main["readinessProbe"]["httpGet"] == {"path": PROBES[1], "port": port["name"]}
    assert main["livenessProbe"]["httpGet"] == {"path": PROBES[0], "port": port["name"]}
    # the token is what serve reads; the user and the state directory are the image's
    (token,) = main["env"]
    assert token["name"] == TOKEN_VARIABLE
    users = [rest for word, rest in dockerfile if word == "USER"]
    assert pod["securityContext"]["runAsUser"] == int(users[-1])
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"] for m in main["volumeMounts"]}
    assert {image["MCS_HOST_STATE_DIR"], image["DATA"]} <= mounts
    # the pod gets longer to stop than serve gives its calls in flight
    assert pod["terminationGracePeriodSeconds"] > 30
