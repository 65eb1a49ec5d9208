"""Issue 43: companions never move a working torch. Real pip installs into a real venv from a real index on 127.0.0.1
(tests/indexserver.py; its wheels are SYNTHETIC stand-ins, not PyTorch), through the ``stackdoctor install`` command.

- ``install torchvision`` into a venv holding a working torch 2.13.0+cpu keeps that torch and adds the paired
  torchvision 0.28.0+cpu (the companion present);
- with the companion absent from the sources (a find-links folder holding torch and other variants' torchvision), it
  says torchvision 0.28.0+cpu is on none of them and where it is published, and changes nothing: before issue 43 it
  replaced torch with another variant whose torchvision the sources had.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import copy_venv, new_venv, run_stackdoctor, venv_bin  # noqa: E402
from indexserver import IndexServer  # noqa: E402
from test_install import isolated_env  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server():
    srv = IndexServer().start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def seeded(server, tmp_path_factory):
    """A fresh venv (real pip) holding fake torch 2.13.0+cpu alone."""
    d = tmp_path_factory.mktemp("seed")
    venv = d / "venv"
    new_venv(venv)
    cmd = [str(venv_bin(venv)), "-m", "pip", "install", "-q", "torch==2.13.0+cpu", "--index-url", f"{server.base()}/cpu"]
    subprocess.run(cmd, check=True, env=isolated_env(d))
    return venv


@pytest.fixture
def venv(seeded, tmp_path):
    dst = tmp_path / "venv"
    copy_venv(seeded, dst)
    return dst


def family(venv: Path) -> dict[str, str]:
    code = "import json, importlib.metadata as m; print(json.dumps({d.metadata['Name'].lower(): d.version for d in m.distributions()}))"
    have = json.loads(subprocess.run([str(venv_bin(venv)), "-I", "-c", code], capture_output=True, text=True, check=True).stdout)
    return {k: have[k] for k in ("torch", "torchvision", "torchaudio") if k in have}


def sd(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = isolated_env(tmp_path)
    env["STACKDOCTOR_MATRIX"] = ""
    return run_stackdoctor([sys.executable, "-m", "stackdoctor", "install", *args], env=env, text=True, timeout=300,
                           stdin=subprocess.DEVNULL, cwd=REPO)


def test_adding_torchvision_keeps_the_working_cpu_torch(server, venv, tmp_path):
    assert family(venv) == {"torch": "2.13.0+cpu"}
    p = sd(["torchvision", "--python", str(venv_bin(venv)), "--index-base", server.base(), "--yes", "--json"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert (plan["torch_version"], plan["variant"]) == ("2.13.0", "cpu"), plan["reasons"]
    assert plan["reasons"][0].startswith("torch 2.13.0+cpu is installed and works, so adding torchvision keeps it"), plan["reasons"]
    assert family(venv) == {"torch": "2.13.0+cpu", "torchvision": "0.28.0+cpu"}


def test_a_companion_the_sources_lack_is_said_and_torch_stays(server, venv, tmp_path):
    links = tmp_path / "links"  # torch of every variant, torchvision only for cu126: another variant could serve it
    names = [s.filename for s in server.state.specs if s.tag.startswith(("cp311", "py3"))
             and (s.name == "torch" or s.name.startswith("nvidia-") or (s.name == "torchvision" and "+cu126" in s.version))]
    server.write_find_links(links, names)
    p = sd(["torchvision", "--python", str(venv_bin(venv)), "--no-index", "--find-links", str(links), "--yes"], tmp_path)
    assert p.returncode != 0, p.stderr[-3000:]
    err = p.stderr
    assert "torchvision 0.28.0+cpu" in err and "it has no 0.28.0+cpu at all" in err, err[-3000:]
    assert "it is published on https://download.pytorch.org/whl/cpu" in err, err[-3000:]
    assert "Traceback" not in err
    assert family(venv) == {"torch": "2.13.0+cpu"}  # not replaced by 2.12.0+cu126 with its torchvision
