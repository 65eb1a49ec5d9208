"""The accelerator seam's registry (issue 45): ``stackdoctor.kinds`` names the kinds the package ships
(``stackdoctor.accelerators.KINDS``) and loads them as it loads a plug-in's entry point, on first use. Each case runs
in a fresh interpreter, where the import order is the one under test."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def _run(code: str) -> dict:
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_the_seam_imports_no_kind_until_asked():
    out = _run("import json, sys\nfrom stackdoctor import kinds\n"
               "before = sorted(m for m in sys.modules if m.startswith('stackdoctor.accelerators.'))\n"
               "names = [a.name for a in kinds.ALL]\n"
               "print(json.dumps({'before': before, 'names': names}))")
    assert out["before"] == []
    assert out["names"] == ["jetson", "nvidia", "amd", "intel", "apple", "ascend"]


@pytest.mark.parametrize("first", ["stackdoctor.accelerators.nvidia", "stackdoctor.accelerators.amd.rules",
                                   "stackdoctor.accelerators.jetson", "stackdoctor.accelerators.ascend"])
def test_a_kind_imported_before_the_seam_still_finds_every_kind(first):
    """A kind's package imports the seam; the seam must not load the kinds while that import is under way."""
    out = _run(f"import json, importlib\nimportlib.import_module({first!r})\nfrom stackdoctor import kinds\n"
               "print(json.dumps({'names': [a.name for a in kinds.ALL], 'probes': [s for s, _ in kinds.probes()]}))")
    assert out["names"] == ["jetson", "nvidia", "amd", "intel", "apple", "ascend"]
    assert out["probes"] == ["jetson", "nvidia", "cuda_toolkit", "rocm", "intel", "apple", "ascend"]


def test_threads_asking_at_once_share_one_registry():
    out = _run("import json, threading\nfrom stackdoctor import kinds\nseen, errors = [], []\n"
               "def ask():\n    try:\n        seen.append(id(kinds.ALL))\n    except Exception as exc:\n        errors.append(repr(exc))\n"
               "ts = [threading.Thread(target=ask) for _ in range(16)]\n[t.start() for t in ts]\n[t.join() for t in ts]\n"
               "print(json.dumps({'distinct': len(set(seen)), 'answers': len(seen), 'errors': errors}))")
    assert out == {"distinct": 1, "answers": 16, "errors": []}
