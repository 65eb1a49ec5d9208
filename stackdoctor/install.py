"""Execute an install plan in the target interpreter, verify it, and never leave it without torch.

Steps (all subprocesses through :class:`~stackdoctor.system.System`):

1. snapshot the target's torch family and runtime packages (``importlib.metadata`` in the
   target, no import of torch), and hard-link the family's installed files aside (``sd_backup.py``,
   into ``<prefix>/.stackdoctor-backup-<pid>-<time>``, removed again on every path);
2. run ``<python> -m pip install ...`` or ``uv pip install --python <python> ...``, streaming
   its output to stderr while capturing it; Ctrl-C / the time-out reach the installer as
   SIGINT (:meth:`System.run_streaming`) so pip can roll back its own uninstall;
3. on failure or interruption, snapshot again: if the torch family changed (pip rolls back
   only the package it was installing), put the backed-up files back (offline, sha256-checked),
   and reinstall the recorded versions from their index only if that is incomplete;
4. on success, import torch in the target and check the version, the variant and the
   accelerator; list the previous variant's runtime packages left behind and remove them
   only when asked.

The pure parts (command lines, ``--emit`` text, leftover rules) are plain functions.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stackdoctor._worker import worker_path
from stackdoctor.errors import ExitCode
from stackdoctor.leftovers import canonical_name, predict_leftovers
from stackdoctor.leftovers import families_needed as families_needed  # re-exported: install.families_needed
from stackdoctor.leftovers import runtime_family as runtime_family  # re-exported
from stackdoctor.transaction import EXIT_FOR, Interrupted, Journal, Locked, Signals, env_lock, hook, read_journal, signal_name, signals

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.facts import Facts, GpuView
    from stackdoctor.plan import Plan
    from stackdoctor.system import CommandResult, System

TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
PYPI_HOSTS = ("pypi.org", "pypi.python.org")
DEFAULT_INSTALL_TIMEOUT_S = 3600.0
SNAP_MARK = "@@stackdoctor-snapshot@@ "
VERIFY_MARK = "@@stackdoctor-verify@@ "
BACKUP_MARK = "@@stackdoctor-backup@@ "
BACKUP_COPY_CAP = 2 * 1024**3  # bytes copied (not linked) into a backup, past which a distribution is left out


# ---------------------------------------------------------------------------- data


@dataclass
class Snapshot:
    """Installed distributions of the target: canonical name -> (version, requirement names)."""

    versions: dict[str, str] = field(default_factory=dict)
    requires: dict[str, list[str]] = field(default_factory=dict)
    damaged: list[str] = field(default_factory=list)  # half-installed (no RECORD) or installed twice
    error: str | None = None
    prefix: str | None = None  # the target's sys.prefix

    @property
    def ok(self) -> bool:
        return self.error is None

    def torch_family(self) -> dict[str, str]:
        return {n: self.versions[n] for n in TORCH_FAMILY if n in self.versions}

    def family_damaged(self) -> list[str]:
        return [n for n in self.damaged if n in TORCH_FAMILY]

    def pins(self, names: Iterable[str]) -> list[str]:
        return [f"{n}=={self.versions[n]}" for n in names if n in self.versions]


@dataclass
class Verification:
    imported: bool = False
    version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    cuda_available: bool | None = None
    cuda_ok: bool | None = None
    cuda_error: str | None = None  # torch's whole error text, every line of it on one (bounded)
    driver_api_version: int | None = None  # torch._C._cuda_getDriverVersion() where CUDA was unusable: 12080 = CUDA 12.8, 0 = no driver
    device_name: str | None = None
    mps_available: bool | None = None
    xpu_available: bool | None = None
    available: dict[str, bool] = field(default_factory=dict)  # a plug-in kind's torch.<torch_api>.is_available(), by kind
    available_errors: dict[str, str] = field(default_factory=dict)  # kind -> why torch gave no answer, or said False
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    location: str | None = None


@dataclass
class Backup:
    """The torch family's installed files, hard-linked (or copied) aside before an install (``sd_backup.py save``)."""

    dir: str
    saved: dict[str, str] = field(default_factory=dict)  # name -> version backed up (every RECORD file there)
    missing: dict[str, int] = field(default_factory=dict)  # name -> RECORD files already gone before (backed up as it is)
    linked: int = 0
    copied: int = 0
    linked_bytes: int = 0
    copied_bytes: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass
class BackupRestore:
    """What ``sd_backup.py restore`` put back."""

    restored: dict[str, str] = field(default_factory=dict)  # name -> version, every file back and its hash checked
    removed: list[str] = field(default_factory=list)  # what was installed for those names before
    mismatch: list[str] = field(default_factory=list)  # RECORD paths whose sha256 differs from the RECORD
    missing: list[str] = field(default_factory=list)  # RECORD paths that could not be put back
    linked: int = 0
    copied: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass
class InstallResult:
    ok: bool
    exit_code: int
    message: str  # one sentence for the user
    command: list[str] = field(default_factory=list)
    returncode: int | None = None
    interrupted: bool = False
    timed_out: bool = False
    before: dict[str, str] = field(default_factory=dict)  # torch family before
    after: dict[str, str] = field(default_factory=dict)  # torch family after
    restored: bool | None = None  # None: no restore was needed
    restored_from: str | None = None  # "backup" (its own files) | "index" (reinstalled) | None
    verification: Verification | None = None
    leftovers: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    state: str | None = None  # what the family on disk is at the end: "old" | "new" | "mixed" (from the files)
    signal: str | None = None  # "SIGINT" | "SIGTERM" | "SIGHUP": what stopped the install
    journal_kept: str | None = None  # the journal folder (with the backup) left for `install --recover`, when putting back failed
    stopped_before: bool = False  # stopped before the installer ran: nothing was changed
    # a GPU build's code read from the installed binaries before the commit (:func:`check_gpu_code`): what was read,
    # each GPU of this kind and how it runs it, the verdict ("runs" | "cannot-run" | "not-judged" | "unread")
    gpu_code: dict[str, Any] | None = None
    prefix: str | None = None  # the target's sys.prefix (where what could not be printed is kept)
    unprinted: list[str] = field(default_factory=list)  # lines the transaction could not print (a closed pipe or terminal)


# ---------------------------------------------------------------------------- command lines (pure)


def is_pypi(url: str | None) -> bool:
    return not url or any(h in url for h in PYPI_HOSTS)


def requirements(plan: Plan) -> list[str]:
    return [p.requirement for p in plan.packages]


def install_command(
    plan: Plan,
    python: str,
    installer: str = "pip",
    *,
    find_links: str | None = None,
    uv: str = "uv",
    source_args: Sequence[str] | None = None,
) -> list[str]:
    """The exact argv that installs ``plan`` into ``python``.

    ``source_args`` (from the index check, :mod:`stackdoctor.availability`) point the installer at the
    sources that answered, on top of the user's configuration. Without them: ``--index-url`` is the
    variant's index (download.pytorch.org mirrors every dependency torch needs, as its own install
    commands assume); PyPI plans (macOS) leave the user's index configuration alone; ``find_links``
    installs from a directory with ``--no-index``.
    """
    reqs = requirements(plan)
    if installer == "uv":
        argv = [uv, "pip", "install", "--python", python, *reqs]
    else:
        argv = [python, "-m", "pip", "install", *reqs]
    if source_args is not None:
        argv += list(source_args)
    elif find_links:
        argv += ["--no-index", "--find-links", find_links]
    elif not is_pypi(plan.index_url):
        argv += ["--index-url", str(plan.index_url)]
        # a package from another index (a kind's companion, torch-npu from PyPI beside torch's CPU build): an extra index
        argv += [a for url in dict.fromkeys(p.index_url for p in plan.packages if p.index_url and p.index_url != plan.index_url)
                 for a in ("--extra-index-url", url)]
    return argv


def installer_argv(
    plan: Plan,
    python: str,
    installer: str = "pip",
    *,
    find_links: str | None = None,
    uv: str = "uv",
    source_args: Sequence[str] | None = None,
    env: Mapping[str, str | None] | None = None,
    reinstall: bool = False,
) -> tuple[list[str], dict[str, str | None] | None]:
    """The one argv (and environment) the installer is run with: :func:`install_command`, plus the repair flags
    (``reinstall``: the same build, damaged, gets its files again) and with any credentialed URL moved out of the
    argv into the environment (:func:`credentials_out_of_argv`)."""
    argv = install_command(plan, python, installer, find_links=find_links, uv=uv, source_args=source_args)
    if reinstall:  # the same build, damaged: its files again (a transactional repair)
        at = argv.index("install") + 1
        argv[at:at] = ["--reinstall" if installer == "uv" else "--force-reinstall", "--no-deps"]
    return credentials_out_of_argv(argv, env, installer)


# where an installer takes each option's value from its environment (uv: the separator of a list)
_OPTION_VARS = {
    "pip": {"--index-url": ("PIP_INDEX_URL", " "), "--extra-index-url": ("PIP_EXTRA_INDEX_URL", " "), "--find-links": ("PIP_FIND_LINKS", " ")},
    "uv": {"--index-url": ("UV_DEFAULT_INDEX", " "), "--default-index": ("UV_DEFAULT_INDEX", " "), "--index": ("UV_INDEX", " "),
           "--extra-index-url": ("UV_INDEX", " "), "--find-links": ("UV_FIND_LINKS", ",")},
}


def credentials_out_of_argv(
    argv: Sequence[str], env: Mapping[str, str | None] | None, installer: str = "pip"
) -> tuple[list[str], dict[str, str | None] | None]:
    """``argv`` without a credentialed URL, and the environment that carries it instead: the installer's argv
    is visible to every local user (``ps``, /proc/<pid>/cmdline), its environment is not. A value of the
    same variable already in ``env`` is kept in front (the sources the index check chose)."""
    from stackdoctor.redact import has_credentials

    table = _OPTION_VARS["uv" if installer == "uv" else "pip"]
    out: list[str] = []
    moved: dict[str, list[str]] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in table and i + 1 < len(argv) and has_credentials(argv[i + 1]):
            moved.setdefault(a, []).append(argv[i + 1])
            i += 2
            continue
        out.append(a)
        i += 1
    if not moved:
        return list(argv), dict(env) if env is not None else None
    new_env: dict[str, str | None] = dict(env or {})
    for option, values in moved.items():
        var, sep = table[option]
        if var in ("PIP_INDEX_URL", "UV_DEFAULT_INDEX"):  # one default index: the argv's wins
            new_env[var] = values[-1]
            continue
        have = new_env.get(var)
        new_env[var] = sep.join([*([have] if have and have.strip() else []), *values])
    return out, new_env


def uninstall_command(names: Sequence[str], python: str, installer: str = "pip", *, uv: str = "uv") -> list[str]:
    if installer == "uv":
        return [uv, "pip", "uninstall", "--python", python, *names]
    return [python, "-m", "pip", "uninstall", "-y", *names]


def emit_requirements(plan: Plan, *, find_links: str | None = None) -> str:
    """requirements.txt lines that keep this choice on the next ``pip install -r``.

    ``--extra-index-url`` (not ``--index-url``) so the file's other requirements still come from
    the user's index; the local label (``+cu130``) pins the variant, which PyPI does not carry.
    """
    find_links = find_links or next((p.source for p in plan.packages if p.name == "torch" and p.source and p.index_url is None), None)  # torch found in a folder
    lines = [f"# torch {plan.torch_version} ({plan.variant}) chosen by stackdoctor", *([f"--find-links {find_links}"] if find_links else [] if is_pypi(plan.index_url) else [f"--extra-index-url {plan.index_url}"])]
    lines += requirements(plan)
    return "\n".join(lines) + "\n"


def emit_uv(plan: Plan) -> str:
    """pyproject.toml fragments: ``[tool.uv.sources]`` + an explicit ``[[tool.uv.index]]``."""
    deps = ", ".join(f'"{p.name}=={p.version}"' for p in plan.packages)
    lines = [f"# torch {plan.torch_version} ({plan.variant}) chosen by stackdoctor", f"# [project] dependencies: {deps}"]
    if is_pypi(plan.index_url):
        lines.append("# these come from PyPI: no [tool.uv.sources] entry is needed")
        return "\n".join(lines) + "\n"
    name = f"pytorch-{plan.variant}"
    lines += ["", "[tool.uv.sources]"]
    lines += [f'{p.name} = [{{ index = "{name}" }}]' for p in plan.packages]
    lines += ["", "[[tool.uv.index]]", f'name = "{name}"', f'url = "{plan.index_url}"', "explicit = true"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- leftovers

# runtime_family, families_needed and predict_leftovers live in stackdoctor/leftovers.py (pure: the resolver's
# plan and execute's removal ask the same one), re-exported here.


def closure(snap: Snapshot, roots: Iterable[str]) -> set[str]:
    """Installed distributions reachable from ``roots`` through their requirements (markers ignored: over-inclusive)."""
    seen: set[str] = set()
    todo = [canonical_name(r) for r in roots]
    while todo:
        n = todo.pop()
        if n in seen or n not in snap.versions:
            continue
        seen.add(n)
        todo.extend(snap.requires.get(n, []))
    return seen


def leftovers(candidates: Iterable[str], snap: Snapshot) -> list[str]:
    """The one leftovers answer, for the dry run (``snap`` before) and for ``--remove-leftovers`` (``snap`` after):
    the predicted runtime packages of the previous variant (the plan's list) that are installed and that no other
    installed distribution requires (markers ignored: a package something may need is never called a leftover)."""
    cands = {canonical_name(c) for c in candidates}
    # what the others need, not through the torch family (the previous torch is being replaced: what it pulled in is
    # exactly what may be left over; a package that requires torch gets the new one)
    needed: set[str] = set()
    todo = [r for n in snap.versions if n not in cands and n not in TORCH_FAMILY for r in snap.requires.get(n, [])]
    while todo:
        n = todo.pop()
        if n in needed or n in TORCH_FAMILY or n not in snap.versions:
            continue
        needed.add(n)
        todo.extend(snap.requires.get(n, []))
    return sorted(n for n in cands if n in snap.versions and n not in needed)


# ---------------------------------------------------------------------------- the target


def _marked(stdout: str, mark: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        idx = line.find(mark)
        if idx >= 0:
            try:
                data = json.loads(line[idx + len(mark) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def snapshot(system: System, python: str, *, timeout: float = 60.0) -> Snapshot:
    res = system.run([python, "-I", str(worker_path("sd_snapshot.py"))], timeout=timeout, record=False)
    data = _marked(res.stdout, SNAP_MARK) if res.ok else None
    if data is None:
        return Snapshot(error=res.describe_failure() or "the target printed no package list")
    damaged = data.pop("@damaged", [])
    prefix = data.pop("@prefix", None)
    snap = Snapshot(damaged=[d for d in damaged if isinstance(d, str)] if isinstance(damaged, list) else [])
    snap.prefix = prefix if isinstance(prefix, str) else None
    for name, info in data.items():
        if isinstance(info, dict) and isinstance(info.get("version"), str):
            snap.versions[name] = info["version"]
            snap.requires[name] = [r for r in info.get("requires") or [] if isinstance(r, str)]
    return snap


def verify(system: System, python: str, *, timeout: float = 300.0) -> Verification:
    from stackdoctor import accelerators

    asked = accelerators.torch_questions()
    ask = {"STACKDOCTOR_TORCH_ASK": json.dumps(asked, sort_keys=True) if asked else None}
    res = system.run([python, "-I", str(worker_path("sd_verify.py"))], timeout=timeout, record=False, env=ask)
    data = _marked(res.stdout, VERIFY_MARK)
    if data is None:
        why = res.describe_failure() or "it printed nothing"
        tail = (res.stderr.strip().splitlines() or [""])[-1][:300]
        return Verification(error=f"importing torch in the target failed: {why}" + (f" ({tail})" if tail and tail not in why else ""))
    v = Verification(
        imported=bool(data.get("imported")),
        version=data.get("version"),
        cuda=data.get("cuda"),
        hip=data.get("hip"),
        cuda_available=data.get("cuda_available"),
        cuda_ok=data.get("cuda_ok"),
        cuda_error=data.get("cuda_error"),
        driver_api_version=data.get("driver_api_version") if type(data.get("driver_api_version")) is int else None,
        device_name=data.get("device_name"),
        mps_available=data.get("mps_available"),
        xpu_available=data.get("xpu_available"),
        available={str(k): x for k, x in (data.get("available") or {}).items() if isinstance(x, bool)} if isinstance(data.get("available"), dict) else {},
        available_errors=_str_dict(data.get("available_errors")),
        warnings=[w for w in data.get("warnings") or [] if isinstance(w, str)],
        error=data.get("error"),
        location=data.get("file"),
    )
    return v


def _str_dict(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _str_list(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def save_backup(
    system: System, python: str, names: Sequence[str], directory: str, *, copy_cap: int = BACKUP_COPY_CAP, timeout: float = 600.0
) -> Backup:
    """Back up the installed files of ``names`` into ``directory`` (in the target: ``sd_backup.py save``):
    every RECORD entry, or ``error`` says why not (then nothing may change)."""
    start = time.monotonic()
    argv = [python, "-I", str(worker_path("sd_backup.py")), "save", directory, json.dumps(list(names)), str(int(copy_cap))]
    res = system.run(argv, timeout=timeout, record=False, die_with_parent=True)
    data = _marked(res.stdout, BACKUP_MARK)
    b = Backup(directory, seconds=time.monotonic() - start)
    if data is None:
        b.error = res.describe_failure() or "the backup worker printed nothing"
        return b
    b.error = data.get("error") if isinstance(data.get("error"), str) else None
    b.saved = _str_dict(data.get("saved"))
    b.missing = {k: _int(v) for k, v in data.get("missing", {}).items()} if isinstance(data.get("missing"), dict) else {}
    b.linked, b.copied = _int(data.get("linked")), _int(data.get("copied"))
    b.linked_bytes, b.copied_bytes = _int(data.get("linked_bytes")), _int(data.get("copied_bytes"))
    return b


def restore_backup(
    system: System, python: str, directory: str, names: Sequence[str], planned: Mapping[str, str] | None = None, *, timeout: float = 900.0
) -> BackupRestore:
    """Remove everything of the family and put the backed-up files back (``sd_backup.py restore``)."""
    start = time.monotonic()
    argv = [python, "-I", str(worker_path("sd_backup.py")), "restore", directory, json.dumps(list(names)), json.dumps(dict(planned or {}))]
    res = system.run(argv, timeout=timeout, record=False, die_with_parent=True)
    data = _marked(res.stdout, BACKUP_MARK)
    r = BackupRestore(seconds=time.monotonic() - start)
    if data is None:
        r.error = res.describe_failure() or "the backup worker printed nothing"
        return r
    r.error = data.get("error") if isinstance(data.get("error"), str) else None
    r.restored = _str_dict(data.get("restored"))
    r.removed = _str_list(data.get("removed"))
    r.mismatch = _str_list(data.get("mismatch"))
    r.missing = _str_list(data.get("missing"))
    r.linked, r.copied = _int(data.get("linked")), _int(data.get("copied"))
    return r


@dataclass
class FamilyState:
    """What the torch family on disk is, compared with the journal's backup and plan (``sd_backup.py state``)."""

    state: str  # "old" | "new" | "mixed" | "unknown"
    why: str = ""
    stash: list[str] = field(default_factory=list)  # pip's stash folders of the family (``~orch``)
    now: dict[str, str] = field(default_factory=dict)


def family_state(system: System, python: str, directory: str, planned: Mapping[str, str], *, timeout: float = 600.0) -> FamilyState:
    argv = [python, "-I", str(worker_path("sd_backup.py")), "state", directory, json.dumps(list(TORCH_FAMILY)), json.dumps(dict(planned))]
    res = system.run(argv, timeout=timeout, record=False)
    data = _marked(res.stdout, BACKUP_MARK)
    if data is None or isinstance(data.get("error"), str):
        why = (data or {}).get("error") or res.describe_failure() or "the backup worker printed nothing"
        return FamilyState("unknown", str(why))
    st = str(data.get("state") or "unknown")
    return FamilyState(st if st in ("old", "new", "mixed") else "unknown", str(data.get("why") or ""), _str_list(data.get("stash")), _str_dict(data.get("now")))


def expected_version(plan: Plan) -> str | None:
    for p in plan.packages:
        if p.name == "torch":
            return p.requirement.split("==", 1)[1]
    return None


def judge(plan: Plan, v: Verification, accelerator: str | None, facts: Facts | None = None) -> tuple[bool, str]:
    """(ok, sentence): did the install give the planned torch, and can it use the accelerator seen?

    ``accelerator`` is what the machine's facts show: "cuda" | "rocm" | "xpu" | "mps" | a plug-in kind's backend |
    None. The sentence for the kind is the registry's (``accelerators.verify_install``: each kind's ``verify``), and
    a failure ends with the kind's hint (``accelerators.import_hint``, from ``facts``: CANN's ``source`` line).
    """
    from stackdoctor import accelerators

    if not v.imported:
        hint = accelerators.import_hint(accelerator, v.error or "", facts)
        return False, f"torch does not import in the target: {v.error or 'unknown error'}" + (f"; {hint}" if hint else "")
    want = expected_version(plan)
    if want and v.version != want:
        from packaging.version import InvalidVersion, Version

        try:
            same = Version(v.version or "") == Version(want)
        except InvalidVersion:
            same = False
        if not same:
            return False, f"the target imports torch {v.version}, not the planned {want} (another torch shadows it? {v.location})"
    got = f"torch {v.version} imports in the target"
    verdict = accelerators.verify_install(accelerator, plan.variant, v)
    if verdict is not None:
        ok, clause = verdict
        hint = None if ok else accelerators.import_hint(accelerator, clause, facts)
        clause += f" — {hint}" if hint else ""
        return (True, f"{got} and {clause}") if ok else (False, f"{got}, but {clause}; run `stackdoctor check`")
    if accelerators.for_variant(plan.variant) is not None:  # a GPU build, and no kind of it here to try
        return True, f"{got} (no matching GPU on this machine, so the accelerator was not tried)"
    return True, got


# ---------------------------------------------------------------------------- GPU code of the installed binaries

GPU_CODE_READ_S = 60.0  # the static read of libtorch_cuda.so / libtorch_hip.so (headers only; seconds on a 1 GB library)


@dataclass
class GpuCodeCheck:
    """What the installed binaries of a GPU build carry, against the GPUs of that kind here."""

    sentence: str  # the note (committed), or why the install is not done (``cannot_run``)
    cannot_run: bool = False  # a GPU here that none of the code read can run: roll back
    data: dict[str, Any] = field(default_factory=dict)  # InstallResult.gpu_code


def _build_kind(variant: str | None) -> tuple[str, str] | None:
    """(library kind, GPU vendor) of a GPU build's variant name (:func:`stackdoctor.matrix.variant_kind`): cu* -> CUDA
    on NVIDIA, rocm* -> HIP on AMD."""
    from stackdoctor.matrix import variant_kind

    kind = variant_kind(variant or "")
    return {"cuda": ("cuda", "nvidia"), "rocm": ("hip", "amd")}.get(kind[0]) if kind else None


def _gpus_for(plan: Plan, vendor: str, gpus: Sequence[GpuView]) -> list[GpuView]:
    """The GPUs of ``vendor`` the installed torch will run on: listed by their driver's tools (not seen only on the
    PCI bus, as the resolver counts them), minus those the plan's environment hides (``CUDA_VISIBLE_DEVICES``...,
    read as the rules read it: :func:`stackdoctor.rules.helpers.visible_to_torch`)."""
    from stackdoctor.rules.helpers import visible_to_torch

    return [g for g in gpus if g.vendor == vendor and g.witnesses != ["pci"] and visible_to_torch(g, plan.env)]


def _label(g: GpuView, arch: str | None) -> str:
    return f"GPU {g.index} {g.name or '?'}" + (f" ({arch})" if arch else "")


def _override_gfx(value: str | None) -> str | None:
    """``HSA_OVERRIDE_GFX_VERSION=10.3.0`` -> ``gfx1030`` (major, minor, stepping in hex: 9.0.10 -> gfx90a)."""
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)$", (value or "").strip())
    return f"gfx{int(m.group(1))}{int(m.group(2))}{int(m.group(3)):x}" if m else None


def _planned_gpu_code(plan: Plan, kind: str) -> tuple[list[str], str | None] | None:
    """The plan's GPU code as the matrix (the embedded rows, the learned layer, ``STACKDOCTOR_MATRIX``) lists it, and
    where it came from (``inferred: ...`` for a release learned without its binaries); None when no row says."""
    if not plan.torch_version or not plan.variant:
        return None
    try:
        from stackdoctor.matrix import load_matrix

        variant = load_matrix().variant(plan.torch_version, plan.variant)
    except Exception:  # noqa: BLE001 - the matrix only adds a comparison to the note; what was read stands without it
        return None
    if variant is None:
        return None
    wheel = next((p.wheel for p in plan.packages if p.name == "torch" and p.wheel), None)
    platform = wheel[: -len(".whl")].rsplit("-", 1)[-1] if wheel and wheel.endswith(".whl") else None
    listed = list(variant.arch_for(platform) if kind == "cuda" else variant.gfx)
    return (listed, variant.derived_from) if listed else None


def _as_read(archs: Iterable[str]) -> set[str]:
    """The matrix's notation (``sm_120+PTX``) as the binaries name their code (``sm_120``, ``compute_120``)."""
    out: set[str] = set()
    for a in archs:
        base, plus, _ = a.partition("+")
        out.add(base.split(":", 1)[0].lower())
        if plus and base.startswith("sm_"):
            out.add("compute_" + base[3:])
    return out


def _code_words(read: Mapping[str, Any]) -> str:
    if read.get("kind") == "cuda":
        sms, ptx = list(read.get("arch_list") or []), list(read.get("ptx") or [])
        return " ".join(sms + ptx) + (" (no PTX)" if not ptx else "") if sms or ptx else "no GPU code"
    return " ".join(read.get("gfx") or []) or "no GPU code"


def check_gpu_code(plan: Plan, v: Verification, gpus: Sequence[GpuView], system: System, *, timeout_s: float = GPU_CODE_READ_S) -> GpuCodeCheck | None:
    """Read the GPU code of the installed torch (``v.location``'s folder) and compare it with this machine's GPUs.

    None: not a CUDA / ROCm build, or no GPU of its kind here (nothing to judge). A GPU whose compute capability has
    no cubin the arch rules let it run and no PTX at or below it (:func:`stackdoctor.matrix.arch_match`), or whose
    gfx target (after the plan's ``HSA_OVERRIDE_GFX_VERSION``) has no code object, makes ``cannot_run``; an incomplete
    read never does (it is a note: not judged). A read that fails is a note too, never a silent ok."""
    bk = _build_kind(plan.variant)
    if bk is None:
        return None
    kind, vendor = bk
    here = _gpus_for(plan, vendor, gpus)
    if not here:
        return None
    data: dict[str, Any] = {"read": None, "gpus": [], "planned": None, "verdict": "unread"}
    if not v.location:
        return GpuCodeCheck("the GPU code of the installed torch was not read: its import did not say where it is", data=data)
    from stackdoctor.learn import read_installed_gpu_code

    torch_dir = os.path.dirname(v.location)
    try:
        read = read_installed_gpu_code(torch_dir, system=system, timeout_s=timeout_s)
    except Exception as exc:  # noqa: BLE001 - a reader bug must not decide an install: it is said, and nothing is judged
        return GpuCodeCheck(f"the GPU code of the installed torch was not read ({type(exc).__name__}: {exc})", data=data)
    lib = "libtorch_cuda.so" if kind == "cuda" else "libtorch_hip.so"
    if read is None:
        return GpuCodeCheck(f"the GPU code of the installed torch was not read: {torch_dir} has no {lib}", data=data)
    data["read"] = read
    words = _code_words(read)
    where = str(read.get("library") or lib)
    got = list(read.get("arch_list") or []) + list(read.get("ptx") or []) if kind == "cuda" else list(read.get("gfx") or [])
    if not got:
        return GpuCodeCheck(f"the GPU code of the installed torch was not read from {where}: {read.get('error') or 'no GPU code found'}", data=data)
    from stackdoctor.matrix import arch_match

    override = _override_gfx(plan.env.get("HSA_OVERRIDE_GFX_VERSION")) if kind == "hip" else None
    have_gfx = {x.split(":", 1)[0].lower() for x in got}
    served: list[str] = []
    unserved: list[str] = []
    unknown: list[str] = []
    for g in here:
        if kind == "cuda":
            cc = g.compute_capability
            arch = f"sm_{cc.replace('.', '')}" if cc else None
            how = arch_match(got, cc) if cc else None
        else:
            arch = override or ((g.gfx or "").split(":", 1)[0].lower() or None)
            how = ("code object" if arch in have_gfx else None) if arch else None
        data["gpus"].append({"gpu": _label(g, None), "arch": arch, "runs": how})
        (unknown if arch is None else served if how else unserved).append(_label(g, arch))
    planned = _planned_gpu_code(plan, kind)
    differs = ""
    if planned is not None:
        data["planned"] = {"list": planned[0], "derived_from": planned[1]}
        if _as_read(planned[0]) != _as_read(got):
            differs = f"; the plan had {' '.join(planned[0])}" + (f" ({planned[1]})" if planned[1] else "")
    complete = not read.get("error")
    if unserved and complete:
        data["verdict"] = "cannot-run"
        torch = f"torch {v.version}" if v.version else "torch"
        missing = (f"no code for {', '.join(sorted({u.rsplit('(', 1)[-1].rstrip(')') for u in unserved}))}"
                   + (" and no PTX at or below it" if kind == "cuda" else ""))
        return GpuCodeCheck(
            f"the installed {torch} cannot run on {', '.join(unserved)}: its GPU code, read from {where}, is {words} ({missing}){differs}",
            cannot_run=True, data=data,
        )
    if unserved or not complete:
        data["verdict"] = "not-judged"
        return GpuCodeCheck(
            f"GPU code read from the installed {where}: {words}, but the read was incomplete ({read.get('error')}), so it was not judged"
            + (f" (in what was read, nothing runs on {', '.join(unserved)})" if unserved else "") + differs,
            data=data,
        )
    data["verdict"] = "runs" if served else "not-judged"
    runs = f"it runs on {', '.join(served)}" if served else "no GPU here said its compute capability, so nothing was judged"
    tail = f" ({', '.join(unknown)}: compute capability unknown, not judged)" if unknown and served else ""
    return GpuCodeCheck(f"GPU code read from the installed {where}: {words}; {runs}{tail}{differs}", data=data)


# ---------------------------------------------------------------------------- execution


def _record_hash(path: str) -> str:
    import base64
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def _saved_files(backup: str) -> tuple[set[tuple[int, int]], dict[int, set[str]]]:
    """The backup's files: their (device, inode) and, by size, their RECORD hashes (``manifest.json``)."""
    try:
        with open(os.path.join(backup, "manifest.json"), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return set(), {}
    inodes: set[tuple[int, int]] = set()
    by_size: dict[int, set[str]] = {}
    for entry in manifest.get("dists") or [] if isinstance(manifest, dict) else []:
        for rec in entry.get("files") or []:
            ino = rec.get("ino")
            if isinstance(ino, list) and len(ino) == 2 and all(isinstance(x, int) for x in ino):
                inodes.add((ino[0], ino[1]))
            if isinstance(rec.get("size"), int) and isinstance(rec.get("hash"), str) and rec["hash"]:
                by_size.setdefault(rec["size"], set()).add(rec["hash"])
    return inodes, by_size


def _all_saved(folder: str, inodes: set[tuple[int, int]], by_size: dict[int, set[str]]) -> bool:
    """Every file under ``folder`` (at least one) is one of the saved ones: the same inode (pip renamed it there),
    or the same size and sha256 (pip copied it to another filesystem)."""
    count = 0
    for dp, _dn, fn in os.walk(folder):
        for name in fn:
            p = os.path.join(dp, name)
            try:
                st = os.lstat(p)
                same = (st.st_dev, st.st_ino) in inodes or _record_hash(p) in by_size.get(st.st_size, set())
            except OSError:
                return False
            if not same:
                return False
            count += 1
    return count > 0


def sweep_pip_stash(backup: str, tmpdir: str | None = None) -> list[str]:
    """pip's stash of an uninstall it did not finish (``$TMPDIR/pip-uninstall-*``: the console scripts and other files
    outside the package folders it moves aside) is removed when every file in it is one of the previous torch's files
    that the backup holds, decided from the files: the torch that stays has its own copies (the backup's, put back,
    or the new build's). Anything else there is pip's business and is left alone."""
    import glob
    import tempfile

    inodes, by_size = _saved_files(backup)
    if not inodes and not by_size:
        return []
    removed = []
    for d in glob.glob(os.path.join(tmpdir or tempfile.gettempdir(), "pip-uninstall-*")):
        if os.path.isdir(d) and not os.path.islink(d) and _all_saved(d, inodes, by_size):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def restore_commands(
    before: Mapping[str, str], python: str, installer: str, *, offline: bool = False, find_links: Sequence[str] = (), uv: str = "uv"
) -> list[list[str]]:
    """The last resort when the saved files could not be put back: reinstall exactly the previous build
    (version and local label) over what is there, from the sources the user's own configuration trusts, never a
    ``--index-base`` / mirror given for the new build. Offline (``--offline`` / ``--no-index``): only the user's
    ``--find-links`` folders, with ``--no-index``; none, no command."""
    pins = [f"{n}=={v}" for n, v in before.items()]
    if not pins:
        return []
    where: list[str] = []
    if offline:
        if not find_links:
            return []
        where = ["--no-index"] + [x for d in find_links for x in ("--find-links", d)]
    if installer == "uv":
        return [[uv, "pip", "install", "--python", python, "--reinstall", "--no-deps", *pins, *where]]
    return [[python, "-m", "pip", "install", "--force-reinstall", "--no-deps", *pins, *where]]


def planned_versions(plan: Plan) -> dict[str, str]:
    """name -> the exact version the plan installs (local label included)."""
    out = {}
    for p in plan.packages:
        if "==" in p.requirement:
            out[canonical_name(p.name)] = p.requirement.split("==", 1)[1]
    return out


@dataclass
class _Tx:
    """One install's transaction: the target, its journal, the signals, how to talk."""

    system: System
    python: str
    installer: str
    journal: Journal
    sig: Signals
    stream: Callable[[str], None]
    say: Callable[[str], None]
    uv: str
    offline: bool
    user_find_links: Sequence[str]

    def state(self) -> FamilyState:
        return family_state(self.system, self.python, self.journal.backup, self.journal.planned)

    def commit(self, st: FamilyState) -> str | None:
        """The family is exactly old or exactly new: drop pip's stash folders (beside the packages, and in the
        temporary folder: :func:`sweep_pip_stash`), the backup and the journal."""
        for p in st.stash:
            shutil.rmtree(p, ignore_errors=True)
        sweep_pip_stash(self.journal.backup, self.system.env.get("TMPDIR") or None)
        return self.journal.remove()

    def put_back(self, result: InstallResult) -> None:
        """The saved files back (offline, every hash checked), then the import; the reinstall of the exact
        previous build only if that was not enough. Shielded: signals are remembered, not obeyed."""
        prev = self.journal.before
        with self.sig.shielded():
            self.journal.write("restore")
            hook("restore")
            rb = restore_backup(self.system, self.python, self.journal.backup, TORCH_FAMILY, self.journal.planned)
            st = self.state()
            result.state = st.state
            result.after = {k: v for k, v in st.now.items() if v != "twice"}
            v = verify(self.system, self.python) if prev else None
            result.verification = v
            if rb.error is None and not rb.mismatch and not rb.missing and st.state == "old":
                result.restored = True
                result.restored_from = "backup"
                self._finish(result, st)
                return
            why = (
                rb.error
                or (f"files differ from their RECORD: {', '.join(rb.mismatch[:3])}" if rb.mismatch else "")
                or (f"files not put back: {', '.join(rb.missing[:3])}" if rb.missing else "")
                or st.why
            )
            cmds = restore_commands(prev, self.python, self.installer, offline=self.offline, find_links=self.user_find_links, uv=self.uv)
            if not cmds:
                result.restored = False
                result.notes.append(f"putting back the saved files was not enough ({why}).")
                self._keep(result)
                return
            result.notes.append(f"putting back the saved files was not enough ({why}); reinstalling the exact previous build.")
            ok = True
            for cmd in cmds:
                res = self.system.run_streaming(
                    cmd, timeout=DEFAULT_INSTALL_TIMEOUT_S, on_stdout=self.stream, on_stderr=self.stream,
                    on_start=self.journal.started_installer, die_with_parent=True,
                )
                if not res.ok:
                    ok = False
                    result.notes.append(f"restore step failed ({failure_line(res)}): {' '.join(cmd)}")
                    break
            after = snapshot(self.system, self.python)
            v = verify(self.system, self.python)
            result.verification = v
            result.after = after.torch_family() if after.ok else {}
            result.restored = ok and result.after == prev and not after.family_damaged() and v.imported
            if result.restored:
                result.restored_from = "index"
                self._finish(result, FamilyState("old", stash=self.state().stash))
            else:
                self._keep(result)

    def _finish(self, result: InstallResult, st: FamilyState) -> None:
        err = self.commit(st)
        if err:
            result.notes.append(f"the install journal {self.journal.dir} could not be removed ({err}); remove it by hand.")

    def _keep(self, result: InstallResult) -> None:
        result.journal_kept = self.journal.dir
        result.notes.append(
            f"the previous files are kept in {self.journal.backup}; run `stackdoctor install --python {self.python} --recover` to try again."
        )


def recover(
    system: System,
    python: str,
    journal: Journal,
    sig: Signals,
    *,
    installer: str = "pip",
    stream: Callable[[str], None] | None = None,
    say: Callable[[str], None] | None = None,
    uv: str = "uv",
    offline: bool = False,
    find_links: Sequence[str] = (),
) -> InstallResult:
    """Finish an install that was killed (its journal is there): keep a complete, importing new build, else put
    the previous one back. The result's message says what the environment holds now."""
    stream = stream or _stderr_writer
    talk = _talker(say)
    say = talk
    if journal.unprinted:
        say("stackdoctor: the stopped install could not print its last lines (its output was closed); they were:")
        for line in journal.unprinted:
            say(f"  {line}")
        journal.unprinted = []
    talk.journal = journal
    journal.python = journal.python or python
    tx = _Tx(system, python, journal.installer or installer, journal, sig, stream, say, uv, offline, find_links)
    prev = journal.before
    result = InstallResult(False, ExitCode.FAILED, "", list(journal.command), before=dict(prev))
    with sig.shielded():
        if journal.phase == "backup" or not os.path.exists(os.path.join(journal.backup, "manifest.json")):
            err = journal.remove()
            result.ok, result.exit_code, result.state = err is None, ExitCode.OK if err is None else ExitCode.FAILED, "old"
            result.message = "an earlier install was stopped before it changed anything; its journal was removed" + (f" ({err})" if err else "") + "."
            return result
        st = tx.state()
        result.state = st.state
        if st.state == "old":
            tx._finish(result, st)
            result.ok, result.exit_code, result.after = True, ExitCode.OK, dict(prev)
            result.message = f"an earlier install was stopped before it changed the torch family; {_holds(prev)} as before."
            return result
        if st.state == "new":
            v = verify(system, python)
            result.verification = v
            if v.imported:
                tx._finish(result, st)
                result.ok, result.exit_code, result.after = True, ExitCode.OK, dict(journal.planned)
                result.message = f"an earlier install had finished before it was stopped: {_fmt(journal.planned)} is complete (every file's sha256 checked) and imports; it was kept."
                return result
        say(f"stackdoctor: an earlier install into {journal.prefix} was stopped halfway ({st.why or 'the new build does not import'}); putting back {_fmt(prev) or 'the state before it'}.")
    tx.put_back(result)
    result.ok = bool(result.restored) or (not prev and result.state == "old")
    result.exit_code = ExitCode.OK if result.ok else ExitCode.FAILED
    result.message = "an earlier install was stopped halfway; " + _restore_sentence(result, prev)
    return result


def execute(
    plan: Plan,
    *,
    system: System,
    python: str,
    installer: str = "pip",
    index_base: str | None = None,
    find_links: str | None = None,
    timeout_s: float = DEFAULT_INSTALL_TIMEOUT_S,
    remove_leftovers: bool = False,
    accelerator: str | None = None,
    say: Callable[[str], None] | None = None,
    stream: Callable[[str], None] | None = None,
    uv: str = "uv",
    grace_s: float = 30.0,
    source_args: Sequence[str] | None = None,
    env: Mapping[str, str | None] | None = None,
    backup_copy_cap: int = BACKUP_COPY_CAP,
    offline: bool = False,
    user_find_links: Sequence[str] = (),
    reinstall: bool = False,
    gpu_targets: Sequence[GpuView] = (),
    facts: Facts | None = None,
    progress: bool = False,
    verbose: bool = False,
) -> InstallResult:
    """Install ``plan`` into ``python`` as a transaction: the target holds exactly its previous torch family or
    exactly the new one, whatever happens (a failure, Ctrl-C, SIGTERM, SIGHUP, a full disk; after SIGKILL or a power
    loss, the next install or ``--recover`` finishes it from the journal).

    1. lock the environment; finish an earlier install's journal if one is there;
    2. write the journal (:class:`~stackdoctor.transaction.Journal`), then back up every RECORD file of the family
       (hard links); if the backup cannot be complete, stop here: nothing is changed;
    3. run the installer (its own session: a terminal's Ctrl-C reaches only stackdoctor, which stops it);
    4. judge the family from its files (:func:`family_state`): exactly the new build, complete per RECORD and
       importing: done; exactly the old files: nothing changed; anything else, or an interrupt: put the old files
       back (every hash checked), then the import; only if that fails, reinstall the exact previous build from the
       user's own sources (``offline``: only ``user_find_links``).

    ``source_args`` / ``env``: where the installer takes the new packages from (the index check's
    :class:`~stackdoctor.availability.Delivery`). ``index_base`` is kept for callers and not used to put back: the
    previous build never comes from an index given for the new one.

    ``gpu_targets``: the machine's GPUs (``facts.reconciled.gpus``). For a CUDA / ROCm build, the GPU code of the
    installed binaries is read before the commit (:func:`check_gpu_code`): binaries that cannot run on a GPU of
    this kind here are put back like a failed import; what was read is a note (and ``InstallResult.gpu_code``).

    ``progress``: say each step after the installer before it starts (:class:`Steps`); ``verbose``: and its time."""
    del index_base
    talk = _talker(say)  # a closed terminal (SIGHUP) or pipe (EPIPE) must not stop a put-back
    say = talk
    steps = Steps(talk, show=progress or verbose, verbose=verbose)
    stream = stream or _stderr_writer
    argv, env = installer_argv(plan, python, installer, find_links=find_links, uv=uv, source_args=source_args, env=env, reinstall=reinstall)
    before = snapshot(system, python)
    if not before.ok:
        return InstallResult(False, ExitCode.USAGE, f"cannot read the target's installed packages ({before.error}); nothing was changed.", argv)
    prefix = before.prefix or ""
    if not prefix or not os.path.isdir(prefix):
        return InstallResult(False, ExitCode.FAILED, f"the target did not say where its environment is (sys.prefix {prefix!r}); nothing was changed.", argv)
    try:
        with env_lock(prefix), signals(say) as sig:
            say_unprinted(prefix, say)
            earlier = read_journal(prefix)
            notes: list[str] = []
            if earlier is not None and earlier.owner_alive():  # no lock to hold (Windows), but its owner runs
                raise Locked(earlier.pid, earlier.phase)
            if earlier is not None:
                stray = stop_stray_installer(earlier, say)
                if stray is not None:
                    stray.command = argv
                    return stray
                rec = recover(system, python, earlier, sig, installer=installer, stream=stream, say=say, uv=uv, offline=offline, find_links=user_find_links)
                if rec.journal_kept:
                    return rec
                notes.append(rec.message)
                before = snapshot(system, python)
                if not before.ok:
                    return InstallResult(False, ExitCode.FAILED, f"cannot read the target's installed packages ({before.error}).", argv, notes=notes)
            result = _transaction(
                plan, argv, before, prefix, sig, system=system, python=python, installer=installer, timeout_s=timeout_s, accelerator=accelerator,
                say=say, stream=stream, uv=uv, grace_s=grace_s, env=env, copy_cap=backup_copy_cap, offline=offline, user_find_links=user_find_links,
                gpu_targets=gpu_targets, facts=facts, steps=steps,
            )
            result.notes[:0] = notes
    except Locked as exc:
        return InstallResult(False, ExitCode.USAGE, f"{_live_words(exc, prefix)}; nothing was changed: run this again when it has finished.", argv)
    if result.ok and result.state == "new":
        predicted = plan.leftovers or predict_leftovers(before.versions, plan.variant)
        with steps.step("leftovers", "stackdoctor: looking for the previous variant's packages left behind..."):
            _remove_leftovers(result, predicted, system, python, installer, uv, stream, remove_leftovers)
    steps.told()
    return _told(result, talk, prefix)


def _told(result: InstallResult, talk: _Say, prefix: str) -> InstallResult:
    """The result, with what could not be printed on the way kept for the next run (and its final sentence too:
    an output that was closed during the install will not show it)."""
    result.prefix = prefix
    result.unprinted = list(talk.lost)
    if talk.lost:
        save_unprinted(prefix, [*talk.lost, result.message, *result.notes])
    return result


def execute_recovery(
    system: System,
    python: str,
    *,
    installer: str = "pip",
    stream: Callable[[str], None] | None = None,
    say: Callable[[str], None] | None = None,
    uv: str = "uv",
    offline: bool = False,
    find_links: Sequence[str] = (),
) -> InstallResult:
    """``install --recover`` (and the start of every install): finish a killed install's journal, under the lock."""
    talk = _talker(say)
    before = snapshot(system, python)
    if not before.ok or not before.prefix:
        return InstallResult(False, ExitCode.FAILED, f"cannot read the target's installed packages ({before.error or 'no sys.prefix'}).")
    prefix = before.prefix
    try:
        with env_lock(prefix), signals(talk) as sig:
            say_unprinted(prefix, talk)
            journal = read_journal(prefix)
            if journal is None:
                return InstallResult(True, ExitCode.OK, f"no unfinished install in {prefix}: nothing to do.", before=before.torch_family(), after=before.torch_family())
            if journal.owner_alive():
                raise Locked(journal.pid, journal.phase)
            stray = stop_stray_installer(journal, talk)
            if stray is not None:
                return stray
            rec = recover(system, python, journal, sig, installer=installer, stream=stream, say=talk, uv=uv, offline=offline, find_links=find_links)
            return _told(rec, talk, prefix)
    except Locked as exc:
        return InstallResult(False, ExitCode.USAGE, f"{_live_words(exc, prefix)}; it is not stopped, so there is nothing to recover: run this again when it has finished.")


STRAY_INTERRUPT_S = 15.0  # how long a stopped install's installer gets to clean up after SIGINT (pip rolls back its uninstall)
STRAY_KILL_S = 5.0


def _live_words(exc: Locked, prefix: str) -> str:
    who = f" (process {exc.pid}" + (f", phase {exc.phase}" if exc.phase else "") + ")" if exc.pid else ""
    return f"another stackdoctor install{who} is changing {prefix}"


def _wait_gone(journal: Journal, seconds: float) -> list[int]:
    end = time.monotonic() + seconds
    left = journal.installer_processes()
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = journal.installer_processes()
    return left


def stop_stray_installer(journal: Journal, say: Callable[[str], None], *, interrupt_s: float = STRAY_INTERRUPT_S, kill_s: float = STRAY_KILL_S) -> InstallResult | None:
    """A stopped install's installer may outlive it (SIGKILL of stackdoctor where the kernel has no parent-death
    signal, or a grandchild): no recovery runs beside it. Its processes (the pid and start time in the journal, and
    its session) get SIGINT, their own clean-up, then SIGKILL, each wait bounded and said; None when none is left,
    else the result that refuses (exit 2)."""
    left = journal.installer_processes()
    if not left:
        return None
    name = os.path.basename(journal.installer or "pip")
    say(f"stackdoctor: the stopped install's {name} (process {journal.installer_pid}) is still running; "
        f"stopping it before that install is finished (at most {interrupt_s + kill_s:g} s).")
    for how, seconds in ((signal.SIGINT, interrupt_s), (getattr(signal, "SIGKILL", signal.SIGTERM), kill_s)):
        for pid in left:
            try:
                os.kill(pid, how)
            except OSError:
                pass
        left = _wait_gone(journal, seconds)
        if not left:
            return None
    return InstallResult(
        False, ExitCode.USAGE,
        f"the stopped install's {name} (process {', '.join(map(str, left))}) is still running after SIGKILL; nothing was changed: "
        "run this again when it has gone.",
    )


def intact(system: System, python: str, names: Sequence[str]) -> str | None:
    """None when every named distribution is complete per its RECORD (every sha256) and torch imports; else why not."""
    argv = [python, "-I", str(worker_path("sd_backup.py")), "check", json.dumps(list(names))]
    res = system.run(argv, timeout=600, record=False)
    data = _marked(res.stdout, BACKUP_MARK)
    if data is None or isinstance(data.get("error"), str):
        return str((data or {}).get("error") or res.describe_failure() or "the backup worker printed nothing")
    bad = _str_dict(data.get("damaged"))
    if bad:
        return "; ".join(f"{n}: {w}" for n, w in bad.items())
    v = verify(system, python)
    return None if v.imported else f"torch does not import: {v.error or '?'}"


def _remove_leftovers(
    result: InstallResult, predicted: Sequence[str], system: System, python: str, installer: str, uv: str, stream: Callable[[str], None], remove: bool
) -> None:
    after = snapshot(system, python)
    if after.ok:
        result.leftovers = leftovers(predicted, after)
    if result.leftovers and remove:
        rm = system.run_streaming(
            uninstall_command(result.leftovers, python, installer, uv=uv), timeout=600, on_stdout=stream, on_stderr=stream, die_with_parent=True
        )
        if rm.ok:
            result.removed = list(result.leftovers)
            result.leftovers = []
        else:
            result.notes.append(f"removing the leftovers failed: {rm.describe_failure()}")


def _stopped(argv: list[str], prev: Mapping[str, str], why: str, env: Mapping[str, str | None] | None = None) -> InstallResult:
    r = InstallResult(False, ExitCode.FAILED, "", argv, before=dict(prev), after=dict(prev), state="old", stopped_before=True)
    carried = sorted(k for k, v in (env or {}).items() if v is not None)  # credentials travel in the environment, never shown
    r.message = (
        f"nothing was changed: {why}, so the previous torch could not be kept aside to put back; "
        f"fix that and run again, or install without a way back yourself: {' '.join(argv)}"
        + (f" (with {', '.join(carried)} set as for the index check)" if carried else "")
    )
    return r


@dataclass
class Steps:
    """What runs after the installer, each step said before it starts (``show``: a plain line, no spinner, no
    carriage return, so a pipe gets the same lines) and timed (``time.monotonic``); ``verbose`` says each step's
    time at the end (issue 29: after pip's last line the install is never silent)."""

    say: Callable[[str], None] = lambda line: None
    show: bool = False
    verbose: bool = False
    times: list[tuple[str, float]] = field(default_factory=list)

    @contextlib.contextmanager
    def step(self, name: str, line: str) -> Iterator[None]:
        if self.show:
            self.say(line)
        start = time.monotonic()
        try:
            yield
        finally:
            self.times.append((name, time.monotonic() - start))

    def told(self) -> None:
        if self.verbose:
            for name, seconds in self.times:
                self.say(f"  {name}: {seconds:.1f} s")


def _reads_gpu_code(plan: Plan, gpus: Sequence[GpuView]) -> bool:
    bk = _build_kind(plan.variant)
    return bk is not None and bool(_gpus_for(plan, bk[1], gpus))


def _transaction(
    plan: Plan,
    argv: list[str],
    before: Snapshot,
    prefix: str,
    sig: Signals,
    *,
    system: System,
    python: str,
    installer: str,
    timeout_s: float,
    accelerator: str | None,
    say: Callable[[str], None],
    stream: Callable[[str], None],
    uv: str,
    grace_s: float,
    env: Mapping[str, str | None] | None,
    copy_cap: int,
    offline: bool,
    user_find_links: Sequence[str],
    gpu_targets: Sequence[GpuView] = (),
    facts: Facts | None = None,
    steps: Steps | None = None,
) -> InstallResult:
    steps = steps or Steps()
    prev = before.torch_family()
    journal = Journal(prefix=prefix, python=python, before=dict(prev), planned=planned_versions(plan), command=list(argv), installer=installer)
    if isinstance(say, _Say):
        say.journal = journal  # from now on a line that cannot be shown is in the journal's log
    tx = _Tx(system, python, installer, journal, sig, stream, say, uv, offline, user_find_links)
    result = InstallResult(False, ExitCode.FAILED, "", argv, before=dict(prev))
    res: CommandResult | None = None
    phase = "journal"
    try:
        try:
            journal.create()
        except OSError as e:
            journal.remove()
            return _stopped(argv, prev, f"the install journal could not be written in {journal.dir} ({e.strerror or e})", env)
        phase = "backup"
        hook("backup")
        b = save_backup(system, python, list(TORCH_FAMILY), journal.backup, copy_cap=copy_cap)
        if b.error:
            with sig.shielded():
                journal.remove()
            return _stopped(argv, prev, f"the backup failed ({b.error})", env)
        if b.missing:
            result.notes.append(
                f"the previous {', '.join(f'{n} ({k} files already missing)' for n, k in b.missing.items())} was backed up as it is."
            )
        journal.write("install")
        phase = "install"
        hook("install")
        res = system.run_streaming(
            argv, timeout=timeout_s, on_stdout=stream, on_stderr=stream, grace_s=grace_s, env=env, on_start=journal.started_installer, die_with_parent=True
        )
        result.returncode = res.returncode
        phase = "verify"
        if res.status == "interrupted":
            raise Interrupted(sig.received or int(signal.SIGINT))
        journal.write("verify")
        hook("verify")
        with steps.step("record", "stackdoctor: checking the installed files against their RECORD..."):
            st = tx.state()
        result.state = st.state
        result.after = {k: v for k, v in st.now.items() if v != "twice"}
        if st.state == "new":
            hook("import")
            with steps.step("import", "stackdoctor: importing torch in the target..."):
                v = verify(system, python)
            result.verification = v
            ok, sentence = judge(plan, v, accelerator, facts)
            gpu = None
            if v.imported and _reads_gpu_code(plan, gpu_targets):
                with steps.step("gpu-code", "stackdoctor: reading the GPU code of the installed binaries..."):
                    gpu = check_gpu_code(plan, v, gpu_targets, system)
            if gpu is not None:
                result.gpu_code = gpu.data
                if gpu.cannot_run:  # binaries that cannot run on this machine's GPU: not done, put back as a failed verdict
                    say(f"stackdoctor: {gpu.sentence}; " + (f"putting back the previous {_fmt(prev)}." if prev else "removing it (the target had no torch before)."))
                    tx.put_back(result)
                    result.ok, result.exit_code = False, ExitCode.FAILED
                    result.message = gpu.sentence + "; " + _restore_sentence(result, prev)
                    return result
                result.notes.append(gpu.sentence + ".")
            if v.imported or not prev:
                hook("commit")
                if sig.received is not None:  # arrived while the import was checked: the user asked to stop
                    raise Interrupted(sig.received)
                with sig.shielded(), steps.step("commit", "stackdoctor: removing the backup and the journal..."):
                    err = tx.commit(st)
                if err:
                    result.notes.append(f"the install journal {journal.dir} could not be removed ({err}); remove it by hand.")
                result.ok = ok
                result.exit_code = ExitCode.OK if ok else ExitCode.FAILED
                result.message = sentence + "."
                if sig.received is not None:  # arrived during the commit, which a signal never cuts short
                    result.interrupted = True
                    result.signal = signal_name(sig.received)
                    result.exit_code = EXIT_FOR.get(sig.received, 130)
                    result.message = f"the interrupt came while the new build was being committed, so it stays: {sentence}."
                return result
            say(f"stackdoctor: {sentence}; putting back the previous {_fmt(prev)}.")
            tx.put_back(result)
            result.message = sentence + "; " + _restore_sentence(result, prev)
            return result
        how = f"the install did not finish in {timeout_s:g} s" if res.status == "timeout" else f"the install failed ({failure_line(res)})" if not res.ok else (
            f"the install ended, but left {_fmt(result.after) or 'no torch'} ({st.why})"
        )
        if not res.ok and "externally-managed-environment" in (res.stdout or "") + (res.stderr or ""):
            result.notes.append(externally_managed(python, refused=True))  # PEP 668: what to do instead, as a command
        return _undo(tx, result, st, how)
    except Interrupted as exc:
        signum = sig.received or exc.signum
        result.interrupted = True
        result.signal = signal_name(signum)
        result.exit_code = EXIT_FOR.get(signum, 130)
        how = "the install was interrupted" if signum == signal.SIGINT else f"the install was stopped by {result.signal}"
        if phase in ("journal", "backup"):
            with sig.shielded():
                err = journal.remove()
            result.state, result.after, result.stopped_before = "old", dict(prev), True
            result.message = f"{how} before anything was changed; {_holds(prev)} as before." + (f" ({err})" if err else "")
            return result
        with sig.shielded():
            st = tx.state()
        result.state = st.state
        result.after = {k: v for k, v in st.now.items() if v != "twice"}
        code = result.exit_code
        _undo(tx, result, st, how)
        result.exit_code = code
        return result


def _undo(tx: _Tx, result: InstallResult, st: FamilyState, how: str) -> InstallResult:
    """After a failed or interrupted install: commit an untouched family as it is, else put the old files back."""
    prev = tx.journal.before
    if result.exit_code == ExitCode.OK:
        result.exit_code = ExitCode.FAILED
    if st.state == "old":
        with tx.sig.shielded():
            v = verify(tx.system, tx.python) if prev else None
            result.verification = v
            tx._finish(result, st)
        result.after = dict(prev)
        if not prev:
            result.message = f"{how}; the target had no torch before and has none now."
        elif v and v.imported:
            result.message = f"{how}; nothing changed: the previous torch {v.version} still imports."
        else:
            result.message = f"{how}; nothing changed: the torch packages are exactly as before ({_fmt(prev)}), but torch does not import: {v.error if v else '?'}."
        return result
    tx.say(f"stackdoctor: {how}; {_left_words(result.after, prev, st)}: putting back the previous versions.")
    tx.put_back(result)
    result.message = f"{how}; " + _restore_sentence(result, prev)
    return result


def _left_words(after: Mapping[str, str], prev: Mapping[str, str], st: FamilyState) -> str:
    """What the install left, read from the files: the same versions as before but not the same files is said so
    (never "torch X instead of torch X")."""
    why = f" ({st.why})" if st.why else ""
    if after and dict(after) == dict(prev):
        return f"it left {_fmt(after)} incomplete{why}"
    if not after:
        return f"it left no complete torch{why} instead of {_fmt(prev) or 'no torch'}"
    return f"it left {_on_disk(after, st.state)} instead of {_fmt(prev) or 'no torch'}"


def _on_disk(family: Mapping[str, str], state: str | None) -> str:
    """The family on disk (read from its files), said to be incomplete unless it is exactly the old or the new build."""
    if not family:
        return "no torch" if state == "old" else "no complete torch"
    return _fmt(family) + ("" if state in ("old", "new") else " (incomplete)")
def externally_managed(python: str, *, refused: bool) -> str:
    """PEP 668's answer as one sentence with the exact commands: a venv, and the install into it."""
    command = f"{shlex.quote(python)} -m venv .venv && stackdoctor install --python .venv/bin/python"
    if refused:
        return f"{python} is externally managed (PEP 668): pip refuses to install into it; make a venv and install there: {command}"
    return f"{python} is externally managed (PEP 668): pip will refuse to install into it; make a venv and install there: {command}"


def _holds(prev: Mapping[str, str]) -> str:
    return f"the target has {_fmt(prev)}" if prev else "the target has no torch"


def failure_line(res: CommandResult) -> str:
    """The installer's own error line (pip ``ERROR: ...``, uv ``error: ...`` / ``×``), else how it ended.

    Its length must not decide what survives: pip names paths before it says why ("... has a file '<path>'
    trying to install outside the target directory '<path>'"), and a path is as long as the user's folders.
    So a long quoted path keeps its last three parts, then a line still over 300 characters keeps its start
    and its end."""
    for line in (res.stderr + "\n" + res.stdout).splitlines():
        s = line.strip()
        if s.startswith(("ERROR:", "error:", "×")):
            s = re.sub(r"(['\"])(/[^'\"]{60,})\1", lambda m: f"{m.group(1)}…/{'/'.join(m.group(2).rsplit('/', 3)[-3:])}{m.group(1)}", s)
            return s if len(s) <= 300 else f"{s[:150]} … {s[-147:]}"
    return res.describe_failure() or res.detail or "unknown failure"


def _restore_sentence(result: InstallResult, prev: Mapping[str, str]) -> str:
    if not prev and result.state == "old":
        return "the target had no torch before, and its partial files were removed: it has none now."
    v = result.verification
    if result.restored and result.restored_from == "backup" and v is not None and not v.imported:
        return f"the previous {_fmt(prev)} was put back exactly as it was (every file's sha256 checked), but it does not import: {v.error or '?'}."
    if result.restored and result.restored_from == "backup":
        return f"the previous {_fmt(prev)} was put back from its own files and imports."
    if result.restored:
        return f"the previous {_fmt(prev)} was reinstalled and imports."
    return (
        f"putting back the previous {_fmt(prev)} did not work (now: {_on_disk(result.after, result.state)}); "
        f"reinstall it with: pip install {' '.join(f'{k}=={v}' for k, v in prev.items())}."
        if prev
        else f"putting the target back to no torch did not work (now: {_on_disk(result.after, result.state) if result.after else 'partial files'}); run `pip uninstall torch` there."
    )


def _fmt(family: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in family.items())


def _never_raises(say: Callable[[str], None], lost: Callable[[str], None] | None = None) -> Callable[[str], None]:
    """``say`` that never raises: a closed pipe or terminal (EPIPE, EIO; rich's ``SystemExit`` on a broken pipe)
    must not stop a put-back or a commit. What could not be shown goes to ``lost`` (the journal's log)."""

    def safe(line: str) -> None:
        try:
            say(line)
        except (Exception, SystemExit):  # noqa: BLE001 - a message that cannot be shown must not change what is done
            if lost is not None:
                try:
                    lost(line)
                except Exception:  # noqa: BLE001
                    pass

    return safe


class _Say:
    """The transaction's one way to talk (:func:`_never_raises`): a line that cannot be shown is kept in ``lost`` and
    in the journal's log (``Journal.unprinted``, fsync'd), so a closed pipe never stops the transaction and the next
    run can say it."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.lost: list[str] = []
        self.journal: Journal | None = None
        self._safe = _never_raises(say, self._lose)

    def __call__(self, line: str) -> None:
        self._safe(line)

    def _lose(self, line: str) -> None:
        self.lost.append(line)
        j = self.journal
        if j is not None and os.path.isdir(j.dir):
            j.unprinted.append(line)
            j.write()


def _talker(say: Callable[[str], None] | None) -> _Say:
    return say if isinstance(say, _Say) else _Say(say or (lambda line: print(line, file=sys.stderr, flush=True)))


UNPRINTED_FILE = ".stackdoctor-unprinted.json"  # in the prefix: what an install could not print, said by the next run


def save_unprinted(prefix: str, lines: Sequence[str]) -> None:
    """Keep what could not be printed (its output was closed) for the next install into ``prefix`` to say."""
    if not prefix or not lines:
        return
    try:
        old = take_unprinted(prefix, remove=False)
        tmp = os.path.join(prefix, UNPRINTED_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"when": time.time(), "lines": [*old, *lines][-60:]}, f)
        os.replace(tmp, os.path.join(prefix, UNPRINTED_FILE))
    except OSError:
        pass


def take_unprinted(prefix: str, *, remove: bool = True) -> list[str]:
    """The lines an earlier install into ``prefix`` could not print (its ``save_unprinted``), removed once read."""
    path = os.path.join(prefix, UNPRINTED_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return []
    if remove:
        with contextlib.suppress(OSError):
            os.unlink(path)
    lines = data.get("lines") if isinstance(data, dict) else None
    return [str(x) for x in lines if isinstance(x, str)] if isinstance(lines, list) else []


def say_unprinted(prefix: str, say: Callable[[str], None]) -> None:
    """At the start of a run: what the last install into ``prefix`` could not print, said now."""
    lines = take_unprinted(prefix)
    if lines:
        say(f"stackdoctor: the last install into {prefix} could not print its last lines (its output was closed); they were:")
        for line in lines:
            say(f"  {line}")


def _stderr_writer(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
