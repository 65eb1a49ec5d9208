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

import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackdoctor._worker import worker_path
from stackdoctor.errors import ExitCode
from stackdoctor.matrix import default_index_url

if TYPE_CHECKING:  # pragma: no cover
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
    cuda_error: str | None = None
    device_name: str | None = None
    mps_available: bool | None = None
    xpu_available: bool | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    location: str | None = None


@dataclass
class Backup:
    """The torch family's installed files, hard-linked (or copied) aside before an install (``sd_backup.py save``)."""

    dir: str
    saved: dict[str, str] = field(default_factory=dict)  # name -> version backed up whole
    not_backed_up: dict[str, str] = field(default_factory=dict)  # name -> why
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


# ---------------------------------------------------------------------------- command lines (pure)


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


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
    return argv


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
    lines = [f"# torch {plan.torch_version} ({plan.variant}) chosen by stackdoctor"]
    if find_links:
        lines.append(f"--find-links {find_links}")
    elif not is_pypi(plan.index_url):
        lines.append(f"--extra-index-url {plan.index_url}")
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


# ---------------------------------------------------------------------------- leftovers (pure)


def runtime_family(name: str) -> str | None:
    """Which accelerator runtime a distribution belongs to (``None``: not a runtime package).

    Real names: CUDA 12 wheels end in ``-cu12`` (``nvidia-cuda-runtime-cu12``); CUDA 13 ones drop
    the suffix (``nvidia-cuda-runtime``, ``nvidia-cublas``) or end in ``-cu13`` (``nvidia-cudnn-cu13``),
    plus ``cuda-toolkit``; ROCm: ``rocm``, ``rocm-sdk-*``, ``pytorch-triton-rocm``; XPU: ``intel-sycl-rt``,
    ``onemkl-sycl-*``, ``pytorch-triton-xpu``. ``nvidia-ml-py`` (NVML bindings) is not a runtime.
    """
    n = canonical_name(name)
    if n.startswith("nvidia-ml-py") or n == "pynvml":
        return None
    if n.startswith("nvidia-"):
        return "cuda12" if n.endswith("-cu12") else "cuda13"
    if n in ("cuda-toolkit",):
        return "cuda13"
    if n in ("triton",):
        return "cuda"
    if n == "rocm" or n.startswith("rocm-sdk") or n in ("pytorch-triton-rocm", "triton-rocm"):
        return "rocm"
    if n in ("intel-sycl-rt", "intel-pti", "pytorch-triton-xpu", "triton-xpu", "pyzes") or n.startswith("onemkl-sycl"):
        return "xpu"
    return None


def families_needed(variant: str | None) -> set[str] | None:
    """Runtime families a variant uses; ``None`` when unknown (then nothing is called a leftover)."""
    if variant is None:
        return None
    m = re.fullmatch(r"cu(\d+)", variant)
    if m:
        major = int(m.group(1)[:2]) if len(m.group(1)) >= 3 else int(m.group(1)[:1])
        return {"cuda", "cuda12"} if major == 12 else {"cuda", "cuda13"} if major >= 13 else {"cuda"}
    if variant.startswith("rocm"):
        return {"rocm"}
    if variant == "xpu":
        return {"xpu"}
    if variant == "cpu":
        return set()
    from stackdoctor import accelerators

    acc = accelerators.for_variant(variant)  # a plug-in kind's build: the runtime families it declares
    return set(acc.runtime_families) if acc is not None and acc not in accelerators.BUILTIN else None


def predict_leftovers(installed: Mapping[str, str], variant: str | None) -> list[str]:
    """Before installing: runtime packages of another variant that the new one will not use."""
    need = families_needed(variant)
    if need is None:
        return []
    out = []
    for name in installed:
        fam = runtime_family(name)
        if fam is not None and fam not in need:
            out.append(canonical_name(name))
    return sorted(set(out))


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


def exact_leftovers(before: Snapshot, after: Snapshot) -> list[str]:
    """After installing: runtime packages the old torch pulled in that nothing installed now needs."""
    old = closure(before, TORCH_FAMILY)
    new = closure(after, TORCH_FAMILY)
    others = [n for n in after.versions if n not in new and runtime_family(n) is None and n not in old]
    needed_by_others = closure(after, others) - set(others)
    return sorted(
        n for n in old if n in after.versions and n not in new and n not in needed_by_others and runtime_family(n) is not None
    )


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
    res = system.run([python, "-I", str(worker_path("sd_verify.py"))], timeout=timeout, record=False)
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
        device_name=data.get("device_name"),
        mps_available=data.get("mps_available"),
        xpu_available=data.get("xpu_available"),
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


def backup_dir_for(snap: Snapshot) -> str:
    """A new, empty folder for a backup: in the target's prefix (the filesystem of its site-packages, so files
    can be hard-linked), else a temporary folder (then files are copied, up to the cap)."""
    name = f".stackdoctor-backup-{os.getpid()}-{time.time_ns()}"
    if snap.prefix:
        path = os.path.join(snap.prefix, name)
        try:
            os.mkdir(path, 0o700)
            return path
        except OSError:
            pass
    return tempfile.mkdtemp(prefix="stackdoctor-backup-")


def save_backup(
    system: System, python: str, names: Sequence[str], directory: str, *, copy_cap: int = BACKUP_COPY_CAP, timeout: float = 600.0
) -> Backup:
    """Back up the installed files of ``names`` into ``directory`` (in the target: ``sd_backup.py save``)."""
    start = time.monotonic()
    argv = [python, "-I", str(worker_path("sd_backup.py")), "save", directory, json.dumps(list(names)), str(int(copy_cap))]
    res = system.run(argv, timeout=timeout, record=False)
    data = _marked(res.stdout, BACKUP_MARK)
    b = Backup(directory, seconds=time.monotonic() - start)
    if data is None:
        b.error = res.describe_failure() or "the backup worker printed nothing"
        return b
    b.error = data.get("error") if isinstance(data.get("error"), str) else None
    b.saved = _str_dict(data.get("saved"))
    b.not_backed_up = _str_dict(data.get("not_backed_up"))
    b.linked, b.copied = _int(data.get("linked")), _int(data.get("copied"))
    b.linked_bytes, b.copied_bytes = _int(data.get("linked_bytes")), _int(data.get("copied_bytes"))
    return b


def restore_backup(system: System, python: str, backup: Backup, names: Sequence[str], *, timeout: float = 900.0) -> BackupRestore:
    """Remove what is installed for ``names`` and put the backed-up files back (``sd_backup.py restore``)."""
    start = time.monotonic()
    argv = [python, "-I", str(worker_path("sd_backup.py")), "restore", backup.dir, json.dumps(list(names))]
    res = system.run(argv, timeout=timeout, record=False)
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


def expected_version(plan: Plan) -> str | None:
    for p in plan.packages:
        if p.name == "torch":
            return p.requirement.split("==", 1)[1]
    return None


def judge(plan: Plan, v: Verification, accelerator: str | None) -> tuple[bool, str]:
    """(ok, sentence): did the install give the planned torch, and can it use the accelerator seen?

    ``accelerator`` is what the machine's facts show: "cuda" | "rocm" | "xpu" | "mps" | None.
    """
    if not v.imported:
        return False, f"torch does not import in the target: {v.error or 'unknown error'}"
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
    variant = plan.variant or ""
    gpu_variant = variant.startswith(("cu", "rocm", "jetson")) or variant == "xpu"
    if accelerator in ("cuda", "rocm") and gpu_variant and variant != "xpu":
        if v.cuda_available and v.cuda_ok is not False:
            return True, f"{got} and runs on {v.device_name or 'the GPU'}"
        why = v.cuda_error or (v.warnings[0] if v.warnings else "torch.cuda.is_available() is False")
        return False, f"{got}, but the GPU is not usable from it: {why}; run `stackdoctor check`"
    if accelerator == "xpu" and variant == "xpu":
        return (True, f"{got} and sees the Intel GPU") if v.xpu_available else (False, f"{got}, but torch.xpu.is_available() is False; run `stackdoctor check`")
    if accelerator == "mps":
        return (True, f"{got} and MPS is available") if v.mps_available else (False, f"{got}, but MPS is not available; run `stackdoctor check`")
    if gpu_variant:
        return True, f"{got} (no matching GPU on this machine, so the accelerator was not tried)"
    return True, got


# ---------------------------------------------------------------------------- execution


def _variant_of(version: str) -> str | None:
    return version.partition("+")[2] or None


def restore_commands(
    before: Snapshot, python: str, installer: str, index_base: str, *, find_links: str | None = None, uv: str = "uv"
) -> list[list[str]]:
    """Reinstall the recorded torch family from its own variant's index: first its files, over
    whatever a failed install left (``--force-reinstall --no-deps``), then its dependencies."""
    pins = before.pins(TORCH_FAMILY)
    if not pins:
        return []
    where: list[str] = []
    old = _variant_of(before.versions.get("torch", ""))
    if find_links:
        where += ["--find-links", find_links]
    if old:
        where += ["--index-url", f"{index_base.rstrip('/')}/{old}"]
    if installer == "uv":
        base = [uv, "pip", "install", "--python", python]
        return [[*base, "--reinstall", "--no-deps", *pins, *where], [*base, *pins, *where]]
    base = [python, "-m", "pip", "install"]
    return [[*base, "--force-reinstall", "--no-deps", *pins, *where], [*base, *pins, *where]]


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
) -> InstallResult:
    """Install ``plan`` into ``python``; on failure leave (or put back) the previous torch.

    Before the installer runs, the previous torch family's files are hard-linked aside (:func:`save_backup`;
    copied, up to ``backup_copy_cap`` bytes, where links are refused); a failure that changed the family puts
    them back first (offline, sha256-checked), and reinstalls from ``index_base`` only if that was not
    enough. The backup folder is removed on every path.

    ``source_args`` / ``env``: where the installer takes the packages from (the index check's
    :class:`~stackdoctor.availability.Delivery`); without them the plan's own index is used.
    ``index_base`` is where the previous torch is put back from (``<index_base>/<its variant>``); None: the
    matrix's ``pytorch`` index."""
    index_base = index_base or default_index_url()
    say = say or (lambda line: print(line, file=sys.stderr))
    stream = stream or _stderr_writer
    argv = install_command(plan, python, installer, find_links=find_links, uv=uv, source_args=source_args)
    argv, env = credentials_out_of_argv(argv, env, installer)
    before = snapshot(system, python)
    if not before.ok:
        return InstallResult(False, ExitCode.USAGE, f"cannot read the target's installed packages ({before.error}); nothing was changed.", argv)
    prev = before.torch_family()
    backup_dir: str | None = None
    try:
        backup: Backup | None = None
        if prev:
            try:
                backup_dir = backup_dir_for(before)
            except OSError as e:
                backup = Backup("", error=f"no folder for a backup: {e}")
            else:
                backup = save_backup(system, python, list(prev), backup_dir, copy_cap=backup_copy_cap)
        put_back = _PutBack(system, python, installer, index_base, find_links, before, stream, uv, backup)
        return _run_install(plan, argv, prev, put_back, timeout_s, remove_leftovers, accelerator, say, grace_s, env)
    finally:
        if backup_dir:
            shutil.rmtree(backup_dir, ignore_errors=True)


@dataclass
class _PutBack:
    """Everything needed to put the previous torch family back after a failed install."""

    system: System
    python: str
    installer: str
    index_base: str
    find_links: str | None
    before: Snapshot
    stream: Callable[[str], None]
    uv: str
    backup: Backup | None

    def __call__(self, result: InstallResult) -> None:
        """The backed-up files first (offline, exact); the index reinstall only if they were not enough."""
        prev = self.before.torch_family()
        b = self.backup
        if b is not None and b.saved:
            # clear what is backed up, and what was not there before (a companion the install added); a name that
            # was there but could not be backed up is left to the index reinstall
            rb = restore_backup(self.system, self.python, b, [n for n in TORCH_FAMILY if n in b.saved or n not in prev])
            after = snapshot(self.system, self.python)
            v = verify(self.system, self.python)
            result.verification = v
            result.after = after.torch_family() if after.ok else {}
            if rb.error is None and not rb.mismatch and not rb.missing and rb.restored == prev and result.after == prev and not after.family_damaged() and v.imported:
                result.restored = True
                result.restored_from = "backup"
                return
            why = (
                rb.error
                or (f"files differ from their RECORD: {', '.join(rb.mismatch[:3])}" if rb.mismatch else "")
                or (f"files not put back: {', '.join(rb.missing[:3])}" if rb.missing else "")
                or (f"not backed up: {'; '.join(f'{k} ({w})' for k, w in b.not_backed_up.items())}" if b.not_backed_up else "")
                or (f"torch does not import: {v.error}" if not v.imported else f"now: {_fmt(result.after) or 'none'}")
            )
            result.notes.append(f"putting back the saved files was not enough ({why}); reinstalling from the index.")
        elif b is not None:
            why = b.error or "; ".join(f"{k} ({w})" for k, w in b.not_backed_up.items()) or "nothing was saved"
            result.notes.append(f"there was no backup of the previous files ({why}); reinstalling from the index.")
        _restore(self.system, self.python, self.installer, self.index_base, self.find_links, self.before, result, self.stream, self.uv)
        if result.restored:
            result.restored_from = "index"


def _run_install(
    plan: Plan,
    argv: list[str],
    prev: dict[str, str],
    put_back: _PutBack,
    timeout_s: float,
    remove_leftovers: bool,
    accelerator: str | None,
    say: Callable[[str], None],
    grace_s: float,
    env: Mapping[str, str | None] | None,
) -> InstallResult:
    system, python, stream, before = put_back.system, put_back.python, put_back.stream, put_back.before
    res = system.run_streaming(argv, timeout=timeout_s, on_stdout=stream, on_stderr=stream, grace_s=grace_s, env=env)
    result = InstallResult(False, ExitCode.FAILED, "", argv, res.returncode, before=prev)
    result.interrupted = res.status == "interrupted"
    result.timed_out = res.status == "timeout"
    if res.ok and not result.interrupted:
        after = snapshot(system, python)
        v = verify(system, python)
        result.verification = v
        result.after = after.torch_family()
        ok, sentence = judge(plan, v, accelerator)
        if not v.imported and prev:
            # the new torch does not even import: put the previous one back
            say(f"stackdoctor: {sentence}; putting back the previous {_fmt(prev)}.")
            put_back(result)
            result.exit_code = ExitCode.FAILED
            result.message = sentence + "; " + _restore_sentence(result, prev)
            return result
        result.ok = ok
        result.exit_code = ExitCode.OK if ok else ExitCode.FAILED
        result.message = sentence + "."
        if after.ok:
            result.leftovers = exact_leftovers(before, after)
        if result.leftovers and remove_leftovers:
            rm = system.run_streaming(
                uninstall_command(result.leftovers, python, put_back.installer, uv=put_back.uv), timeout=600, on_stdout=stream, on_stderr=stream
            )
            if rm.ok:
                result.removed = list(result.leftovers)
                result.leftovers = []
            else:
                result.notes.append(f"removing the leftovers failed: {rm.describe_failure()}")
        return result
    # failed, interrupted or timed out
    how = (
        "the install was interrupted"
        if result.interrupted
        else f"the install did not finish in {timeout_s:g} s"
        if result.timed_out
        else f"the install failed ({failure_line(res)})"
    )
    result.exit_code = 130 if result.interrupted else ExitCode.FAILED
    after = snapshot(system, python)
    result.after = after.torch_family() if after.ok else {}
    if after.ok and result.after == prev and not after.family_damaged():
        restored = verify(system, python) if prev else None
        result.verification = restored
        if not prev:
            result.message = f"{how}; the target had no torch before and has none now."
        elif restored and restored.imported:
            result.message = f"{how}; nothing changed: the previous torch {restored.version} still imports."
        else:
            result.message = f"{how}; the torch packages are as before ({_fmt(prev)}), but torch does not import: {restored.error if restored else '?'}."
        return result
    if not prev:
        result.message = f"{how}; the target had no torch before, and now has {_fmt(result.after) or 'partial packages'}."
        return result
    damaged = after.family_damaged() if after.ok else []
    state = _fmt(result.after) or "nothing importable"
    if damaged:
        state += f" (half-installed: {', '.join(damaged)})"
    say(f"stackdoctor: {how}; it left {state} instead of {_fmt(prev)}: putting back the previous versions.")
    put_back(result)
    result.message = f"{how}; " + _restore_sentence(result, prev)
    return result


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


def _restore(
    system: System,
    python: str,
    installer: str,
    index_base: str,
    find_links: str | None,
    before: Snapshot,
    result: InstallResult,
    stream: Callable[[str], None],
    uv: str,
) -> None:
    cmds = restore_commands(before, python, installer, index_base, find_links=find_links, uv=uv)
    if not cmds:
        result.restored = False
        return
    repair = system.run([python, "-I", str(worker_path("sd_repair.py")), json.dumps(list(TORCH_FAMILY))], timeout=120, record=False)
    if not repair.ok:
        result.notes.append(f"could not clear half-installed packages: {repair.describe_failure()}")
    ok = True
    for cmd in cmds:
        res = system.run_streaming(cmd, timeout=DEFAULT_INSTALL_TIMEOUT_S, on_stdout=stream, on_stderr=stream)
        if not res.ok:
            ok = False
            result.notes.append(f"restore step failed ({failure_line(res)}): {' '.join(cmd)}")
            break
    after = snapshot(system, python)
    v = verify(system, python)
    result.verification = v
    result.after = after.torch_family() if after.ok else {}
    result.restored = ok and result.after == before.torch_family() and not after.family_damaged() and v.imported


def _restore_sentence(result: InstallResult, prev: Mapping[str, str]) -> str:
    if result.restored and result.restored_from == "backup":
        return f"the previous {_fmt(prev)} was put back from its own files and imports."
    if result.restored:
        return f"the previous {_fmt(prev)} was reinstalled and imports."
    return (
        f"putting back the previous {_fmt(prev)} did not work (now: {_fmt(result.after) or 'none'}); "
        f"reinstall it with: pip install {' '.join(f'{k}=={v}' for k, v in prev.items())}."
    )


def _fmt(family: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in family.items())


def _stderr_writer(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
