"""Standalone scripts run in a child process: inside the target interpreter (stdlib + torch only),
or, for NVML, in stackdoctor's own interpreter so that a hanging driver never hangs stackdoctor.

Nothing in the scripts may import stackdoctor: the target environment may not have it. This
``__init__`` (imported by stackdoctor only, never by the scripts) says where they are.

Run from a zip (``stackdoctor bundle``'s ``stackdoctor.pyz``) the scripts have no path another interpreter can run,
so the first one asked for copies them all out of the zip into a private folder (``$TMPDIR/stackdoctor-pkg-workers-*``,
mode 0700, marked with this process as its owner): removed when this process exits, and by the next run
(:func:`stackdoctor.system.sweep_dead_lent`) when it was killed first. The scripts are not run from the zip with
``python -m``: that would put the zip, and stackdoctor's own dependencies, on the target's ``sys.path`` beside torch.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

MARK = "@@stackdoctor@@ "  # every worker prints its answers as marked JSON lines: the parent's side of that protocol is here


def marked(stdout: str) -> list[dict]:
    """Every marked JSON object a worker printed, in order; anything else it printed is ignored."""
    out: list[dict] = []
    for line in stdout.splitlines():
        idx = line.find(MARK)
        if idx < 0:
            continue
        try:
            data = json.loads(line[idx + len(MARK) :])
        except (ValueError, RecursionError):
            continue
        if isinstance(data, dict):
            out.append(data)
    return out


def parse_sections(stdout: str) -> dict[str, dict]:
    """Marked JSON lines -> {section: data}. Anything else the target printed is ignored.

    >>> parse_sections('noise\\n@@stackdoctor@@ {"section": "python", "version": "3.11.7"}\\n')
    {'python': {'section': 'python', 'version': '3.11.7'}}
    """
    return {d["section"]: d for d in marked(stdout) if isinstance(d.get("section"), str)}


_COPIED: dict[str, Path] = {}
_LOCK = threading.Lock()  # the probes ask from several threads at once: one copy


def worker_path(name: str) -> Path:
    """The path of the worker script ``name`` (``sd_target.py``, ``sd_kernels.py``, ...)."""
    path = Path(__file__).resolve().parent / name
    if path.is_file():
        return path
    with _LOCK:
        copied = _copied_out()
    if copied is not None and (copied / name).is_file():
        return copied / name
    # a typo here is a stackdoctor bug, not a machine fact
    raise FileNotFoundError(f"stackdoctor worker {name} is missing from {path.parent}")


def _copied_out() -> Path | None:
    """The scripts copied out of the zip this package is imported from (None: not a zip)."""
    if "dir" in _COPIED:
        return _COPIED["dir"]
    here = Path(__file__).parent
    archive = next((p for p in here.parents if p.is_file()), None)
    if archive is None:
        return None
    import atexit
    import tempfile
    import zipfile

    from stackdoctor.system.lent import LENT_PREFIX, OWNER_FILE

    inside = here.relative_to(archive).as_posix() + "/"
    folder = Path(tempfile.mkdtemp(prefix=LENT_PREFIX + "workers-"))  # 0700: this user's alone
    atexit.register(remove_copied)
    (folder / OWNER_FILE).write_text(f"{os.getpid()}\n", encoding="ascii")
    with zipfile.ZipFile(archive) as z:
        for entry in z.namelist():
            rest = entry[len(inside) :]
            if entry.startswith(inside) and rest.endswith(".py") and "/" not in rest and rest != "__init__.py":
                (folder / rest).write_bytes(z.read(entry))
    _COPIED["dir"] = folder
    return folder


def remove_copied() -> None:
    """Remove the folder the scripts were copied into (the CLI leaves with ``os._exit``, which runs no ``atexit``)."""
    folder = _COPIED.pop("dir", None)
    if folder is not None:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
