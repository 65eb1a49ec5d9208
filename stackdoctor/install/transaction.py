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
import os
import re
import shlex
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stackdoctor.errors import ExitCode
from stackdoctor.install.argv import installer_argv, planned_versions, restore_commands, uninstall_command
from stackdoctor.install.backup import (
    BACKUP_COPY_CAP,
    FamilyState,
    Snapshot,
    restore_backup,
    save_backup,
    snapshot,
    sweep_pip_stash,
)
from stackdoctor.install.backup import family_state as family_state
from stackdoctor.install.journal import EXIT_FOR, Interrupted, Journal, Locked, Signals, env_lock, hook, read_journal, signal_name, signals
from stackdoctor.install.leftovers import TORCH_FAMILY, leftovers, predict_leftovers
from stackdoctor.install.talk import Say, save_unprinted, say_unprinted, stderr_writer, talker
from stackdoctor.install.verify import Verification, check_gpu_code, judge, reads_gpu_code, verify

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.facts import Facts, GpuView
    from stackdoctor.plan import Plan
    from stackdoctor.system import CommandResult, System


DEFAULT_INSTALL_TIMEOUT_S = 3600.0



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
    stream = stream or stderr_writer
    talk = talker(say)
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
    2. write the journal (:class:`~stackdoctor.install.journal.Journal`), then back up every RECORD file of the family
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
    talk = talker(say)  # a closed terminal (SIGHUP) or pipe (EPIPE) must not stop a put-back
    say = talk
    steps = Steps(talk, show=progress or verbose, verbose=verbose)
    stream = stream or stderr_writer
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



def _told(result: InstallResult, talk: Say, prefix: str) -> InstallResult:
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
    talk = talker(say)
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
    if isinstance(say, Say):
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
            if v.imported and reads_gpu_code(plan, gpu_targets):
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
