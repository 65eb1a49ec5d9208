"""The test-only accelerator plug-in (tests/fixtures/plugin/sdfoo) through the rest of the seam (issue 31's done-when):
kernels on its devices, its own matrix table, a companion package and the post-install verdict, each through the real
CLI, with no file inside ``stackdoctor/`` written for it.

What is real and what stands in:

- **Kernels.** The target is a venv whose site-packages reach the real CPU build of torch
  (``STACKDOCTOR_TEST_TORCH_PYTHON``). No Foo NPU exists, so the plug-in's companion module ``torch_foo`` is a stand-in
  written below: it gives torch a ``torch.foo`` module (``is_available``, ``device_count`` = 1, ``get_device_name``,
  ``synchronize``, which counts its calls), renames torch's PrivateUse1 backend to ``foo`` so that ``"foo:0"`` parses
  as a device, and maps every ``foo`` device to the CPU under a torch function mode. The worker knows nothing of it but
  the plug-in's device spec (``DeviceSpec(device="foo", torch_api="foo", synchronize="foo.synchronize",
  imports=("torch_foo",))``, handed over as ``STACKDOCTOR_DEVICES``): it imports torch_foo, lists ``foo:0`` from
  ``torch.foo``, and runs real CPU matmuls on it, checked against a float64 reference. What this proves is the seam
  (the device string, counting, naming and synchronising come from the spec), not any NPU's numbers.
- **Matrix table and companion.** ``sdfoo/torch_foo.yaml`` is the plug-in's own table (made up, like the device);
  ``matrix show`` lists it through ``Accelerator.table``, and ``install --dry-run`` plans ``torch-foo`` beside torch
  from it (``Accelerator.companion``).
- **Verdict.** ``install`` runs for real (pip, from a local folder of wheels) into a venv: the torch wheel is a
  stand-in whose ``torch.foo.is_available()`` answers; the verdict line is the plug-in's ``verify`` from what the
  target's torch said after the install (``_worker/sd_verify.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import machine_env, run_sd, venv_bin

PLUGIN = Path(__file__).parent / "fixtures" / "plugin"
MATRIX = PLUGIN / "foo-matrix.yaml"

TORCH_FOO = '''"""STAND-IN torch_foo for stackdoctor's tests (tests/test_plugin_seam.py): no Foo NPU exists. It gives the real CPU
torch a torch.foo module with one device, "foo:0", whose tensors are CPU tensors."""
import sys
import types

import torch

torch.utils.rename_privateuse1_backend("foo")  # torch.device("foo:0") parses


def _cpu(value):
    if isinstance(value, torch.device) and value.type == "foo":
        return torch.device("cpu")
    if isinstance(value, str) and value.split(":", 1)[0] == "foo":
        return "cpu"
    if isinstance(value, (list, tuple)):
        return type(value)(_cpu(v) for v in value)
    return value


class _FooOnCpu(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*_cpu(tuple(args)), **{k: _cpu(v) for k, v in (kwargs or {}).items()})


foo = types.ModuleType("torch.foo")
foo.calls = []
foo.is_available = lambda: True
foo.device_count = lambda: 1
foo.get_device_name = lambda i=0: "Foo N1 NPU (stand-in: CPU tensors)"
foo.synchronize = lambda *a: foo.calls.append("synchronize")
torch.foo = foo
sys.modules["torch.foo"] = foo
_FooOnCpu().__enter__()
'''


def _foo_target(torch_python: str, tmp_path: Path) -> str:
    """A venv whose site-packages .pth adds the shared CPU torch and the stand-in torch_foo (the kernel worker runs
    ``python -I``, which ignores PYTHONPATH; the shared torch venv is not touched)."""
    (tmp_path / "standin" / "torch_foo").mkdir(parents=True)
    (tmp_path / "standin" / "torch_foo" / "__init__.py").write_text(TORCH_FOO)
    site = subprocess.run([torch_python, "-c", "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))"],
                          capture_output=True, text=True, timeout=300, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True, timeout=120)
    py = str(venv_bin(tmp_path / "v"))
    mine = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()
    Path(mine, "sd-test-torch.pth").write_text(f"{site}\n{tmp_path / 'standin'}\n")
    return py


def test_kernels_run_matmul_on_the_plugins_device_through_its_spec(torch_python, tmp_path):
    py = _foo_target(torch_python, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(PLUGIN)}
    data = run_sd(["kernels", "matmul", "--device", "foo:0", "--sizes", "64", "--python", py, "--json"], env=env, timeout=600).json()
    rows = [r for r in data["results"] if r["kernel"] == "matmul"]
    assert rows and all(r["device"] == "foo:0" and r["ok"] for r in rows), data
    assert {r["dtype"] for r in rows} == {"fp32", "bf16"}, rows  # bf16: a spec's default fast type
    assert all(r["max_error"] <= r["tolerance"] for r in rows), rows
    assert rows[0]["extra"]["device_name"] == "Foo N1 NPU (stand-in: CPU tensors)", rows  # torch.foo.get_device_name
    # without the plug-in, nothing tells the worker of a foo device: the same request is a device torch does not have
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # (the worker's "device foo:0 is not available to torch here (present: cpu)"): the user's input, exit 2
    out = run_sd(["kernels", "matmul", "--device", "foo:0", "--sizes", "64", "--python", py, "--json"], env=bare, timeout=600)
    assert out.rc == 2 and "--device foo:0" in out.json()["error"]["message"] and "it has: cpu" in out.stderr, (out.rc, out.stdout, out.stderr)


def test_check_quick_pass_reaches_the_plugins_device(torch_python, tmp_path):
    """check's quick kernel pass (inside the target worker) gets the same specs: a matmul on foo:0 too."""
    py = _foo_target(torch_python, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(PLUGIN), "STACKDOCTOR_TEST_HOOK": "quick=64"}
    data = run_sd(["check", "--python", py, "--json"], env=env, timeout=600).json()
    rows = [r for r in data["facts"]["kernels"]["results"] if r["kernel"] == "matmul"]
    assert any(r["device"] == "foo:0" and r["ok"] for r in rows), rows
    conv = next(r for r in data["facts"]["kernels"]["results"] if r["kernel"] == "conv")
    assert conv["device"] == "foo:0" and conv["ok"], conv  # the first accelerator gets the conv


def test_matrix_show_lists_the_plugins_own_table(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(PLUGIN)}
    out = run_sd(["matrix", "show", "--matrix", str(MATRIX), "--torch", "99.0.0"], env=env)
    assert out.rc == 0, out.stderr
    assert "Foo NPU table torch_foo.yaml (sdfoo.torch_foo/1): 1 torch-foo release(s)" in out.stdout, out.stdout
    assert "  torch-foo 99.0.0.post1: torch 99.0.0" in out.stdout, out.stdout
    bare = run_sd(["matrix", "show"], env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert "torch_foo.yaml" not in bare.stdout and "torch_npu.yaml" in bare.stdout  # the bundled Ascend kind's, always


def _foo_machine(tmp_path: Path) -> dict[str, str]:
    from test_accelerator_plugin import foo_tree

    (tmp_path / "bin").mkdir()
    return machine_env(tmp_path / "bin", foo_tree(tmp_path / "root", "1.2.3"), PYTHONPATH=str(PLUGIN), COLUMNS="200")


def test_install_dry_run_plans_the_companion_beside_torch(tmp_path, plain_python):
    """Beside torch's CPU build (the shape torch-npu has), the plug-in's companion comes from its own table, with the
    table's row as the reason."""
    env = _foo_machine(tmp_path)
    plan = run_sd(["install", "--dry-run", "--offline", "--json", "--variant", "cpu", "--matrix", str(MATRIX), "--python", plain_python],
                  env=env).json()
    names = {p["name"]: p["version"] for p in plan["packages"]}
    assert names.get("torch") == "99.0.0" and names.get("torch-foo") == "99.0.0.post1", plan
    assert any("sdfoo's torch_foo.yaml: test-only table, row 1" in r for r in plan["reasons"]), plan["reasons"]
    assert "torch-foo==99.0.0.post1" in " ".join(plan["command"]), plan["command"]


def test_install_dry_run_plans_the_companion_beside_the_kinds_own_build(tmp_path, plain_python):
    env = _foo_machine(tmp_path)
    plan = run_sd(["install", "--dry-run", "--offline", "--json", "--matrix", str(MATRIX), "--python", plain_python], env=env).json()
    assert plan["variant"] == "foo1", plan
    assert "torch-foo" in {p["name"] for p in plan["packages"]}, plan["packages"]


# ---------------------------------------------------------------------------- the workers' sentences from the specs


def _standin_torch(spec: dict, available: bool):
    """A torch object with only what a spec names: its module (is_available, device_count) at its dotted path."""
    from types import SimpleNamespace

    torch = SimpleNamespace(__version__="2.13.0+cpu")
    for dotted in filter(None, (spec.get("torch_api"), spec.get("available", "").rpartition(".")[0])):
        obj = torch
        for part in dotted.split("."):
            if not hasattr(obj, part):
                setattr(obj, part, SimpleNamespace())
            obj = getattr(obj, part)
        obj.is_available = lambda: available
        obj.device_count = lambda: 1
    return torch


@pytest.mark.parametrize("kind", ["nvidia", "intel", "apple", "ascend", "foo"])
def test_every_kinds_allreduce_reasons_read_in_chinese(kind, monkeypatch):
    """The allreduce worker's reasons are written from each kind's spec (its label, backend, library, own sentences):
    each one it can give, backend present or missing, library present or absent, has a zh template."""
    import ctypes.util
    import re
    from types import SimpleNamespace

    from stackdoctor._worker import worker_path
    from stackdoctor.rules import catalog

    monkeypatch.syspath_prepend(str(worker_path("sd_allreduce.py").parent))
    import sd_allreduce

    code = "import json; from stackdoctor import accelerators; print(json.dumps(accelerators.device_specs()))"
    specs = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                                      env={**os.environ, "PYTHONPATH": str(PLUGIN)}).stdout)
    monkeypatch.setenv("STACKDOCTOR_DEVICES", json.dumps({kind: specs[kind]}))
    spec = sd_allreduce.sd_devices.specs()[0]
    torch = _standin_torch(spec, True)
    reasons = set()
    for has_backend in (True, False):
        for library in ("/usr/lib/libx.so", None):
            dist = SimpleNamespace(is_backend_available=lambda b, h=has_backend: h)
            if spec.get("backend_check"):
                setattr(dist, spec["backend_check"], lambda h=has_backend: h)
            monkeypatch.setattr(ctypes.util, "find_library", lambda name, lib=library: lib)
            chosen = sd_allreduce.choose_backend(torch, dist, "auto", None)
            reasons.add(chosen[2])
            if has_backend and (library or not spec.get("library")):
                assert chosen[:2] == (spec["backend"], spec["device"]), chosen
    backend, error = sd_allreduce._rank_device(_standin_torch(spec, False), spec["backend"], spec["device"], 0)
    reasons.add(error)
    for reason in reasons:
        zh = catalog.sentence(reason, "zh")
        assert re.search(r"[\u4e00-\u9fff]", zh), reason


# ---------------------------------------------------------------------------- the post-install verdict, a real install


@pytest.mark.posix
@pytest.mark.parametrize(("answer", "ok", "said"), [
    (True, True, "torch 99.0.0+foo1 imports in the target and sees the Foo NPU"),
    (False, False, "torch 99.0.0+foo1 imports in the target, but torch.foo.is_available() is False"),
], ids=["sees-it", "does-not"])
def test_a_real_install_of_a_foo_build_ends_with_the_plugins_verdict(answer, ok, said, tmp_path):
    """``stackdoctor install`` plans the foo1 build (the plug-in's matrix file), pip installs it from a folder (a
    stand-in torch wheel whose ``torch.foo.is_available()`` answers ``answer``), the target's torch is asked the
    plug-in's question after the install (``_worker/sd_verify.py``), and the verdict is the plug-in's ``verify``."""
    from indexserver import FAKE_MARK, WheelSpec, _torch_files, build_wheel
    from test_accelerator_plugin import STANDIN_TORCH
    from test_ascend_install import _pip_venv
    from test_install import isolated_env

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    init = f"# {FAKE_MARK}\n" + STANDIN_TORCH.replace("ANSWER", repr(answer))
    spec = WheelSpec("torch", "99.0.0+foo1", "py3-none-any", [], {**_torch_files("99.0.0+foo1"), "torch/__init__.py": init})
    (wheels / spec.filename).write_bytes(build_wheel(spec))
    # the plug-in's companion, planned beside its own build (its torch_foo.yaml pairs 99.0.0.post1 with torch 99.0.0)
    companion = WheelSpec("torch-foo", "99.0.0.post1", "py3-none-any", ["torch==99.0.0"], {"torch_foo/__init__.py": f"# {FAKE_MARK}\n"})
    (wheels / companion.filename).write_bytes(build_wheel(companion))
    py = _pip_venv(tmp_path / "venv")
    env = {**isolated_env(tmp_path), **_foo_machine(tmp_path)}
    out = run_sd(["install", "--python", py, "--matrix", str(MATRIX), "--no-index", "--find-links", str(wheels), "--yes"], env=env, timeout=300)
    screen = out.stdout + out.stderr
    assert (out.rc == 0) is ok, screen[-3000:]
    assert said in screen, screen[-3000:]
    version = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == "99.0.0+foo1", version
    companion_there = subprocess.run([py, "-m", "pip", "show", "torch-foo"], capture_output=True, text=True, timeout=60)
    assert "Version: 99.0.0.post1" in companion_there.stdout, screen[-3000:]
