"""`stackdoctor install` where users are: their pip.conf / uv project, mirrors, folders, dead indexes.

Real pip and real uv install into real venvs from package sources on 127.0.0.1 (tests/sourceserver.py:
a PyPI-style mirror that has torch only as PyPI's label-less default build, a PEP 503 PyTorch index, a
mirror in the flat "pytorch-wheels" layout, and an index that answers 503). The wheels are GENERATED
(a few hundred bytes; "torch" says ``STACKDOCTOR_FAKE_TORCH = True``): NOT PyTorch. No traffic leaves
127.0.0.0/8: the PyTorch index stackdoctor would add is pointed at a closed port (``STACKDOCTOR_INDEX_BASE``),
standing for download.pytorch.org being unreachable, as it is on this build machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import copy_venv, new_venv, run_stackdoctor  # noqa: E402
from sourceserver import SourceServer  # noqa: E402
from test_install import REPO, family, imports_fake_torch, installed, isolated_env, py  # noqa: E402

DEAD_PYTORCH = "http://127.0.0.1:9/whl"
T13 = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
DEPS = ["filelock-3.20.0-py3-none-any.whl", "sympy-1.14.0-py3-none-any.whl", "mpmath-1.3.0-py3-none-any.whl"]

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the generated wheels are cp311")


def newest_cpu() -> str:
    """The newest release whose Linux x86_64 CPU build the shipped matrix knows or announces (issue 43: 2.15.0's is announced)."""
    from stackdoctor.matrix import load_matrix

    return next(str(r.version) for r in load_matrix().releases if r.build_state("cpu", "linux", "x86_64") in ("known", "announced"))


@pytest.fixture(scope="module")
def src():
    s = SourceServer().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory):
    d = tmp_path_factory.mktemp("basevenv")
    new_venv(d / "venv")
    return d / "venv"


@pytest.fixture
def venv(base_venv, tmp_path):
    dst = tmp_path / "venv"
    copy_venv(base_venv, dst)
    return dst


def user_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A user's environment: isolated from this machine's pip configuration, no default index of its own."""
    env = isolated_env(tmp_path)
    env.pop("PIP_INDEX_URL", None)
    env["STACKDOCTOR_INDEX_BASE"] = DEAD_PYTORCH
    env["STACKDOCTOR_MATRIX"] = ""
    env.update(extra)
    return env


def pip_conf(tmp_path: Path, **settings: str) -> str:
    path = tmp_path / "pip.conf"
    path.write_text("[global]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()))
    return str(path)


def sd(args: list[str], env: dict[str, str], cwd: Path | str = REPO, timeout: float = 300) -> subprocess.CompletedProcess:
    p = run_stackdoctor(
        [sys.executable, "-m", "stackdoctor", "install", *args], env=env, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd,
    )
    assert "Traceback" not in p.stderr + p.stdout, p.stderr[-3000:]
    return p


def one_error(p: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("stackdoctor: ")]
    assert len(lines) == 1, p.stderr[-3000:]
    return lines[0]


# ---------------------------------------------------------------------------- no flags: the user's configuration


def test_pip_conf_mirror_without_cuda_builds_plus_folder_installs_with_no_flags(src, venv, tmp_path):
    """pip.conf names a PyPI-style mirror (only PyPI's label-less cu130 builds) and a find-links folder with
    torch 2.13.0+cpu; download.pytorch.org does not answer. `install --yes` with no flags installs the newest CPU
    build a configured source has, from the folder, its dependencies from the mirror, with no index flag."""
    folder = src.write_folder(tmp_path / "wheels", [T13])
    env = user_env(tmp_path, PIP_CONFIG_FILE=pip_conf(tmp_path, **{"index-url": src.pypi(), "find-links": str(folder)}))
    p = sd(["--python", py(venv), "--yes", "--json"], env)
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert plan["torch_version"] == "2.13.0" and plan["variant"] == "cpu"
    assert plan["command"] == [py(venv), "-m", "pip", "install", "torch==2.13.0+cpu"]  # pip's own configuration does the rest
    assert plan["command_env"] == {}
    torch_pkg = plan["packages"][0]
    assert torch_pkg["source"] == str(folder) and torch_pkg["wheel"] == T13
    status = {s["url"]: s["status"] for s in plan["sources"]}
    assert status[src.pypi()] == "ok" and status[str(folder)] == "ok" and status[f"{DEAD_PYTORCH}/cpu"] == "unreachable"
    assert f"torch {newest_cpu()} cpu is the newest build for this machine, but none of the sources that answered has it" in plan["reasons"][0]
    # the mirror's torch is PyPI's default build: which variant, and whether it fits
    assert any(
        f"{src.pypi()} has torch 2.14.0 only as PyPI's default build, which is cu130" in w and "on the CPU only" in w for w in plan["warnings"]
    ), plan["warnings"]
    assert f"{DEAD_PYTORCH}/cpu did not answer" in p.stderr and "skipped, not retried" in p.stderr
    assert family(venv) == {"torch": "2.13.0+cpu"} and imports_fake_torch(venv) == "2.13.0+cpu"
    have = installed(venv)
    assert have["filelock"] == "3.20.0" and have["sympy"] == "1.14.0" and have["mpmath"] == "1.3.0"
    assert src.count("/pypi/files/torch-") == 0  # the label-less cu130 build was never downloaded

    # already satisfied: said, and nothing changes
    record = next((venv / "lib").glob("python3*/site-packages/torch-2.13.0+cpu.dist-info/RECORD"))
    before = record.stat().st_mtime_ns
    again = sd(["--python", py(venv), "--yes"], env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"already satisfied: {py(venv)} has torch 2.13.0+cpu, the planned build, complete (every file's sha256 checked) and importing; nothing was changed." in again.stderr
    assert record.stat().st_mtime_ns == before and "done:" not in again.stderr


def test_pinned_and_satisfied_is_said_before_any_index_is_asked(src, venv, tmp_path):
    folder = src.write_folder(tmp_path / "wheels", [T13, *DEPS])
    env = user_env(tmp_path, PIP_CONFIG_FILE=pip_conf(tmp_path, **{"index-url": src.down(), "find-links": str(folder)}))
    first = sd(["--python", py(venv), "--torch", "2.13.0", "--yes"], env)
    assert first.returncode == 0, first.stderr[-3000:]
    hits = src.count("/down/")
    again = sd(["--python", py(venv), "--torch", "2.13.0", "--yes", "--json"], env)
    assert again.returncode == 0 and json.loads(again.stdout)["satisfied"] is True
    assert "already satisfied" in again.stderr and src.count("/down/") == hits  # no index was asked


# ---------------------------------------------------------------------------- mirrors


@pytest.mark.parametrize("how", ["url", "name"])
def test_flat_pytorch_wheels_mirror_by_mirror_option(src, venv, tmp_path, how):
    """A mirror in the flat "pytorch-wheels" layout (a listing page per variant, '+' written &#43;), given by
    --mirror URL (layout found by asking) or by a name a --matrix file gives it."""
    env = user_env(tmp_path, PIP_INDEX_URL=src.pypi())
    args = ["--python", py(venv), "--yes", "--json"]
    if how == "url":
        args += ["--mirror", src.flat_mirror()]
    else:
        m = tmp_path / "mirrors.yaml"
        m.write_text(f"mirrors:\n  - {{name: testflat, url: '{src.flat_mirror()}', layout: flat, source: 'tests/sourceserver.py'}}\n")
        args += ["--mirror", "testflat", "--matrix", str(m)]
    p = sd(args, env)
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    listing = f"{src.flat_mirror()}/cpu/"
    assert plan["torch_version"] == "2.14.0" and plan["packages"][0]["source"] == listing
    assert plan["command"][-2:] == ["--find-links", listing]
    assert f"{DEAD_PYTORCH}/cpu" not in json.dumps(plan["sources"])  # a mirror replaces the PyTorch index
    assert family(venv) == {"torch": "2.14.0+cpu"}
    assert src.count("/pytorch-wheels/cpu/torch-2.14.0") >= 1


def test_unknown_mirror_name_is_one_sentence(venv, tmp_path):
    p = sd(["--python", py(venv), "--mirror", "nosuch", "--dry-run"], user_env(tmp_path))
    assert p.returncode == 2
    assert one_error(p) == "stackdoctor: --mirror nosuch: not a mirror the compatibility matrix knows (known: aliyun, sjtu, nju); give its URL instead."


# ---------------------------------------------------------------------------- uv


def test_uv_project_with_tool_uv_indexes_installs_with_no_flags(src, venv, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0.1"\n\n'
        f'[[tool.uv.index]]\nname = "pytorch-cpu"\nurl = "{src.torch_index()}/cpu"\n\n'
        f'[[tool.uv.index]]\nname = "mirror"\nurl = "{src.pypi()}"\ndefault = true\n'
    )
    env = user_env(tmp_path)
    env.pop("UV_NO_CONFIG")
    p = sd(["--python", py(venv), "--installer", "uv", "--yes", "--json"], env, cwd=project)
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert plan["command"][1:] == ["pip", "install", "--python", py(venv), "torch==2.14.0+cpu"]  # uv reads the project itself
    src_by_url = {s["url"]: s for s in plan["sources"]}
    assert src_by_url[f"{src.torch_index()}/cpu"]["origin"] == f"{project / 'pyproject.toml'} [tool.uv] index pytorch-cpu"
    assert src_by_url[src.pypi()]["role"] == "default"
    assert plan["packages"][0]["source"] == f"{src.torch_index()}/cpu/torch/"
    assert family(venv) == {"torch": "2.14.0+cpu"} and installed(venv)["sympy"] == "1.14.0"


# ---------------------------------------------------------------------------- an index that does not answer


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_unreachable_index_is_skipped_with_a_warning_not_retried(src, venv, tmp_path, installer):
    """A configured extra index answers 503 (pip and uv retry those). stackdoctor asks it once, says so,
    and hands the installer only the sources that answered: the failing index sees no request from pip/uv."""
    env = user_env(tmp_path, STACKDOCTOR_INDEX_BASE=src.torch_index())
    cwd: Path | str = REPO
    if installer == "pip":
        env["PIP_CONFIG_FILE"] = pip_conf(tmp_path, **{"index-url": src.pypi(), "extra-index-url": src.down()})
    else:
        env.pop("UV_NO_CONFIG")
        cwd = tmp_path / "proj"
        cwd.mkdir()
        (cwd / "uv.toml").write_text(f'[[index]]\nurl = "{src.down()}"\n\n[[index]]\nurl = "{src.pypi()}"\ndefault = true\n')
    before = src.count("/down/")
    p = sd(["--python", py(venv), "--installer", installer, "--yes", "--json"], env, cwd=cwd)
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    asked = src.count("/down/") - before
    assert asked == 1, asked  # stackdoctor's one question (torch's page); pip/uv never asked
    assert f"{src.down()} did not answer (" in p.stderr and "HTTP 503" in p.stderr and "it is skipped, not retried" in p.stderr
    down = next(s for s in plan["sources"] if s["url"] == src.down())
    assert down["status"] == "failing" and down["used"] is False
    if installer == "pip":
        assert plan["command_env"] == {"PIP_EXTRA_INDEX_URL": " "}
        assert plan["command"][-2:] == ["--extra-index-url", f"{src.torch_index()}/cpu"]
    else:
        assert "--no-config" in plan["command"] and src.down() not in plan["command"]
    assert family(venv) == {"torch": "2.14.0+cpu"}


def test_dry_run_json_with_every_index_unreachable_prints_the_plan_with_an_error(venv, tmp_path):
    env = user_env(tmp_path, PIP_INDEX_URL="http://127.0.0.1:9/simple")
    p = sd(["--python", py(venv), "--dry-run", "--json", "--index-timeout", "2"], env)
    assert p.returncode == 2
    doc = json.loads(p.stdout)
    assert doc["schema"] == "stackdoctor.plan/1" and doc["variant"] == "cpu"
    assert doc["error"]["kind"] == "index" and doc["error"]["exit_code"] == 2
    line = one_error(p)
    assert line == f"stackdoctor: {doc['error']['message']}"
    assert "is on none of the sources" in line and "did not answer" in line


# ---------------------------------------------------------------------------- --find-links and --offline


def test_find_links_adds_a_source_and_offline_names_missing_dependencies(src, venv, tmp_path):
    folder = src.write_folder(tmp_path / "only-torch", [T13])
    env = user_env(tmp_path, PIP_INDEX_URL=src.pypi())
    # --offline: the folder alone must serve everything; it lacks torch's dependencies
    off = sd(["--python", py(venv), "--offline", "--find-links", str(folder), "--torch", "2.13.0", "--yes"], env)
    assert off.returncode == 2
    assert one_error(off) == (
        f"stackdoctor: filelock, sympy>=1.13.3 (needed by torch==2.13.0+cpu) are in none of {folder}, and no index can serve them"
        " (--offline, --no-index, or every index unreachable); add the wheels to the folder, or allow an index."
    )
    assert family(venv) == {}
    # without --offline the folder is one more source (as pip's --find-links): dependencies come from the index
    on = sd(["--python", py(venv), "--find-links", str(folder), "--torch", "2.13.0", "--yes", "--json"], env)
    assert on.returncode == 0, on.stderr[-3000:]
    plan = json.loads(on.stdout)
    assert plan["command"][-2:] == ["--find-links", str(folder)] and "--no-index" not in plan["command"]
    assert family(venv) == {"torch": "2.13.0+cpu"} and installed(venv)["sympy"] == "1.14.0"


def test_offline_with_a_complete_folder_installs_without_any_index(src, venv, tmp_path):
    folder = src.write_folder(tmp_path / "wheelhouse", [T13, *DEPS])
    env = user_env(tmp_path, PIP_INDEX_URL=src.pypi())
    before = src.count("/")
    p = sd(["--python", py(venv), "--offline", "--find-links", str(folder), "--yes", "--json"], env)
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert plan["torch_version"] == "2.13.0"  # the newest CPU build the folder has
    assert "--no-index" in plan["command"] and plan["command"][-2:] == ["--find-links", str(folder)]
    assert src.count("/") == before  # no request at all
    assert family(venv) == {"torch": "2.13.0+cpu"}


# ---------------------------------------------------------------------------- input errors and what-ifs


@pytest.mark.parametrize(
    "args, code, sentence",
    [
        (["--driver", "abc"], 2, "stackdoctor: --driver abc is not an NVIDIA driver version (expected like 550.54.14 or 580)."),
        (["--gpu", "sm_89"], 2, "stackdoctor: --gpu sm_89: this machine has no NVIDIA driver to assume; add --driver VERSION to plan a CUDA build."),
        (["--installer", "poetry"], 2, "stackdoctor: --installer must be one of pip, uv, conda, mamba, micromamba, pixi, not 'poetry'."),
        (["--emit", "Pipfile"], 2, "stackdoctor: --emit must be requirements, uv or environment.yml, not 'Pipfile'."),
    ],
)
def test_input_errors_are_one_sentence(venv, tmp_path, args, code, sentence):
    p = sd(["--python", py(venv), "--dry-run", *args], user_env(tmp_path))
    assert p.returncode == code
    assert one_error(p) == sentence
    assert p.stderr.count("\n") == 1  # one line, not a plan with 41 rejected lines


def test_a_variant_no_release_publishes_names_the_known_ones(venv, tmp_path):
    p = sd(["--python", py(venv), "--dry-run", "--variant", "cu999"], user_env(tmp_path))
    assert p.returncode == 2
    line = one_error(p)
    assert line.startswith("stackdoctor: no torch release publishes cu999 (known variants: cpu, cu132, cu130, cu129, cu128, ")
    assert "rocm7.2" in line and line.endswith(", xpu).")


def test_a_variant_the_release_lacks_says_so_without_an_empty_rejected_list(venv, tmp_path):
    p = sd(["--python", py(venv), "--dry-run", "--json", "--torch", "2.14.0", "--variant", "cu128"], user_env(tmp_path))
    assert p.returncode == 1
    plan = json.loads(p.stdout)
    assert plan["variant"] is None and plan["rejected"] == []
    assert plan["reasons"][0].startswith("torch 2.14.0 publishes no cu128 build (torch 2.14.0 has cpu, cu126, cu130, cu132,")
    assert not any("see rejected" in r for r in plan["reasons"])
    assert plan["suggestions"][0].endswith("is the newest release with a cu128 build (--torch 2.10.0)") or "cu128" in plan["suggestions"][0]


def test_what_ifs_are_dry_runs_for_a_hypothetical_machine(venv, tmp_path):
    before = family(venv)
    p = sd(["--python", py(venv), "--driver", "580.65.06", "--gpu", "sm_89", "--yes"], user_env(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    out = p.stdout
    assert "Plan for a hypothetical machine: NVIDIA driver 580.65.06, GPU sm_89 (otherwise this machine: Python 3.11," in out
    assert "command (on that machine; not run here):" in out and "python3 -m pip install torch==2.15.0\n" in out  # PyPI's default build of 2.15.0 is cu132
    assert py(venv) not in out  # no local command shown as if it could run
    assert "dry run (--python-version, --platform, --replay, --driver, --gpu and --gfx only plan): nothing was changed." in p.stderr
    assert family(venv) == before


# ---------------------------------------------------------------------------- pip constraints, --json on input errors


def test_pip_constraint_is_honoured_when_unpinned_and_named_when_pinned(src, venv, tmp_path):
    cons = tmp_path / "constraints.txt"
    cons.write_text("torch<=2.13.0\n")
    conf = pip_conf(tmp_path, **{"index-url": src.pypi(), "constraint": str(cons)})
    env = user_env(tmp_path, PIP_CONFIG_FILE=conf, STACKDOCTOR_INDEX_BASE=src.torch_index())
    p = sd(["--python", py(venv), "--dry-run", "--json"], env)
    assert p.returncode == 0, p.stderr[-2000:]
    plan = json.loads(p.stdout)
    assert plan["torch_version"] == "2.13.0"  # the index has 2.14.0+cpu, the user's constraint caps torch
    assert plan["reasons"][0].startswith(f"torch {newest_cpu()} cpu is the newest build for this machine, but the constraint torch<=2.13.0 ({cons})")
    pinned = sd(["--python", py(venv), "--dry-run", "--torch", "2.14.0"], env)
    assert pinned.returncode == 2
    assert one_error(pinned) == (
        f"stackdoctor: torch 2.14.0 conflicts with the constraint torch<=2.13.0 in {cons} (pip's `constraint` setting, "
        f"{conf} [global] constraint); pick a torch within it with --torch."
    )


def test_json_prints_the_document_with_the_error_for_an_input_error(venv, tmp_path):
    p = sd(["--python", py(venv), "--json", "--driver", "abc"], user_env(tmp_path))
    assert p.returncode == 2
    doc = json.loads(p.stdout)
    assert doc["schema"] == "stackdoctor.plan/1" and doc["variant"] is None
    assert doc["error"] == {"kind": "usage", "message": "--driver abc is not an NVIDIA driver version (expected like 550.54.14 or 580).", "exit_code": 2}


def test_mirror_and_index_base_together_is_one_sentence(venv, tmp_path):
    p = sd(["--python", py(venv), "--dry-run", "--mirror", "nju", "--index-base", "http://127.0.0.1:9/whl"], user_env(tmp_path))
    assert p.returncode == 2
    assert one_error(p) == "stackdoctor: --mirror and --index-base both name the PyTorch index; give one."
