"""What an install ends with: :class:`InstallResult`, and the sentences that say it — each names the torch that is
on disk, read from its files, and says when it is incomplete."""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stackdoctor.core.errors import ExitCode
from stackdoctor.core.shell import format_command

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.install.backup import FamilyState
    from stackdoctor.model.facts import Verification
    from stackdoctor.system import CommandResult


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
    set_aside: str | None = None  # the committed install's journal folder (the replaced torch's backup), removed after `done:`


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


def stopped_result(argv: list[str], prev: Mapping[str, str], why: str, env: Mapping[str, str | None] | None = None) -> InstallResult:
    r = InstallResult(False, ExitCode.FAILED, "", argv, before=dict(prev), after=dict(prev), state="old", stopped_before=True)
    carried = sorted(k for k, v in (env or {}).items() if v is not None)  # credentials travel in the environment, never shown
    r.message = (
        f"nothing was changed: {why}, so the previous torch could not be kept aside to put back; "
        f"fix that and run again, or install without a way back yourself: {' '.join(argv)}"
        + (f" (with {', '.join(carried)} set as for the index check)" if carried else "")
    )
    return r


def left_words(after: Mapping[str, str], prev: Mapping[str, str], st: FamilyState) -> str:
    """What the install left, read from the files: the same versions as before but not the same files is said so
    (never "torch X instead of torch X")."""
    why = f" ({st.why})" if st.why else ""
    if after and dict(after) == dict(prev):
        return f"it left {fmt(after)} incomplete{why}"
    if not after:
        return f"it left no complete torch{why} instead of {fmt(prev) or 'no torch'}"
    return f"it left {on_disk(after, st.state)} instead of {fmt(prev) or 'no torch'}"


def on_disk(family: Mapping[str, str], state: str | None) -> str:
    """The family on disk (read from its files), said to be incomplete unless it is exactly the old or the new build."""
    if not family:
        return "no torch" if state == "old" else "no complete torch"
    return fmt(family) + ("" if state in ("old", "new") else " (incomplete)")


def externally_managed(python: str, *, refused: bool) -> str:
    """PEP 668's answer as one sentence with the exact commands: a venv, and the install into it."""
    command = format_command([python, "-m", "venv", ".venv"], windows=os.name == "nt") + " && stackdoctor install --python .venv/bin/python"
    if refused:
        return f"{python} is externally managed (PEP 668): pip refuses to install into it; make a venv and install there: {command}"
    return f"{python} is externally managed (PEP 668): pip will refuse to install into it; make a venv and install there: {command}"


def holds(prev: Mapping[str, str]) -> str:
    return f"the target has {fmt(prev)}" if prev else "the target has no torch"


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


def restore_sentence(result: InstallResult, prev: Mapping[str, str]) -> str:
    if not prev and result.state == "old":
        return "the target had no torch before, and its partial files were removed: it has none now."
    v = result.verification
    if result.restored and result.restored_from == "backup" and v is not None and not v.imported:
        return f"the previous {fmt(prev)} was put back exactly as it was (every file's sha256 checked), but it does not import: {v.error or '?'}."
    if result.restored and result.restored_from == "backup":
        return f"the previous {fmt(prev)} was put back from its own files and imports."
    if result.restored:
        return f"the previous {fmt(prev)} was reinstalled and imports."
    return (
        f"putting back the previous {fmt(prev)} did not work (now: {on_disk(result.after, result.state)}); "
        f"reinstall it with: {format_command(['pip', 'install', *(f'{k}=={v}' for k, v in prev.items())], windows=os.name == 'nt')}."
        if prev
        else f"putting the target back to no torch did not work (now: {on_disk(result.after, result.state) if result.after else 'partial files'}); run `pip uninstall torch` there."
    )


def fmt(family: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in family.items())
