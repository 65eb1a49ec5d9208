"""The target interpreter: its Python facts and its torch, from a child process and from torch's files.

The child is the TARGET interpreter running ``stackdoctor/_worker/sd_target.py``
(stdlib + torch only), bounded by ``ctx.torch_timeout_s``. It prints one marked JSON
line per section as soon as each is known, so a hang or crash inside ``import torch``
still leaves the Python facts, and the report says what happened.

torch is read two ways:

- from its files, always, in this process (:func:`stackdoctor.probes.torch_static.read_static_torch`
  on the child's site directories and the place ``import torch`` would load it from): version,
  CUDA/HIP, the GPU code in its libraries, the runtime wheels. Never imported, so this survives an
  ``import torch`` that raises, hangs or aborts;
- by ``import torch`` in the child, when ``ctx.import_torch`` (the quick kernel pass, ``check
  --import-torch``): what torch says of itself and of the devices it can use.

:func:`merge_static` joins the two into one :class:`TorchFacts`: ``imported`` says which happened,
and ``sources`` names, for each value, the file it was read from or the import.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import posixpath
import re
import threading

from stackdoctor import kinds
from stackdoctor._worker import parse_sections, worker_path
from stackdoctor.model.facts import (
    KernelFacts,
    PythonFacts,
    TorchFacts,
    TorchLibrary,
    from_data,
)
from stackdoctor.model.probing import ProbeContext, ProbeOutput
from stackdoctor.probes.torch_static import StaticTorch, read_static_torch
from stackdoctor.system import CommandResult, System


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


def _import_worked(t: TorchFacts) -> bool:
    return not t.import_error and t.import_error_kind is None


def _torch_arch_list(torch: TorchFacts, flags: object) -> None:
    """torch's own arch list: ``get_arch_list()``, which is empty while no GPU is usable, else the
    build's ``_cuda_getArchFlags()``."""
    asked, flagged = next((a.arch_list_sources for a in kinds.ALL if a.arch_list_sources), ("get_arch_list()", "the build's arch flags"))
    if torch.arch_list:
        torch.arch_list_torch = list(torch.arch_list)
        torch.sources["arch_list_torch"] = torch.sources["arch_list"] = asked
    elif isinstance(flags, list) and flags and all(isinstance(x, str) for x in flags):
        torch.arch_list_torch = list(flags)
        torch.arch_list = list(flags)
        torch.sources["arch_list_torch"] = torch.sources["arch_list"] = flagged


def merge_static(torch: TorchFacts, st: StaticTorch, *, imported: bool) -> TorchFacts:
    """``torch`` (what the child said: the import's facts, or only its conda packages) joined with what
    torch's files say (``st``). Pure: returns new facts.

    What only the files know is always added (the GPU code in the libraries, per-file extras, the
    runtime wheels' versions, what could not be read), and the installed distributions come from
    their ``*.dist-info`` whichever way torch was read. Where torch did not import (not asked, or it
    failed), the files also give the version, CUDA/HIP, location and arch list; where it did, the
    import's values stand and the files' arch list is kept beside torch's own for comparison.
    Every value taken from the files names its file in ``sources``.
    """
    t = copy.deepcopy(torch)
    src = dict(t.sources)
    t.imported = imported if (t.installed or st.installed) else None
    t.installed = t.installed or st.installed
    _only_in_files(t, st, src)
    for key in ("git_version", *(f for a in kinds.ALL for f in a.torch_version_fields)):
        if getattr(t, key) is None and getattr(st, key) is not None:
            setattr(t, key, getattr(st, key))
            src[key] = st.sources.get(key, "torch/version.py")
    _distributions(t, st, src)
    if not imported:
        for key in ("version", "variant", *(a.build_witness for a in kinds.ALL if a.build_witness), "debug", "location"):
            value = getattr(st, key, None)
            if value is not None and getattr(t, key) is None:
                setattr(t, key, value)
                src[key] = st.sources.get(key) or st.sources.get("version") or "torch's files"
    if not t.arch_list and t.arch_list_files:  # not imported, or torch named no list
        t.arch_list = list(t.arch_list_files)
        src["arch_list"] = src["arch_list_files"]
    t.sources = src
    return t


def _only_in_files(t: TorchFacts, st: StaticTorch, src: dict[str, str]) -> None:
    """What only the files know: the GPU code in the libraries, per-file extras, the runtime wheels, the linkage,
    what could not be read."""
    own = next((a.static_arch_field for a in kinds.ALL if a.static_arch_field and getattr(st, a.build_witness or "", None)), None)
    listed = own if own and getattr(st, own, None) else "arch_list"  # the kind's own list where its build has one
    t.arch_list_files = list(getattr(st, listed))
    if t.arch_list_files:
        src["arch_list_files"] = st.sources.get(listed, "torch's libraries")
    t.arch_extra = [a for a in st.arch_extra]
    if t.arch_extra:
        src["arch_extra"] = src.get("arch_list_files") or st.sources.get("arch_list", "torch's libraries")
    t.runtime_versions = dict(st.runtime)
    for key in st.runtime:
        src[f"runtime_versions.{key}"] = st.sources.get(f"runtime.{key}", "torch's files")
    t.runtime_libraries = dict(st.runtime_libraries)
    t.runtime_bytes = dict(st.runtime_bytes)
    for key in st.runtime_bytes:
        src[f"runtime_bytes.{key}"] = st.sources.get(f"runtime_bytes.{key}", "its RECORD")
    t.libraries = [TorchLibrary(**dataclasses.asdict(lib)) for lib in st.libraries]
    t.static_errors = list(st.errors)
    t.static_unreadable = list(st.unreadable)
    t.duplicate_installs = list(st.duplicates)
    if st.linkage is not None:
        t.linkage_checked = st.linkage.checked
        t.linkage = [dataclasses.replace(p) for p in st.linkage.problems]
        t.linkage_note = st.linkage.note
        src["linkage"] = f"DT_NEEDED / RPATH / versioned symbols of {len(st.linkage.loaded)} libraries, read from the files ({st.linkage.elapsed_ms:g} ms)"


def _distributions(t: TorchFacts, st: StaticTorch, src: dict[str, str]) -> None:
    """The installed distributions, as their *.dist-info say (in import order: the first of a name wins)."""
    t.distributions = {k: v for k, v in st.site_distributions.items() if k != "pip"}
    t.requires = {k: list(v) for k, v in st.requires.items()}
    for k in st.requires:
        src[f"requires.{k}"] = st.sources.get(f"requires.{k}", f"{k} METADATA")
    if t.distributions:
        sites = [re.sub(r"[/\\][^/\\]+\.(?:dist|egg)-info([/\\].*)?$", "", v) for k, v in st.sources.items() if k.startswith("site_distributions.")]
        src["distributions"] = "*.dist-info in " + ", ".join(dict.fromkeys(sites))
    for field_name, dists in (("torchvision_version", ("torchvision",)), ("torchaudio_version", ("torchaudio",)), ("numpy_version", ("numpy",)),
                              ("triton_version", ("triton", *(d for a in kinds.ALL for d in a.triton_forks), "pytorch-triton"))):
        dist = next((d for d in dists if d in st.site_distributions), None)
        setattr(t, field_name, st.site_distributions[dist] if dist else None)
        if dist:
            src[field_name] = st.sources.get(f"site_distributions.{dist}", f"{dist} dist-info")


def _interpreter(pdata: dict, fallback: str) -> str:
    """The target's interpreter binary (its RPATH and libraries apply to torch's): as the child named it."""
    exe = pdata.get("executable")
    return exe if isinstance(exe, str) and exe else fallback


_PYENV_SHIM = re.compile(r'^exec "(?P<pyenv>[^"]+/libexec/pyenv)" exec "\$program"', re.M)


def pyenv_shim_target(system: System, shim: str, cwd: str | None = None) -> str | None:
    """The program a pyenv shim would run, found as ``pyenv exec`` finds it, without starting pyenv (its bash
    scripts take a few tenths of a second): the version from ``PYENV_VERSION``, else the nearest
    ``.python-version`` from ``cwd`` up, else ``$PYENV_ROOT/version``; then ``$PYENV_ROOT/versions/<v>/bin/<name>``.
    None when ``shim`` is no pyenv shim or the answer is not that simple (several versions, "system")."""
    res = system.read_text(shim, max_bytes=4096)
    m = _PYENV_SHIM.search(res.text) if res.ok else None
    if m is None:
        return None
    root = posixpath.dirname(posixpath.dirname(m.group("pyenv")))
    version = (system.getenv("PYENV_VERSION") or "").strip()
    d = cwd or os.getcwd()
    while not version:
        v = system.read_text(posixpath.join(d, ".python-version"), max_bytes=4096)
        if v.ok:
            version = v.text.strip()
            break
        if d in ("/", ""):
            v = system.read_text(posixpath.join(root, "version"), max_bytes=4096)
            version = v.text.strip() if v.ok else ""
            break
        d = posixpath.dirname(d)
    words = version.split()
    if len(words) != 1 or words[0] == "system" or "/" in words[0]:
        return None
    cand = posixpath.join(root, "versions", words[0], "bin", posixpath.basename(shim))
    return cand if system.is_executable(cand) else None


def _uv(ctx: ProbeContext, path: str | None) -> tuple[str | None, str | None]:
    """(path, version) of a ``uv`` that answers ``uv --version``; (None, None) otherwise. A pyenv shim is
    asked through the program it would run (:func:`pyenv_shim_target`); the path reported stays the shim."""
    if not path:
        return None, None
    real = pyenv_shim_target(ctx.system.local, path) if os.name != "nt" else None
    r = ctx.system.run([real or path, "--version"], timeout=ctx.timeout_s, record=False)
    if r.ok and r.stdout.split()[:1] == ["uv"]:
        return path, (r.stdout.split() + ["", ""])[1] or None
    return None, None


def unfinished_install(system: System, prefix: str) -> str | None:
    """What a killed ``stackdoctor install`` left in ``prefix`` (its journal, :mod:`stackdoctor.install.journal`),
    in a few words; None when there is none. Read through ``system`` (the target's own files: never a sysroot)."""
    journal = os.path.join(prefix, ".stackdoctor-install")
    if not system.exists(journal):
        return None
    res = system.read_text(os.path.join(journal, "journal.json"), max_bytes=1 << 20)
    try:
        data = json.loads(res.text or "") if res.ok else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return "its journal is unreadable"

    def fam(v: object) -> str:
        return ", ".join(f"{k} {x}" for k, x in v.items()) if isinstance(v, dict) and v else "no torch"

    return f"phase {data.get('phase', '?')}: {fam(data.get('before'))} -> {fam(data.get('planned'))}"


UNPRINTED_FILE = ".stackdoctor-unprinted.json"  # stackdoctor.install.talk.UNPRINTED_FILE (not imported: install is heavy)


def unprinted_lines(system: System, prefix: str) -> list[str]:
    """The lines the last ``stackdoctor install`` into ``prefix`` could not print (its output pipe or terminal closed),
    as it kept them in ``<prefix>/.stackdoctor-unprinted.json``; read, never removed (the next install says and removes them).
    Once a ``check`` has shown them (the file's ``said``), none: said once, they are let go."""
    path = os.path.join(prefix, UNPRINTED_FILE)
    if not system.exists(path):
        return []
    res = system.read_text(path, max_bytes=1 << 20)
    try:
        data = json.loads(res.text or "") if res.ok else None
    except ValueError:
        data = None
    lines = data.get("lines") if isinstance(data, dict) and not data.get("said") else None
    return [x for x in lines if isinstance(x, str) and x.strip()][-60:] if isinstance(lines, list) else []


ASIDE_PREFIX = ".stackdoctor-install.done-"  # stackdoctor.install.journal.ASIDE (not imported: install is heavy)


def left_backups(system: System, prefix: str) -> dict[str, int]:
    """The backups of replaced torches that committed installs set aside in ``prefix`` and did not remove (stopped
    right after `done:`), each with its size in bytes (the sum of its manifest's file sizes; -1 when it has no
    readable manifest); one whose owner (the install, or the child removing it) still runs is not listed."""
    out: dict[str, int] = {}
    for name in system.listdir(prefix):
        if not name.startswith(ASIDE_PREFIX):
            continue
        path = os.path.join(prefix, name)
        data = _json_of(system, os.path.join(path, "journal.json"), 1 << 20)
        if isinstance(data, dict):
            pid, start = data.get("pid"), data.get("pid_start")
            if isinstance(pid, int) and pid > 0 and pid != os.getpid() and system.process_alive(pid, start if isinstance(start, str) else None):
                continue
        manifest = _json_of(system, os.path.join(path, "backup", "manifest.json"), 256 << 20)
        sizes = [rec.get("size") for d in (manifest.get("dists") or [] if isinstance(manifest, dict) else []) if isinstance(d, dict)
                 for rec in d.get("files") or [] if isinstance(rec, dict)]
        out[path] = sum(x for x in sizes if isinstance(x, int)) if isinstance(manifest, dict) else -1
    return out


def _json_of(system: System, path: str, max_bytes: int) -> object:
    res = system.read_text(path, max_bytes=max_bytes)
    try:
        return json.loads(res.text or "") if res.ok else None
    except ValueError:
        return None


def live_install(system: System, prefix: str) -> str | None:
    """The install whose journal is in ``prefix`` when it is still running, in a few words ("process 4242, phase
    install"): its owner (the journal's pid, with the same start time, so a reused pid is not it) runs, or the
    installer it started does; None when it stopped (or there is no journal)."""
    res = system.read_text(os.path.join(prefix, ".stackdoctor-install", "journal.json"), max_bytes=1 << 20)
    try:
        data = json.loads(res.text or "") if res.ok else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return None
    pid, start, phase = data.get("pid"), data.get("pid_start"), data.get("phase") or "?"
    start = start if isinstance(start, str) else None
    if isinstance(pid, int) and pid > 0 and pid != os.getpid() and system.process_alive(pid, start):
        return f"process {pid}, phase {phase}"
    ipid, istart = data.get("installer_pid"), data.get("installer_start")
    if isinstance(ipid, int) and ipid > 0 and isinstance(istart, str) and system.session_processes(ipid, istart):
        return f"its installer, process {ipid}, after its own process {pid} stopped"
    return None


def _install_state(system: System, py: PythonFacts, prefix: str) -> None:
    """What ``stackdoctor install`` left in the target's environment: a stopped (or running) install's journal, and the
    lines the last install could not print."""
    py.unfinished_install = unfinished_install(system, prefix)
    if py.unfinished_install:
        py.sources["unfinished_install"] = os.path.join(prefix, ".stackdoctor-install", "journal.json")
        py.install_live = live_install(system, prefix)
        if py.install_live:
            py.sources["install_live"] = py.sources["unfinished_install"] + " (pid and start time)"
    py.install_backups = left_backups(system, prefix)
    if py.install_backups:
        py.sources["install_backups"] = os.path.join(prefix, ASIDE_PREFIX + "*")
    py.install_unprinted = unprinted_lines(system, prefix)
    if py.install_unprinted:
        py.sources["install_unprinted"] = os.path.join(prefix, UNPRINTED_FILE)


def _torch_ask() -> str | None:
    """The accelerator plug-ins' questions to torch, as the worker reads them (None: none to ask)."""
    from stackdoctor import kinds

    asked = kinds.torch_questions()
    return json.dumps(asked, sort_keys=True) if asked else None


def _worker_env(ctx: ProbeContext) -> dict[str, str | None]:
    env: dict[str, str | None] = {"PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1"}
    env["STACKDOCTOR_KERNELS"] = ("quick+compile" if ctx.compile else "quick") if ctx.kernels else None
    if ctx.kernels:  # the quick pass reaches a plug-in kind's devices (npu:N) through its device spec, as `kernels` does
        from stackdoctor.verify.runner import worker_device_specs

        env["STACKDOCTOR_DEVICES"] = worker_device_specs()
    env["STACKDOCTOR_IMPORT_TORCH"] = None if ctx.import_torch else "0"
    if ctx.worker_hook is not None:
        env["STACKDOCTOR_TEST_HOOK"] = ctx.worker_hook
    env["STACKDOCTOR_TORCH_ASK"] = _torch_ask()
    return env


def _python(ctx: ProbeContext, res: CommandResult, pdata: dict | None) -> tuple[PythonFacts, bool]:
    """(the target's Python facts as the worker gave them, whether it gave them: else ``error`` says why)."""
    py = PythonFacts(executable=ctx.target.python, selected_by=ctx.target.selected_by)
    if pdata and not pdata.get("error"):
        tags = [t for t in pdata.get("tags") or [] if isinstance(t, str)]
        return PythonFacts(
            executable=pdata.get("executable") or ctx.target.python,
            version=pdata.get("version"),
            implementation=pdata.get("implementation"),
            free_threaded=bool(pdata.get("free_threaded")),
            abiflags=pdata.get("abiflags"),
            tags=tags,
            platform_tag=tags[0].split("-")[-1] if tags else None,
            env_kind=pdata.get("env_kind"),
            env_prefix=pdata.get("prefix"),
            selected_by=ctx.target.selected_by,
            error=pdata.get("tags_error") and f"wheel tags unknown: {pdata['tags_error']}",
            sources={"*": f"{ctx.target.python} (sd_target.py)"},
        ), True
    py.error = (pdata or {}).get("error") or _python_error(ctx, res)
    return py, False


def _static(ctx: ProbeContext, pdata: dict, py: PythonFacts) -> StaticTorch:
    """torch read from its files where ``import torch`` would find it; pip's version beside (into ``py``)."""
    dirs = [d for d in pdata.get("site_dirs") or [] if isinstance(d, str)]
    loc = pdata.get("torch_location")
    if isinstance(loc, str) and loc:
        dirs.insert(0, os.path.dirname(loc.rstrip("/\\")))  # where import would load it (PYTHONPATH, .pth, editable)
    # the target's files are this machine's, never under a moved sysroot
    static = read_static_torch(ctx.system.local, list(dict.fromkeys(dirs)), env=ctx.system.env, interpreter=_interpreter(pdata, ctx.target.python))
    py.pip_version = static.site_distributions.get("pip")
    if py.pip_version:
        py.sources["pip_version"] = static.sources.get("site_distributions.pip", "pip dist-info")
    return static


def _environment(ctx: ProbeContext, py: PythonFacts, uv_thread: threading.Thread, uv_box: list[tuple[str | None, str | None]]) -> None:
    """An unfinished or running stackdoctor install in the environment, and its uv (its own, else PATH's)."""
    if py.env_prefix:
        _install_state(ctx.system.local, py, py.env_prefix)
    own_uv = None
    if py.env_prefix:
        for cand in (os.path.join(py.env_prefix, "bin", "uv"), os.path.join(py.env_prefix, "Scripts", "uv.exe")):
            if ctx.system.local.is_executable(cand):  # the target's own files: live, never under a sysroot
                own_uv = cand
                break
    if own_uv is not None:  # the environment's own uv wins over the one on PATH
        py.uv_path, py.uv_version = _uv(ctx, own_uv)
    else:
        uv_thread.join(ctx.timeout_s + 5)
        if uv_box:
            py.uv_path, py.uv_version = uv_box[0]


def _torch(ctx: ProbeContext, res: CommandResult, tdata: dict | None, pdata: dict | None) -> tuple[TorchFacts, bool, str | None, str | None]:
    """(torch facts from the worker, whether it tried ``import torch``, probe status or None, error)."""
    if tdata is not None:
        tried_import = not tdata.get("not_imported")
        clean = {k: v for k, v in tdata.items() if k not in ("section", "elapsed_s", "import_s", "not_imported", "arch_flags", "sources")}
        try:
            torch = from_data(TorchFacts, clean)
        except TypeError as exc:
            torch = TorchFacts(import_error=f"unreadable torch facts from the target: {exc}", import_error_kind="exception")
        if tried_import:
            torch.sources = {"*": f"{ctx.target.python} (import torch)"}
            _torch_arch_list(torch, tdata.get("arch_flags"))
        else:
            torch.sources = {"*": f"{ctx.target.python} (sd_target.py; torch not imported: read from its files)"}
        return torch, tried_import, None, None
    torch = TorchFacts()
    status, error = None, None
    if pdata is not None and not ctx.import_torch:  # no import asked, yet the child stopped after its Python facts
        how = f"did not finish in {res.detail} s" if res.status == "timeout" else f"died ({res.detail if res.signal is not None else f'exit code {res.returncode}'})"
        status, error = ("timeout" if res.status == "timeout" else "error"), f"the target {ctx.target.python} {how} before listing its distributions"
    elif pdata is not None:  # python answered, then the torch part never did
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
    return torch, ctx.import_torch, status, error


def _kernels(res: CommandResult, sections: dict[str, dict], torch: TorchFacts) -> KernelFacts | None:
    """The quick kernel pass's results (same child), or why there are none; None when it never began."""
    kdata = sections.get("kernels")
    if kdata is not None:
        try:
            return from_data(KernelFacts, {k: v for k, v in kdata.items() if k not in ("section", "elapsed_s")})
        except TypeError as exc:
            return KernelFacts(ran=False, mode="quick", error=f"unreadable kernel results: {exc}")
    if sections.get("torch") is not None and torch.import_error is None and "done" not in sections:
        sig = res.detail.replace("killed by ", "") if res.signal is not None else None
        return KernelFacts(
            ran=False,
            mode="quick",
            error="the kernel pass did not finish" + (f" in {res.detail} s" if res.status == "timeout" else ""),
            signal=sig,
            stderr_tail=_stderr_tail(res.stderr) or None,
        )
    return None


def probe(ctx: ProbeContext) -> ProbeOutput:
    # the uv on PATH is asked while the target answers (a shim such as pyenv's takes a few tenths of a second)
    uv_box: list[tuple[str | None, str | None]] = []
    uv_thread = threading.Thread(target=lambda: uv_box.append(_uv(ctx, ctx.system.which("uv"))), daemon=True)
    uv_thread.start()
    res = ctx.system.run([ctx.target.python, str(worker_path("sd_target.py"))], timeout=ctx.torch_timeout_s, env=_worker_env(ctx), parse_env=False)
    sections = parse_sections(res.stdout)
    facts: dict[str, object] = {}
    status, error = "ok", None
    pdata = sections.get("python")
    py, answered = _python(ctx, res, pdata)
    if not answered:
        status, error = "error", py.error
    static = _static(ctx, pdata, py) if pdata is not None and not pdata.get("error") else None
    _environment(ctx, py, uv_thread, uv_box)
    facts["python"] = py
    torch, tried_import, t_status, t_error = _torch(ctx, res, sections.get("torch"), pdata)
    if t_status is not None:
        status, error = t_status, t_error
    if static is not None:
        torch = merge_static(torch, static, imported=tried_import and torch.installed and _import_worked(torch))
    facts["torch"] = torch
    if ctx.kernels:
        kernels = _kernels(res, sections, torch)
        if kernels is not None:
            facts["kernels"] = kernels
    return ProbeOutput(facts=facts, status=status, error=error)
