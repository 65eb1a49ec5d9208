"""The target interpreter: its Python facts and its torch, from a child process.

The child is the TARGET interpreter running ``stackdoctor/_worker/sd_target.py``
(stdlib + torch only), bounded by ``ctx.torch_timeout_s``. It prints one marked JSON
line per section as soon as each is known, so a hang or crash inside ``import torch``
still leaves the Python facts, and the report says what happened.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from stackdoctor._worker import worker_path
from stackdoctor.facts import KernelFacts, PythonFacts, TorchFacts, from_data
from stackdoctor.probes import ProbeContext, ProbeOutput
from stackdoctor.system import CommandResult, System

MARK = "@@stackdoctor@@ "


_PACKAGING_DIR: list[str] = []


def packaging_path(system: System) -> str | None:
    """A directory holding only a link to stackdoctor's own ``packaging``, for targets without it."""
    if _PACKAGING_DIR:
        return _PACKAGING_DIR[0]
    try:
        import packaging

        d = system.lend_package(Path(packaging.__file__).parent, prefix="stackdoctor-pkg-")
    except ImportError:
        return None
    if d is None:
        return None
    _PACKAGING_DIR.append(d)
    return d


def parse_sections(stdout: str) -> dict[str, dict]:
    """Marked JSON lines -> {section: data}. Anything else the target printed is ignored.

    >>> parse_sections('noise\\n@@stackdoctor@@ {"section": "python", "version": "3.11.7"}\\n')
    {'python': {'section': 'python', 'version': '3.11.7'}}
    """
    out: dict[str, dict] = {}
    for line in stdout.splitlines():
        idx = line.find(MARK)
        if idx < 0:
            continue
        try:
            data = json.loads(line[idx + len(MARK) :])
        except (ValueError, RecursionError):
            continue
        if isinstance(data, dict) and isinstance(data.get("section"), str):
            out[data["section"]] = data
    return out


def _stderr_tail(text: str, lines: int = 8) -> str:
    keep = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(keep[-lines:])


def _python_error(ctx: ProbeContext, res: CommandResult) -> str:
    """Why the target gave no Python facts, in one sentence."""
    target = ctx.target.python
    if res.status == "absent":
        return f"the target interpreter {target} does not exist"
    if res.status == "denied":
        return f"the target interpreter {target} cannot be run: {res.detail}"
    if res.status == "error" and res.signal is None:
        return f"the target {target} cannot be run: {res.detail} (not a Python interpreter?)"
    if res.status == "timeout":
        return f"the target interpreter {target} did not answer in {res.detail} s"
    if "SyntaxError" in res.stderr or "invalid syntax" in res.stderr:
        ver = ctx.system.run([target, "--version"], timeout=ctx.timeout_s, parse_env=False, record=False)
        said = (ver.stdout.strip() or ver.stderr.strip()).splitlines()[:1]
        if said and said[0].startswith("Python 2"):
            return f"the target {target} is {said[0]}; stackdoctor needs a Python 3 target"
        return f"the target {target} could not run stackdoctor's worker ({said[0] if said else 'unknown version'})"
    if res.signal is not None:
        return f"the target interpreter {target} was killed by {res.detail.replace('killed by ', '')} before reporting"
    tail = _stderr_tail(res.stderr, 1)
    return f"the target {target} is not a Python interpreter stackdoctor can use" + (f" ({tail[:200]})" if tail else "")


def probe(ctx: ProbeContext) -> ProbeOutput:
    env: dict[str, str | None] = {"PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1"}
    pkg = packaging_path(ctx.system)
    if pkg:
        env["STACKDOCTOR_PACKAGING_PATH"] = pkg
    env["STACKDOCTOR_KERNELS"] = ("quick+compile" if ctx.compile else "quick") if ctx.kernels else None
    env["STACKDOCTOR_IMPORT_TORCH"] = None if ctx.import_torch else "0"
    if ctx.worker_hook is not None:
        env["STACKDOCTOR_TEST_HOOK"] = ctx.worker_hook
    res = ctx.system.run(
        [ctx.target.python, str(worker_path("sd_target.py"))],
        timeout=ctx.torch_timeout_s,
        env=env,
        parse_env=False,
    )
    sections = parse_sections(res.stdout)
    facts: dict[str, object] = {}
    status, error = "ok", None

    # ---- python
    py = PythonFacts(executable=ctx.target.python, selected_by=ctx.target.selected_by)
    pdata = sections.get("python")
    if pdata and not pdata.get("error"):
        tags = [t for t in pdata.get("tags") or [] if isinstance(t, str)]
        py = PythonFacts(
            executable=pdata.get("executable") or ctx.target.python,
            version=pdata.get("version"),
            implementation=pdata.get("implementation"),
            free_threaded=bool(pdata.get("free_threaded")),
            abiflags=pdata.get("abiflags"),
            tags=tags,
            platform_tag=tags[0].split("-")[-1] if tags else None,
            env_kind=pdata.get("env_kind"),
            env_prefix=pdata.get("prefix"),
            pip_version=pdata.get("pip_version"),
            selected_by=ctx.target.selected_by,
            error=pdata.get("tags_error") and f"wheel tags unknown: {pdata['tags_error']}",
            sources={"*": f"{ctx.target.python} (sd_target.py)"},
        )
    else:
        py.error = (pdata or {}).get("error") or _python_error(ctx, res)
        status, error = "error", py.error
    uv = ctx.system.which("uv")
    if py.env_prefix:
        for cand in (os.path.join(py.env_prefix, "bin", "uv"), os.path.join(py.env_prefix, "Scripts", "uv.exe")):
            if ctx.system.local.is_executable(cand):  # the target's own files: live, never under a sysroot
                uv = cand
                break
    if uv:
        r = ctx.system.run([uv, "--version"], timeout=ctx.timeout_s, record=False)
        if r.ok and r.stdout.split()[:1] == ["uv"]:
            py.uv_path, py.uv_version = uv, (r.stdout.split() + ["", ""])[1] or None
    facts["python"] = py

    # ---- torch
    tdata = sections.get("torch")
    if tdata is not None:
        note = tdata.get("sources_note")
        clean = {k: v for k, v in tdata.items() if k not in ("section", "elapsed_s", "import_s", "sources_note")}
        try:
            torch = from_data(TorchFacts, clean)
        except TypeError as exc:
            torch = TorchFacts(import_error=f"unreadable torch facts from the target: {exc}", import_error_kind="exception")
        torch.sources = {"*": f"{ctx.target.python} ({note or 'import torch'})"}
    else:
        torch = TorchFacts()
        if pdata is not None:  # python answered, then the torch part never did
            if res.status == "timeout":
                torch.import_error = f"import torch did not finish in {res.detail} s"
                torch.import_error_kind = "timeout"
                status, error = "timeout", f"import torch in {ctx.target.python} did not finish in {res.detail} s"
            else:
                why = res.detail if res.signal is not None else f"exit code {res.returncode}"
                torch.import_error = f"the target interpreter died while importing torch ({why})"
                tail = _stderr_tail(res.stderr, 3)
                if tail:
                    torch.import_error += f": {tail}"
                torch.import_error_kind = "crash"
                status, error = "error", torch.import_error
            torch.installed = True
    facts["torch"] = torch

    # ---- kernels (quick pass in the same child)
    if ctx.kernels:
        kdata = sections.get("kernels")
        if kdata is not None:
            try:
                facts["kernels"] = from_data(KernelFacts, {k: v for k, v in kdata.items() if k not in ("section", "elapsed_s")})
            except TypeError as exc:
                facts["kernels"] = KernelFacts(ran=False, mode="quick", error=f"unreadable kernel results: {exc}")
        elif tdata is not None and torch.import_error is None and "done" not in sections:
            sig = res.detail.replace("killed by ", "") if res.signal is not None else None
            facts["kernels"] = KernelFacts(
                ran=False,
                mode="quick",
                error="the kernel pass did not finish" + (f" in {res.detail} s" if res.status == "timeout" else ""),
                signal=sig,
                stderr_tail=_stderr_tail(res.stderr) or None,
            )
    return ProbeOutput(facts=facts, status=status, error=error)
