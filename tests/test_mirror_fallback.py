"""A ``--mirror`` that does not answer beside a find-links folder that holds torch (issue 35, item 4): the plan uses
the folder's build (the mirror's failure a warning), ``--emit requirements`` points at the folder, and a real pip
install from it works. Without such a folder the mirror's failure stays the answer (exit 2, one sentence).

Real CLI runs against tests/sourceserver.py on 127.0.0.1; the mirror is a flat "pytorch-wheels" one on a closed
port (what ``--mirror aliyun`` is on a machine that cannot reach it), named in a ``--matrix`` file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_install import family, imports_fake_torch  # noqa: E402
from test_install_sources import DEPS, T13, base_venv, one_error, pip_conf, py, sd, src, user_env, venv  # noqa: E402,F401

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the generated wheels are cp311")

DEAD_MIRROR = "http://127.0.0.1:9/pytorch-wheels"


def _dead_mirror(tmp_path: Path) -> list[str]:
    m = tmp_path / "mirrors.yaml"
    m.write_text(f"mirrors:\n  - {{name: deadflat, url: '{DEAD_MIRROR}', layout: flat, source: 'tests/test_mirror_fallback.py'}}\n")
    return ["--mirror", "deadflat", "--matrix", str(m)]


@pytest.mark.parametrize("how", ["--find-links", "pip.conf"])
def test_dead_mirror_beside_a_folder_with_torch_uses_the_folder(src, venv, tmp_path, how):
    folder = src.write_folder(tmp_path / "wheels", [T13, *DEPS])
    if how == "--find-links":
        env, args = user_env(tmp_path, PIP_INDEX_URL=src.pypi()), ["--find-links", str(folder)]
    else:
        env, args = user_env(tmp_path, PIP_CONFIG_FILE=pip_conf(tmp_path, **{"index-url": src.pypi(), "find-links": str(folder)})), []
    base = ["--python", py(venv), *args, *_dead_mirror(tmp_path)]

    p = sd([*base, "--dry-run", "--json"], env)
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert plan["error"] is None and plan["torch_version"] == "2.13.0" and plan["variant"] == "cpu"
    assert plan["packages"][0]["source"] == str(folder) and plan["packages"][0]["wheel"] == T13
    status = {s["url"]: s["status"] for s in plan["sources"]}
    assert status[f"{DEAD_MIRROR}/cpu/"] == "unreachable" and status[str(folder)] == "ok"
    assert any(w.startswith(f"{DEAD_MIRROR}/cpu/ did not answer") for w in plan["warnings"]), plan["warnings"]
    assert DEAD_MIRROR not in " ".join(plan["command"])

    emitted = sd([*base, "--emit", "requirements"], env)
    assert emitted.returncode == 0, emitted.stderr[-3000:]
    assert "torch==2.13.0+cpu" in emitted.stdout and DEAD_MIRROR not in emitted.stdout and "127.0.0.1:9" not in emitted.stdout

    done = sd([*base, "--yes"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert family(venv) == {"torch": "2.13.0+cpu"} and imports_fake_torch(venv) == "2.13.0+cpu"


def test_dead_mirror_alone_is_still_the_answer(src, venv, tmp_path):
    env = user_env(tmp_path, PIP_INDEX_URL=src.pypi())
    p = sd(["--python", py(venv), "--dry-run", *_dead_mirror(tmp_path)], env)
    assert p.returncode == 2
    assert one_error(p).startswith(f"stackdoctor: cannot connect to 127.0.0.1:9 for {DEAD_MIRROR}/cpu/")
    assert family(venv) == {}


def test_dead_mirror_beside_a_folder_without_torch_is_still_the_answer(src, venv, tmp_path):
    folder = src.write_folder(tmp_path / "deps-only", DEPS)
    env = user_env(tmp_path, PIP_INDEX_URL=src.pypi())
    p = sd(["--python", py(venv), "--dry-run", "--find-links", str(folder), *_dead_mirror(tmp_path)], env)
    assert p.returncode == 2
    assert one_error(p).startswith(f"stackdoctor: cannot connect to 127.0.0.1:9 for {DEAD_MIRROR}/cpu/")
