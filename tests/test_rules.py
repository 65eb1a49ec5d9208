"""The rule registry: every finding from one declared rule, a broken rule never silent, and ``check``
and ``install`` agreeing on every machine (they ask the same accelerator model and the same resolver).

The corpus for the mutation tests is ``tests/test_diagnose.py``'s TRIGGER scenarios (each names the
code it must produce) plus the kernel and requirement scenarios below.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import test_diagnose as td
from helpers import machine_env, run_sd

from stackdoctor import kinds, rules
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, KernelFacts, KernelResult, PythonFacts, TorchFacts, from_data, to_data
from stackdoctor.model.plan import Request
from stackdoctor.reconcile import reconcile
from stackdoctor.resolve import resolve
from stackdoctor.rules import catalog
from stackdoctor.rules.core import REGISTRY, RuleError

MATRIX = load_matrix([])
MACHINES = sorted((Path(__file__).parent / "fixtures" / "machines").glob("*.json"))


def _kernel_crash(f: Facts, m) -> None:
    f.kernels = KernelFacts(ran=True, mode="quick", error="the kernel process was killed by SIGSEGV after 0 result(s)", signal="SIGSEGV")


def _kernel_wrong(f: Facts, m) -> None:
    f.kernels = KernelFacts(ran=True, results=[KernelResult("matmul", "cuda:0", "bf16", ok=False, max_error=0.5, tolerance=0.03, error="max relative error 0.5")])


def _kernel_slow(f: Facts, m) -> None:
    f.kernels = KernelFacts(ran=True, results=[KernelResult("matmul", "cuda:0", "fp32", ok=True, tflops=1.0, peak_tflops=80.0, percent_of_peak=1.3, extra={"sweep_max": True})])


def _ar(status: str, **extra) -> dict:
    return {"status": status, "backend": "gloo", "world_size": 2, "master_addr": "127.0.0.1", "master_port": 29500, **extra}


def _allreduce_timeout(f: Facts, m) -> None:
    f.kernels = KernelFacts(ran=True, allreduce=_ar("timeout", missing_ranks=[1], error="rank 1 never joined"))


def _allreduce_failed(f: Facts, m) -> None:
    f.kernels = KernelFacts(ran=True, allreduce=_ar("failed", error="Connection refused"))


def _allreduce_slow(f: Facts, m) -> None:
    f.kernels = KernelFacts(ran=True, allreduce=_ar("ok", max_busbw_gbs=0.5))


# (code, change, requirements, gates): the scenarios TRIGGER cannot express (kernel facts, requirements)
EXTRA = [
    ("kernel-failed", _kernel_crash, None, None),
    ("kernel-wrong-result", _kernel_wrong, None, None),
    ("kernel-slow", _kernel_slow, None, None),
    ("allreduce-timeout", _allreduce_timeout, None, None),
    ("allreduce-failed", _allreduce_failed, None, None),
    ("allreduce-slow", _allreduce_slow, None, rules.Gates(min_busbw_gbs=10.0)),
]


def corpus() -> list[tuple[str, str, Facts, list, object, object]]:
    """(scenario id, the code it must produce, facts, probes, requirements, gates)."""
    from stackdoctor.config import Requirements

    out = []
    for p in td.TRIGGER:
        code, change = p.values
        f = td.healthy(MATRIX)
        probes = change(f, MATRIX) or []
        out.append((p.id, code, f, probes, None, None))
    for code, change, reqs, gates in EXTRA:
        f = td.healthy(MATRIX)
        change(f, MATRIX)
        out.append((code, code, f, [], reqs, gates))
    f = td.healthy(MATRIX)
    out.append(("unmet-min-gpus", "requirement-unmet", f, [], Requirements(min_gpus=4, source="pyproject.toml"), None))
    out.append(("met-requirements", "requirements-ok", td.healthy(MATRIX), [], Requirements(backend="cuda", source="pyproject.toml"), None))
    out.append(("healthy", "runtime-ok", td.healthy(MATRIX), [], None, None))
    return out


CORPUS = corpus()


def judge(facts: Facts, probes=(), reqs=None, gates=None, strict=True) -> list:
    return rules.judge(reconcile(facts, MATRIX), MATRIX, probes=list(probes), requirements=reqs, gates=gates, strict=strict)


def test_every_rule_has_a_scenario_that_produces_its_code():
    produced = {code for _, code, f, probes, reqs, gates in CORPUS if code in {x.code for x in judge(f, probes, reqs, gates)}}
    # an accelerator kind's own rules (Accelerator.rules) have their scenarios in its own tests (tests/test_ascend.py)
    kind_rules = set(kinds.rule_modules())
    expected = {r.code for r in REGISTRY.values() if not r.summary and r.fn.__module__ not in kind_rules} | {"runtime-ok"}
    assert expected - produced == set()


def test_the_catalogue_is_the_declarations_plus_rule_error():
    assert set(catalog.codes()) == set(REGISTRY) | {"rule-error"}
    for r in REGISTRY.values():
        info = catalog.info(r.code)
        assert (info.severity, info.layer, info.defers_to) == (r.severity, r.layer, r.defers_to)


def test_a_rule_may_ask_only_about_the_codes_it_defers_to():
    probe = REGISTRY["torch-missing"]
    ctx = rules.Ctx(view=reconcile(td.healthy(MATRIX), MATRIX), matrix=MATRIX, current=probe)
    with pytest.raises(RuleError, match="without deferring"):
        ctx.has("driver-too-old")
    with pytest.raises(RuleError, match="may only add"):
        ctx.add("driver-too-old")


def _mutated(code: str, how: str):
    rule = REGISTRY[code]

    def raising(ctx):
        raise KeyError("mutation")

    def silent(ctx):
        return None

    return dataclasses.replace(rule, fn=raising if how == "raise" else silent)


@pytest.mark.parametrize("scenario", CORPUS, ids=[c[0] for c in CORPUS])
def test_each_rule_mutated_is_noticed(scenario, monkeypatch):
    """Make the scenario's rule raise, then do nothing: the suite notices both. Raising is a RuleError in
    strict mode (tests) and a visible ``rule-error`` finding otherwise; doing nothing loses the code."""
    _, code, facts, probes, reqs, gates = scenario
    before = judge(facts, probes, reqs, gates)
    assert code in {x.code for x in before}
    monkeypatch.setitem(REGISTRY, code, _mutated(code, "raise"))
    with pytest.raises(RuleError, match=code):
        judge(facts, probes, reqs, gates)
    loose = judge(facts, probes, reqs, gates, strict=False)
    err = [x for x in loose if x.code == "rule-error"]
    # a broken rule that can fail the run fails it (exit 1 never becomes 0); a broken warning rule warns
    expected = "fail" if REGISTRY[code].severity == "fail" else "warn"
    assert len(err) == 1 and code in err[0].detail and "KeyError" in err[0].detail and err[0].severity == expected and err[0].fix
    assert code not in {x.code for x in loose}
    monkeypatch.setitem(REGISTRY, code, _mutated(code, "silent"))
    assert code not in {x.code for x in judge(facts, probes, reqs, gates)}


def test_a_broken_rule_outside_tests_is_a_rule_error_in_the_report(tmp_path):
    """Through the real CLI, without the test suite's strict mode: the report carries `rule-error`, the
    other findings are still there, and `--strict` fails the run on it."""
    case = MACHINES[0]
    rep = tmp_path / "report.json"
    rep.write_text(json.dumps({"schema": "stackdoctor.report/1", "facts": json.loads(case.read_text())["facts"], "probes": [], "findings": []}))
    env = machine_env(tmp_path / "bin", STACKDOCTOR_TEST_HOOK="break-rule:torch-missing")
    env.pop("STACKDOCTOR_STRICT_RULES")
    r = run_sd(["check", "--replay", str(rep), "--json"], env=env)
    found = {f["code"]: f for f in r.json()["findings"]}
    assert "torch-missing" not in found and "platform-ok" in found
    assert found["rule-error"]["severity"] == "warn" and "torch-missing" in found["rule-error"]["detail"]
    strict = run_sd(["check", "--replay", str(rep), "--strict"], env=env)
    assert strict.rc == 1


def test_a_broken_fail_rule_keeps_the_exit_code_failing(tmp_path):
    """A rule of severity fail that raises on a broken torch: rule-error is a fail finding, so the exit code
    stays 1 (it was 0: rule-error was only a warning, and the broken torch's own finding was lost)."""
    facts = Facts()
    facts.python = PythonFacts(executable="/usr/bin/python3", version="3.11.7")
    facts.torch = TorchFacts(installed=True, version="2.13.0", import_error="ImportError: libtorch_cpu.so: cannot open shared object file", import_error_kind="exception")
    rep = tmp_path / "report.json"
    rep.write_text(json.dumps({"schema": "stackdoctor.report/1", "facts": to_data(facts), "probes": [], "findings": []}))
    env = machine_env(tmp_path / "bin", STACKDOCTOR_TEST_HOOK="break-rule:torch-import-failed")
    env.pop("STACKDOCTOR_STRICT_RULES")
    r = run_sd(["check", "--replay", str(rep), "--json"], env=env)
    found = {f["code"]: f for f in r.json()["findings"]}
    assert "torch-import-failed" not in found
    assert found["rule-error"]["severity"] == "fail" and r.rc == 1


# ---------------------------------------------------------------------------- check and install agree


def _installed(plan, m) -> TorchFacts:
    """The torch a plan installs, as the target would report it (runtime not asked)."""
    variant = plan.variant
    local = next((p.variant for p in plan.packages if p.name == "torch"), None)
    version = f"{plan.torch_version}+{local}" if local else plan.torch_version
    t = TorchFacts(installed=True, version=version, variant=variant if local else None, distributions={"torch": version})
    row = m.variant(plan.torch_version, variant) if variant and not variant.startswith("jetson") else None
    if row is not None and row.kind == "cuda":
        t.cuda = row.cuda
    if row is not None and row.kind == "rocm":
        t.hip = row.rocm
    jetson = next((j for j in m.jetson if j.variant == variant), None)
    if jetson is not None:
        t.cuda = jetson.cuda  # NVIDIA's Jetson wheels are CUDA builds for JetPack's CUDA
    return t


@pytest.mark.parametrize("case", MACHINES, ids=[m.stem for m in MACHINES])
def test_check_and_install_agree_on_every_machine(case):
    """Replay each machine (1) with a CPU build of the planned release and (2) with the planned build:
    check flags the CPU build exactly when install plans a GPU build, with install's variant as the fix,
    and finds nothing wrong with the build install plans."""
    facts = from_data(Facts, json.loads(case.read_text())["facts"])
    plan = resolve(reconcile(facts, MATRIX), MATRIX, Request())
    if not plan.satisfiable:
        # install plans nothing (python315-linux: no torch for that Python): check must say what is wrong too
        problems = {x.code for x in judge(facts) if x.severity != "ok"}
        assert problems & {"python-unsupported", "glibc-too-old", "macos-x86-torch-too-new"}, (plan.reasons, problems)
        return
    cpu = dataclasses.replace(facts, torch=TorchFacts(installed=True, version=f"{plan.torch_version}+cpu", variant="cpu", distributions={}))
    out = judge(cpu)
    flagged = [x for x in out if x.code in ("torch-cpu-only", "torch-backend-mismatch", "jetson-wrong-wheel") and x.severity != "ok"]
    # a GPU build is planned (from the PyTorch index, or PyPI's default CUDA build) where a GPU runs it
    gpu_planned = plan.variant not in ("cpu", None) and bool(plan.reasons) and "runs on the CPU as well" not in plan.reasons[0]
    assert bool(flagged) == gpu_planned, (plan.variant, [x.code for x in out])
    if flagged:
        assert f"--variant {plan.variant}" in flagged[0].fix, (flagged[0].fix, plan.variant)
    good = dataclasses.replace(facts, torch=_installed(plan, MATRIX), environment={**facts.environment, **plan.env})  # as the plan says to run it
    wrong = {x.code for x in judge(good) if x.severity != "ok"} & {"torch-cpu-only", "torch-backend-mismatch", "gpu-arch-unsupported",
                                                                    "rocm-gfx-unsupported", "driver-too-old", "python-unsupported", "jetson-wrong-wheel"}
    assert wrong == set(), (case.stem, plan.variant, wrong)


def test_arc_a770_with_a_cpu_torch_warns_with_the_xpu_plan():
    facts = from_data(Facts, json.loads((Path(__file__).parent / "fixtures" / "machines" / "intel-arc-a770.json").read_text())["facts"])
    facts.torch = TorchFacts(installed=True, version="2.13.0+cpu", variant="cpu", distributions={"torch": "2.13.0+cpu"})
    out = judge(facts)
    (hit,) = [x for x in out if x.code == "torch-cpu-only"]
    assert hit.severity == "warn" and "xpu" in hit.fix
    plan = resolve(reconcile(facts, MATRIX), MATRIX, Request())
    assert plan.variant == "xpu" and f"--variant {plan.variant}" in hit.fix
