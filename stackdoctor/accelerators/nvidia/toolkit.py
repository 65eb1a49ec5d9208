"""CUDA toolkits: every ``nvcc`` reachable, with its version and the toolkit's ``version.json``.

Candidates, in the order a build would pick them: ``nvcc`` on PATH, ``$CUDA_HOME/bin/nvcc``,
``$CUDA_PATH/bin/nvcc``, ``/usr/local/cuda/bin/nvcc``, ``/usr/local/cuda-*/bin/nvcc`` (the file
paths are looked up under the sysroot). Duplicates (same real path) are kept once.

On Windows (the host says so): ``nvcc.exe`` on PATH, ``%CUDA_HOME%`` and ``%CUDA_PATH%\\bin\\nvcc.exe``,
then each ``%CUDA_PATH_Vx_y%`` the CUDA installer sets per version, then every
``%ProgramFiles%\\NVIDIA GPU Computing Toolkit\\CUDA\\v*`` (the installer's default folder); paths are
Windows paths (``C:\\...``), read under the sysroot as ``<root>/C/...``.
``nvcc_version`` / ``nvcc_path`` are those of the first candidate that answered (PATH first,
then CUDA_HOME), i.e. what ``torch.utils.cpp_extension`` would use.
"""

from __future__ import annotations

import json
import ntpath
import os
import posixpath
import re
from typing import Any

from stackdoctor.model.facts import CudaToolkit, CudaToolkitFacts
from stackdoctor.model.probing import ProbeContext, ProbeOutput
from stackdoctor.system import CommandResult, System

__all__ = ["parse_nvcc_version", "parse_version_json", "probe"]

_RELEASE = re.compile(r"release\s+(\d+)\.(\d+),\s*(V[\d.]+)")
_BUILD = re.compile(r"Build\s+cuda_(\d+)\.(\d+)")


def parse_nvcc_version(text: str) -> tuple[str | None, str | None]:
    """``nvcc --version`` -> (release ``"13.0"``, build ``"V13.0.88"``); (None, None) when absent.

    Real sample (captured on the project's build machine, tests/fixtures/real/local-nvcc-13.0-linux)::

        nvcc: NVIDIA (R) Cuda compiler driver
        Copyright (c) 2005-2025 NVIDIA Corporation
        Built on Wed_Aug_20_01:58:59_PM_PDT_2025
        Cuda compilation tools, release 13.0, V13.0.88
        Build cuda_13.0.r13.0/compiler.36424714_0

    Falls back to the ``Build cuda_X.Y`` line when the release line is missing.
    """
    if not isinstance(text, str):
        return None, None
    m = _RELEASE.search(text)
    if m:
        return f"{int(m.group(1))}.{int(m.group(2))}", m.group(3)
    b = _BUILD.search(text)
    if b:
        return f"{int(b.group(1))}.{int(b.group(2))}", None
    return None, None


def parse_version_json(text: str) -> str | None:
    """A toolkit's ``version.json`` -> the full CUDA version, e.g. ``{"cuda": {"name": "CUDA SDK", "version": "13.0.2"}}`` -> ``"13.0.2"``."""
    try:
        doc: Any = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return None
    if isinstance(doc, dict) and isinstance(doc.get("cuda"), dict):
        v = doc["cuda"].get("version")
        if isinstance(v, str) and re.fullmatch(r"\d+(?:\.\d+)*", v.strip()):
            return v.strip()
    return None


_CUDA_PATH_V = re.compile(r"^CUDA_PATH_V(\d+)_(\d+)$", re.IGNORECASE)
WINDOWS_TOOLKITS = "NVIDIA GPU Computing Toolkit\\CUDA"  # under %ProgramFiles%: the CUDA installer's default


def _windows_candidates(system: System) -> list[tuple[str, System, str]]:
    """Windows toolkits: %CUDA_HOME%, %CUDA_PATH%, each %CUDA_PATH_Vx_y%, then the default folders."""
    out: list[tuple[str, System, str]] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = system.getenv(var)
        if root:
            out.append((ntpath.join(root, "bin", "nvcc.exe"), system, var))
    versioned = sorted(
        ((int(m.group(1)), int(m.group(2)), k, v) for k, v in system.env.items() if (m := _CUDA_PATH_V.match(k)) and v),
        reverse=True,
    )
    for _, _, var, root in versioned:
        out.append((ntpath.join(root, "bin", "nvcc.exe"), system, var.upper()))
    base = ntpath.join(system.getenv("ProgramFiles") or "C:\\Program Files", WINDOWS_TOOLKITS)
    for entry in sorted(system.listdir(base), reverse=True):
        if entry.lower().startswith("v"):
            out.append((ntpath.join(base, entry, "bin", "nvcc.exe"), system, "%ProgramFiles%\\" + WINDOWS_TOOLKITS))
    return out


def _candidates(ctx: ProbeContext) -> list[tuple[str, System, str]]:
    """(path, the System that reads it, found_via) in build-preference order.

    A tool found on PATH is a live file (PATH is never under the sysroot); the toolkit folders are
    the machine's (``/usr/local/cuda*``, ``CUDA_HOME``), read through the sysroot."""
    system = ctx.system
    out: list[tuple[str, System, str]] = []
    on_path = system.which("nvcc")
    if on_path:
        out.append((on_path, system.local, "PATH"))
    if system.windows:
        return out + _windows_candidates(system)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = system.env.get(var)
        if root:
            p = root.rstrip("/\\") + "/bin/nvcc"
            if not system.exists(p) and system.exists(p + ".exe"):  # Windows: %CUDA_PATH%\bin\nvcc.exe
                p += ".exe"
            out.append((p, system, var))
    out.append(("/usr/local/cuda/bin/nvcc", system, "/usr/local/cuda*"))
    for entry in system.listdir("/usr/local"):
        if entry.startswith("cuda-"):
            out.append((f"/usr/local/{entry}/bin/nvcc", system, "/usr/local/cuda*"))
    return out


_SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "zsh"})
_EXEC_LINE = re.compile(r"""^exec\s+(?:"(/[^"$`\\]+)"|'(/[^']+)'|(/[^\s"'$`\\;|&<>()]+))\s+"\$@"$""")


def wrapped_program(fs: System, path: str) -> str | None:
    """The program a one-line shell wrapper runs: a script whose only command is ``exec /abs/nvcc "$@"`` (the
    ``/usr/local/bin/nvcc`` of some CUDA images); None for anything else (a binary, a script doing more)."""
    res = fs.read_text(path, max_bytes=4096)
    if not res.ok or not res.text.startswith("#!"):
        return None
    lines = res.text.splitlines()
    shebang = lines[0][2:].split()
    if shebang and posixpath.basename(shebang[0]) == "env":
        shebang = shebang[1:]
    if not shebang or posixpath.basename(shebang[0]) not in _SHELLS:
        return None
    body = [ln.strip() for ln in lines[1:] if ln.strip() and not ln.strip().startswith("#")]
    m = _EXEC_LINE.match(body[0]) if len(body) == 1 else None
    return next(g for g in m.groups() if g) if m else None


def _version_json(system: System, fs: System, shown: str, key: str) -> str | None:
    """The toolkit's ``version.json``: in its root, one level above bin/ (of the path as found, then of the real file)."""
    osp = system.ospath if fs is system else os.path
    roots = [osp.dirname(osp.dirname(shown))]
    if not system.moved:
        roots.append(os.path.dirname(os.path.dirname(key)))
    found = None
    for root in dict.fromkeys(roots):
        vj = system.read_text(osp.join(root, "version.json"))
        found = parse_version_json(vj.text) if vj.ok else None
        if found:
            break
    return found


def probe(ctx: ProbeContext) -> ProbeOutput:
    """Every reachable nvcc with its version; never raises. No nvcc is a plain fact (status ok)."""
    system = ctx.system
    facts = CudaToolkitFacts()
    home = system.getenv("CUDA_HOME") or system.getenv("CUDA_PATH")
    if home:
        facts.cuda_home = home
        facts.sources["cuda_home"] = "env:CUDA_HOME" if system.getenv("CUDA_HOME") else "env:CUDA_PATH"
    seen: set[str] = set()
    answered: dict[str, CommandResult] = {}  # real program -> its answer: a wrapper and the nvcc it runs are asked once
    timeouts: list[str] = []
    for shown, fs, via in _candidates(ctx):
        if not fs.is_file(shown):
            continue
        key = fs.realpath(shown)
        if key in seen:
            continue
        seen.add(key)
        program = wrapped_program(fs, shown)
        runs = fs.realpath(program) if program else key
        res = answered.get(runs) or system.run([str(fs.path(shown)), "--version"], timeout=ctx.timeout_s)
        if res.ok:
            answered.setdefault(runs, res)
        version, build = parse_nvcc_version(res.stdout)
        tk = CudaToolkit(path=shown, nvcc_version=version, nvcc_build=build, found_via=via)
        if res.status == "timeout":
            timeouts.append(f"{shown} did not answer in {res.detail or ctx.timeout_s} s")
        tk.version_json = _version_json(system, fs, shown, key)
        facts.toolkits.append(tk)
        if facts.nvcc_version is None and version is not None and via in ("PATH", "CUDA_HOME", "CUDA_PATH"):
            facts.nvcc_version, facts.nvcc_path = version, shown
            facts.sources["nvcc_version"] = f"{shown} --version ({via})"
            facts.sources["nvcc_path"] = via
    if facts.nvcc_version is None:
        # nothing on PATH / CUDA_HOME answered: the default /usr/local/cuda is what build tools fall back to
        for tk in facts.toolkits:
            if tk.nvcc_version is not None:
                facts.nvcc_version, facts.nvcc_path = tk.nvcc_version, tk.path
                facts.sources["nvcc_version"] = f"{tk.path} --version ({tk.found_via})"
                facts.sources["nvcc_path"] = tk.found_via or ""
                break
    status = "timeout" if timeouts else "ok"
    return ProbeOutput(facts={"cuda_toolkit": facts}, status=status, error="; ".join(timeouts) or None)
