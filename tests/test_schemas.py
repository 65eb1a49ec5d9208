"""The shipped JSON Schemas: each equals what stackdoctor/_schema.py generates from the dataclasses, each is a
valid draft 2020-12 schema, and the suite's session hook (tests/conftest.py) checks every plan, kernels and
diff document a stackdoctor run prints against them, as it does every report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from helpers import SCHEMA_FILES, check_document, run_sd, shipped_schema

from stackdoctor import _schema

SCHEMAS_DIR = Path(_schema.__file__).resolve().parent / "schemas"


@pytest.mark.parametrize("name", sorted(_schema.SCHEMAS))
def test_shipped_schema_is_what_the_generator_makes(name):
    """A field added to a dataclass without regenerating (python -m stackdoctor._schema --write) fails here."""
    shipped = (SCHEMAS_DIR / name).read_text(encoding="utf-8")
    assert shipped == _schema.render(_schema.SCHEMAS[name][1]()), f"{name} is stale: run python -m stackdoctor._schema --write"


@pytest.mark.parametrize("name", sorted(_schema.SCHEMAS))
def test_shipped_schema_is_valid_and_names_its_document(name):
    schema = json.loads((SCHEMAS_DIR / name).read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    kind = _schema.SCHEMAS[name][0]
    assert schema["properties"]["schema"] == {"const": kind}
    assert SCHEMA_FILES[kind] == name  # the session hook knows every shipped schema
    assert shipped_schema(name) == schema  # and the installed package ships this file


def test_every_schema_file_is_generated():
    assert sorted(p.name for p in SCHEMAS_DIR.glob("*.json")) == sorted(_schema.SCHEMAS)


def test_generator_prints_one_schema():
    out = subprocess.run([sys.executable, "-m", "stackdoctor._schema", "plan"], capture_output=True, text=True, check=True).stdout
    assert out == (SCHEMAS_DIR / "plan.schema.json").read_text(encoding="utf-8")


def test_the_checks_can_fail():
    """A document that breaks its schema is rejected (so the hook's silence means something)."""
    with pytest.raises(jsonschema.ValidationError):
        check_document({"schema": "stackdoctor.plan/1", "torch_version": "2.13.0"})  # most fields missing
    with pytest.raises(jsonschema.ValidationError):
        check_document({"schema": "stackdoctor.diff/2", "a": {}, "b": {}, "count": -1, "differences": []})
    with pytest.raises(jsonschema.ValidationError):
        check_document({"schema": "stackdoctor.kernels/1", "stackdoctor_version": "0", "target": "/x", "ran": "yes"})
    assert check_document({"schema": "something else"}) is False


def _report(tmp_path: Path, name: str, driver: str) -> Path:
    facts = {"nvidia": {"driver_version": driver}, "python": {"version": "3.11.7"}}
    p = tmp_path / name
    p.write_text(json.dumps({"schema": "stackdoctor.report/1", "facts": facts, "probes": [], "findings": []}))
    return p


def test_plan_and_diff_outputs_are_checked_as_the_suite_produces_them(tmp_path, _every_document_keeps_the_contract):
    seen = _every_document_keeps_the_contract
    before = dict(seen)
    a, b = _report(tmp_path, "a.json", "550.54.14"), _report(tmp_path, "b.json", "580.82.07")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NO_COLOR": "1"}
    plan = run_sd(["install", "--replay", str(a), "--offline", "--json"], env=env)
    assert plan.rc in (0, 1) and plan.json()["schema"] == "stackdoctor.plan/1"
    diff = run_sd(["diff", str(a), str(b), "--json"], env=env)
    assert diff.rc == 1 and diff.json()["count"] >= 1
    assert seen["stackdoctor.plan/1"] == before["stackdoctor.plan/1"] + 1
    assert seen["stackdoctor.diff/2"] == before["stackdoctor.diff/2"] + 1


def test_kernels_output_is_checked_as_the_suite_produces_it(tmp_path, _every_document_keeps_the_contract):
    """A kernels run whose target's torch cannot be imported (its CUDA runtime library is gone, as after a partial
    uninstall): a failed result, still a valid kernels/1 document, seen by the hook."""
    seen = _every_document_keeps_the_contract
    before = seen["stackdoctor.kernels/1"]
    venv = tmp_path / "broken-torch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    from helpers import venv_bin

    python = str(venv_bin(venv))
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "torch").mkdir(parents=True)
    (Path(purelib) / "torch" / "__init__.py").write_text(
        'raise ImportError("libcudart.so.12: cannot open shared object file: No such file or directory")\n')
    run = run_sd(["kernels", "matmul", "--device", "cpu", "--sizes", "32", "--python", python, "--json"])
    doc = run.json()
    assert run.rc == 1 and doc["ran"] is False and [f["code"] for f in doc["findings"]] == ["kernel-failed"]
    assert "libcudart.so.12" in json.dumps(doc)
    assert seen["stackdoctor.kernels/1"] == before + 1


def test_kernels_on_a_target_without_torch_is_one_sentence(plain_python):
    """No torch at all is a wrong target, not a kernel result: one sentence naming the fix, exit 2, and on stdout no
    kernels document but the error document every --json command gives when it cannot run (issue 35)."""
    run = run_sd(["kernels", "matmul", "--device", "cpu", "--sizes", "32", "--python", plain_python, "--json"])
    assert run.rc == 2
    doc = json.loads(run.stdout)
    assert check_document(doc) and doc["schema"] == "stackdoctor.error/1" and doc["error"]["exit_code"] == 2
    assert "torch is not installed in" in run.stderr and f"stackdoctor install --python {plain_python}" in run.stderr
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1
