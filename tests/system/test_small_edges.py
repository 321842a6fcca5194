"""Small edges a user meets on the first day, each through this checkout's console script with
a HOME of its own: ``verify`` says nothing of the ``distutils-precedence.pth`` setuptools
installs in nearly every environment (and still reports a file of that name with anything
else in it); ``check`` fails a tool whose sample result is no JSON a host can send (NaN),
naming the tool; ``check`` of a misspelt project names it and the closest names, with no
exception's name in the message; ``lock --publisher-key FILE`` says how to give the key the
file holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CONSOLE = Path(sys.executable).with_name("mcs-host")


def host(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``mcs-host ARGS`` in ``cwd``, with a HOME and a state directory of its own."""
    (cwd / "home").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MCS_HOST_"))}
    env.update(HOME=str(cwd / "home"), MCS_HOST_STATE_DIR=str(cwd / "state"))
    return subprocess.run(
        [CONSOLE, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=300,
        check=False,
    )


# -- verify: setuptools' own start-up line -----------------------------------------------------


def startup(cwd: Path, site: Path) -> list[dict[str, str]]:
    """What ``verify --path site`` reports as start-up code in ``site``."""
    done = host(cwd, "verify", "--path", site, "--json")
    assert done.returncode in (0, 1), done.stderr
    found: list[dict[str, str]] = json.loads(done.stdout)["startup"]
    return [f for f in found if Path(f["path"]).parent == site]


def test_verify_says_nothing_of_setuptools_own_pth_and_reports_other_content(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", "setuptools"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    site = Path(purelib)
    pth = site / "distutils-precedence.pth"
    assert pth.read_bytes().startswith(b"import os; var = 'SETUPTOOLS_USE_DISTUTILS'")
    assert [f for f in startup(tmp_path, site) if f["path"] == str(pth)] == []
    # the same name, one byte more: reported, as any other start-up code
    pth.write_bytes(pth.read_bytes() + b"import os\n")
    assert [f["path"] for f in startup(tmp_path, site)] == [str(pth)]
    pth.write_text("import os; os.system('echo planted')\n")
    text = host(tmp_path, "verify", "--path", site).stdout
    assert "Start-up code (the interpreter runs it before any host can act):" in text
    assert f"{pth} runs code at start-up: \"import os; os.system('echo planted')\"" in text


# -- check: a result no host can send as JSON --------------------------------------------------


def test_check_fails_a_tool_whose_sample_result_is_nan_naming_it(tmp_path: Path) -> None:
    made = host(tmp_path, "new", "acme-ratio", "--label", "ratio")
    assert made.returncode == 0, made.stderr
    assert host(tmp_path, "check", "acme-ratio").returncode == 0  # the control: it passes
    module = tmp_path / "acme-ratio" / "acme_ratio" / "__init__.py"
    source = module.read_text()
    returned = "        return f\"{self.greeting}, {args.name}{'!' if args.excited else '.'}\"\n"
    assert returned in source
    module.write_text(source.replace(returned, '        return float("nan")\n'))
    done = host(tmp_path, "check", "acme-ratio")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == [
        "ratio: breaks the contract",
        "  ERROR result-not-json: tool 'greet' returned a result that is not JSON: it holds "
        "the number nan, which JSON has none of (return null or a string)",
    ]


# -- check: a misspelt project -----------------------------------------------------------------


def test_check_of_a_misspelt_project_names_it_and_the_closest_names(tmp_path: Path) -> None:
    assert host(tmp_path, "new", "acme-weather", "--label", "weather").returncode == 0
    done = host(tmp_path, "check", "acme-wether")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: acme-wether: no such project directory ({tmp_path / 'acme-wether'}), and no "
        "installed driver has this label; did you mean acme-weather?"
    )
    (tmp_path / "notes").mkdir()
    done = host(tmp_path, "check", "notes")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: notes: no pyproject.toml there; give a driver project's directory (mcs-host "
        "new writes one) or an installed driver's label"
    )
    assert "Error:" not in done.stderr + host(tmp_path, "check", "acme-wether").stderr


# -- lock --publisher-key: a file where the key's text goes ------------------------------------


@pytest.mark.parametrize("holds", ["public", "private"])
def test_lock_publisher_key_given_a_file_says_how_to_give_its_key(
    holds: str, tmp_path: Path
) -> None:
    made = host(tmp_path, "keygen", tmp_path / "release.key", "--json")
    assert made.returncode == 0, made.stderr
    public = json.loads(made.stdout)["public_key"]
    (tmp_path / "release.pub").write_text(public + "\n")
    given = "release.pub" if holds == "public" else "release.key"
    done = host(tmp_path, "lock", "weather", "--publisher-key", given)
    assert done.returncode == 2
    said = " ".join(done.stderr.replace("│", " ").split())
    if holds == "public":
        assert (
            f"public key '{given}' does not start with 'ed25519:'; {given} is a file: give the "
            f'key it holds, --publisher-key "$(cat {given})"'
        ) in said
        # the suggestion works: the key is taken (the label is what fails now)
        done = host(tmp_path, "lock", "weather", "--publisher-key", public)
        assert "--publisher-key" not in done.stderr
    else:
        assert (
            f"{given} is a file that holds no public key: give the key itself, ed25519:... as "
            "mcs-host keygen or public-key prints it"
        ) in said
        assert "$(cat" not in said
