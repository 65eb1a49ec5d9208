"""Execute an install plan in the target interpreter, verify it, and never leave it without torch.

One class, :class:`Transaction` (as pip's ``StashedUninstallPathSet`` is one class): ``Transaction(system, target,
settings).run(argv)`` installs, ``.recover()`` finishes an install that was killed; both return an
:class:`~stackdoctor.install.result.InstallResult`. The argv comes from :mod:`stackdoctor.install.argv` (the one
place that builds an installer's command line, the last-resort reinstall's too); :func:`execute` is the plan's argv
run as one transaction.

Steps (all subprocesses through :class:`~stackdoctor.system.System`, one that on Linux gives each of them the
parent-death signal: :meth:`~stackdoctor.system.System.dying_with_parent`):

1. snapshot the target's torch family and runtime packages (``importlib.metadata`` in the
   target, no import of torch), and hard-link the family's installed files aside (``sd_backup.py``,
   into the journal's ``backup/``, removed again on every path);
2. run ``<python> -m pip install ...`` or ``uv pip install --python <python> ...``, streaming
   its output to stderr while capturing it; Ctrl-C / the time-out reach the installer as
   SIGINT (:meth:`System.run_streaming`) so pip can roll back its own uninstall;
3. on failure or interruption, judge the family from its files: if it changed, put the backed-up files back
   (offline, sha256-checked), and reinstall the recorded versions from their index only if that is incomplete;
4. on success, import torch in the target and check the version, the variant and the
   accelerator; list the previous variant's runtime packages left behind and remove them
   only when asked.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackdoctor.core.errors import ExitCode
from stackdoctor.core.shell import format_command
from stackdoctor.install.argv import installer_argv, planned_versions, restore_commands, uninstall_command
from stackdoctor.install.backup import BACKUP_COPY_CAP, FamilyState, Snapshot, family_state, restore_backup, save_backup, snapshot, sweep_pip_stash
from stackdoctor.install.journal import (
    EXIT_FOR,
    Interrupted,
    Journal,
    Locked,
    Signals,
    dispose_aside,
    env_lock,
    hook,
    read_journal,
    release_signals,
    signal_name,
    signals,
    sweep_aside,
    swept_words,
)
from stackdoctor.install.result import (
    InstallResult,
    Steps,
    externally_managed,
    failure_line,
    fmt,
    holds,
    left_words,
    restore_sentence,
    stopped_result,
)
from stackdoctor.install.talk import Say, save_unprinted, say_unprinted, stderr_writer, talker
from stackdoctor.install.verify import check_gpu_code, judge, reads_gpu_code, verify, what_check_says
from stackdoctor.wheels.leftovers import TORCH_FAMILY, leftovers, predict_leftovers

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.model.facts import Facts, GpuView, Verification
    from stackdoctor.model.plan import Plan
    from stackdoctor.system import CommandResult, System

DEFAULT_INSTALL_TIMEOUT_S = 3600.0
STRAY_INTERRUPT_S = 15.0  # how long a stopped install's installer gets to clean up after SIGINT (pip rolls back its uninstall)
STRAY_KILL_S = 5.0

__all__ = [
    "DEFAULT_INSTALL_TIMEOUT_S", "InstallResult", "InstallSettings", "Target", "Transaction", "execute", "execute_recovery",
    "externally_managed", "failure_line", "stop_stray_installer",
]


@dataclass(frozen=True)
class InstallSettings:
    """How an install runs: everything but the machine, the target and the argv.

    ``find_links`` / ``source_args`` / ``env`` / ``reinstall``: where the installer takes the new packages from (the
    index check's :class:`~stackdoctor.resolve.availability.Delivery`), for :func:`stackdoctor.install.argv.installer_argv`.
    ``offline`` / ``user_find_links``: where a last-resort reinstall of the previous build may come from (never an
    index given for the new one). ``gpu_targets``: the machine's GPUs; for a CUDA / ROCm build the GPU code of the
    installed binaries is read before the commit (:func:`~stackdoctor.install.verify.check_gpu_code`).
    ``progress``: say each step after the installer before it starts (:class:`Steps`); ``verbose``: and its time."""

    installer: str = "pip"
    uv: str = "uv"
    find_links: str | None = None
    source_args: Sequence[str] | None = None
    env: Mapping[str, str | None] | None = None
    reinstall: bool = False
    timeout_s: float = DEFAULT_INSTALL_TIMEOUT_S
    grace_s: float = 30.0
    remove_leftovers: bool = False
    accelerator: str | None = None
    gpu_targets: Sequence[GpuView] = ()
    facts: Facts | None = None
    backup_copy_cap: int = BACKUP_COPY_CAP
    offline: bool = False
    user_find_links: Sequence[str] = ()
    say: Callable[[str], None] | None = None
    stream: Callable[[str], None] | None = None
    progress: bool = False
    verbose: bool = False
    keep_aside: bool = False  # the caller removes the replaced torch's backup after it printed `done:` (InstallResult.set_aside)


@dataclass(frozen=True)
class Target:
    """Where the install goes (the interpreter) and what it installs (None for a recovery)."""

    python: str
    plan: Plan | None = None


class Transaction:
    """One install into one target as a transaction: the target holds exactly its previous torch family or exactly
    the new one, whatever happens (a failure, Ctrl-C, SIGTERM, SIGHUP, a full disk; after SIGKILL or a power loss,
    the next install or ``--recover`` finishes it from the journal).

    :meth:`run`: lock the environment; finish an earlier install's journal if one is there; write the journal
    (:class:`~stackdoctor.install.journal.Journal`), then back up every RECORD file of the family (hard links) —
    if the backup cannot be complete, stop there: nothing is changed; run the installer (its own session: a
    terminal's Ctrl-C reaches only stackdoctor, which stops it); judge the family from its files
    (:func:`~stackdoctor.install.backup.family_state`): exactly the new build, complete per RECORD and importing
    (and for a GPU build, code that runs on this machine's GPUs): done; exactly the old files: nothing changed;
    anything else, or an interrupt: put the old files back (every hash checked), then the import; only if that
    fails, reinstall the exact previous build from the user's own sources."""

    def __init__(self, system: System, target: Target, settings: InstallSettings | None = None) -> None:
        # every child of the transaction (the installer, the snapshot / backup / verify workers, a reinstall, the
        # leftovers' removal) dies with stackdoctor on Linux: none outlives a SIGKILL of this process alone
        self.system = system.dying_with_parent()
        self.python = target.python
        self.plan = target.plan
        self.settings = settings or InstallSettings()
        self.say: Say = talker(self.settings.say)  # a closed terminal (SIGHUP) or pipe (EPIPE) must not stop a put-back
        self.stream = self.settings.stream or stderr_writer
        self.steps = Steps(self.say, show=self.settings.progress or self.settings.verbose, verbose=self.settings.verbose)
        self.journal: Journal | None = None
        self.sig = Signals()
        self._phase = "journal"  # how far the install got: journal | backup | install | verify

    # ------------------------------------------------------------------ the two ways in

    def run(self, argv: Sequence[str], env: Mapping[str, str | None] | None = None) -> InstallResult:
        """Install with ``argv`` (and the installer's environment ``env``: credentials travel there)."""
        argv = list(argv)
        before = snapshot(self.system, self.python)
        if not before.ok:
            return InstallResult(False, ExitCode.USAGE, f"cannot read the target's installed packages ({before.error}); nothing was changed.", argv)
        prefix = before.prefix or ""
        if not prefix or not os.path.isdir(prefix):
            return InstallResult(False, ExitCode.FAILED, f"the target did not say where its environment is (sys.prefix {prefix!r}); nothing was changed.", argv)
        try:
            with env_lock(prefix), signals(self.say) as self.sig:
                say_unprinted(prefix, self.say)
                notes: list[str] = swept_words(sweep_aside(prefix))
                earlier = read_journal(prefix)
                if earlier is not None and earlier.owner_alive():  # no lock to hold (Windows), but its owner runs
                    raise Locked(earlier.pid, earlier.phase)
                if earlier is not None:
                    stray = stop_stray_installer(earlier, self.say)
                    if stray is not None:
                        stray.command = argv
                        return stray
                    rec = self._finish_earlier(earlier)
                    if rec.journal_kept:
                        return rec
                    notes.append(rec.message)
                    before = snapshot(self.system, self.python)
                    if not before.ok:
                        return InstallResult(False, ExitCode.FAILED, f"cannot read the target's installed packages ({before.error}).", argv, notes=notes)
                result = self._install(argv, env, before, prefix)
                result.notes[:0] = notes
        except Locked as exc:
            return InstallResult(False, ExitCode.USAGE, f"{_live_words(exc, prefix)}; nothing was changed: run this again when it has finished.", argv)
        if self.sig.committed:
            hook("committed")  # tests: a signal right after the commit point
        if result.ok and result.state == "new":
            predicted = (self.plan.leftovers if self.plan else None) or predict_leftovers(before.versions, self.plan.variant if self.plan else None)
            with self.steps.step("leftovers", "stackdoctor: looking for the previous variant's packages left behind..."):
                self._remove_leftovers(result, predicted)
        if not self.settings.keep_aside:  # else the caller removes the backup after `done:`, then gives the signals back
            if result.set_aside:
                with self.steps.step("backup-removal", "stackdoctor: removing the backup of the replaced torch..."):
                    dispose_aside(result.set_aside)
                result.set_aside = None
            release_signals()
        self.steps.told()
        return self._told(result, prefix)

    def recover(self) -> InstallResult:
        """``install --recover`` (and the start of every install): finish a killed install's journal, under the lock."""
        before = snapshot(self.system, self.python)
        if not before.ok or not before.prefix:
            return InstallResult(False, ExitCode.FAILED, f"cannot read the target's installed packages ({before.error or 'no sys.prefix'}).")
        prefix = before.prefix
        try:
            with env_lock(prefix), signals(self.say) as self.sig:
                say_unprinted(prefix, self.say)
                swept = sweep_aside(prefix)
                journal = read_journal(prefix)
                if journal is None:
                    family = before.torch_family()
                    if swept:  # a committed install's backup it had no time to remove: not "nothing to do"
                        return InstallResult(True, ExitCode.OK, f"no unfinished install in {prefix}; {swept_words(swept)[0]}", before=family, after=family)
                    return InstallResult(True, ExitCode.OK, f"no unfinished install in {prefix}: nothing to do.", before=family, after=family)
                if journal.owner_alive():
                    raise Locked(journal.pid, journal.phase)
                stray = stop_stray_installer(journal, self.say)
                if stray is not None:
                    return stray
                return self._told(self._finish_earlier(journal), prefix)
        except Locked as exc:
            return InstallResult(
                False, ExitCode.USAGE, f"{_live_words(exc, prefix)}; it is not stopped, so there is nothing to recover: run this again when it has finished."
            )

    # ------------------------------------------------------------------ the journal, the family, putting back

    @property
    def _journal(self) -> Journal:
        assert self.journal is not None, "the transaction has no journal yet"
        return self.journal

    def _use(self, journal: Journal) -> None:
        self.journal = journal
        self.say.journal = journal  # from now on a line that cannot be shown is in the journal's log

    def state(self) -> FamilyState:
        return family_state(self.system, self.python, self._journal.backup, self._journal.planned)

    def commit(self, st: FamilyState, result: InstallResult | None = None) -> str | None:
        """The family is exactly old or exactly new: drop pip's stash folders (beside the packages, and in the
        temporary folder: :func:`sweep_pip_stash`), the backup and the journal. With ``result`` (the new build's
        commit) the journal folder is only renamed aside (``result.set_aside``): its removal comes after `done:`."""
        for p in st.stash:
            shutil.rmtree(p, ignore_errors=True)
        sweep_pip_stash(self._journal.backup, self.system.env.get("TMPDIR") or None)
        if result is None:
            return self._journal.remove()
        result.set_aside, err = self._journal.set_aside()
        return err

    def put_back(self, result: InstallResult) -> None:
        """The saved files back (offline, every hash checked), then the import; the reinstall of the exact
        previous build only if that was not enough. Shielded: signals are remembered, not obeyed."""
        journal = self._journal
        prev = journal.before
        with self.sig.shielded():
            journal.write("restore")
            hook("restore")
            rb = restore_backup(self.system, self.python, journal.backup, TORCH_FAMILY, journal.planned)
            st = self.state()
            result.state = st.state
            result.after = {k: v for k, v in st.now.items() if v != "twice"}
            result.verification = verify(self.system, self.python) if prev else None
            if rb.error is None and not rb.mismatch and not rb.missing and st.state == "old":
                result.restored, result.restored_from = True, "backup"
                self._finish(result, st)
                return
            why = (
                rb.error
                or (f"files differ from their RECORD: {', '.join(rb.mismatch[:3])}" if rb.mismatch else "")
                or (f"files not put back: {', '.join(rb.missing[:3])}" if rb.missing else "")
                or st.why
            )
            self._reinstall_previous(result, why)

    def _reinstall_previous(self, result: InstallResult, why: str) -> None:
        """The last resort: the exact previous build from the user's own sources (:func:`restore_commands`)."""
        prev = self._journal.before
        s = self.settings
        installer = self._journal.installer or s.installer
        cmds = restore_commands(prev, self.python, installer, offline=s.offline, find_links=s.user_find_links, uv=s.uv)
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
                on_start=self._journal.started_installer,
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
            result.notes.append(f"the install journal {self._journal.dir} could not be removed ({err}); remove it by hand.")

    def _keep(self, result: InstallResult) -> None:
        result.journal_kept = self._journal.dir
        result.notes.append(
            f"the previous files are kept in {self._journal.backup}; run `{format_command(['stackdoctor', 'install', '--python', self.python, '--recover'], windows=os.name == 'nt')}` to try again."
        )

    def _told(self, result: InstallResult, prefix: str) -> InstallResult:
        """The result, with what could not be printed on the way kept for the next run (and its final sentence too:
        an output that was closed during the install will not show it)."""
        result.prefix = prefix
        result.unprinted = list(self.say.lost)
        if self.say.lost:
            save_unprinted(prefix, [*self.say.lost, result.message, *result.notes])
        return result

    # ------------------------------------------------------------------ an earlier install that was killed

    def _finish_earlier(self, journal: Journal) -> InstallResult:
        """Finish an install that was killed (its journal is there): keep a complete, importing new build, else put
        the previous one back. The result's message says what the environment holds now."""
        if journal.unprinted:
            self.say("stackdoctor: the stopped install could not print its last lines (its output was closed); they were:")
            for line in journal.unprinted:
                self.say(f"  {line}")
            journal.unprinted = []
        self._use(journal)
        journal.python = journal.python or self.python
        prev = journal.before
        result = InstallResult(False, ExitCode.FAILED, "", list(journal.command), before=dict(prev))
        with self.sig.shielded():
            if self._settled_earlier(journal, result):
                return result
            st = self.state()
            result.state = st.state
            if st.state in ("old", "new") and self._keep_earlier(journal, st, result):
                return result
            self.say(f"stackdoctor: an earlier install into {journal.prefix} was stopped halfway ({st.why or 'the new build does not import'}); "
                     f"putting back {fmt(prev) or 'the state before it'}.")
        self.put_back(result)
        result.ok = bool(result.restored) or (not prev and result.state == "old")
        result.exit_code = ExitCode.OK if result.ok else ExitCode.FAILED
        result.message = "an earlier install was stopped halfway; " + restore_sentence(result, prev)
        return result

    def _settled_earlier(self, journal: Journal, result: InstallResult) -> bool:
        """Stopped before it changed anything (during the backup): only its journal goes."""
        if journal.phase != "backup" and os.path.exists(os.path.join(journal.backup, "manifest.json")):
            return False
        err = journal.remove()
        result.ok, result.exit_code, result.state = err is None, ExitCode.OK if err is None else ExitCode.FAILED, "old"
        result.message = "an earlier install was stopped before it changed anything; its journal was removed" + (f" ({err})" if err else "") + "."
        return True

    def _keep_earlier(self, journal: Journal, st: FamilyState, result: InstallResult) -> bool:
        """The family is exactly the old one, or exactly the new one and it imports: kept as it is."""
        if st.state == "old":
            self._finish(result, st)
            result.ok, result.exit_code, result.after = True, ExitCode.OK, dict(journal.before)
            result.message = f"an earlier install was stopped before it changed the torch family; {holds(journal.before)} as before."
            return True
        v = verify(self.system, self.python)
        result.verification = v
        if not v.imported:
            return False
        self._finish(result, st)
        result.ok, result.exit_code, result.after = True, ExitCode.OK, dict(journal.planned)
        result.message = (f"an earlier install had finished before it was stopped: {fmt(journal.planned)} is complete "
                          "(every file's sha256 checked) and imports; it was kept.")
        return True

    # ------------------------------------------------------------------ the install itself

    def _install(self, argv: list[str], env: Mapping[str, str | None] | None, before: Snapshot, prefix: str) -> InstallResult:
        plan = self.plan
        assert plan is not None, "an install needs a plan (Target.plan)"
        prev = before.torch_family()
        journal = Journal(prefix=prefix, python=self.python, before=dict(prev), planned=planned_versions(plan), command=list(argv),
                          installer=self.settings.installer)
        self._use(journal)
        result = InstallResult(False, ExitCode.FAILED, "", argv, before=dict(prev))
        self._phase = "journal"
        try:
            stopped = self._back_up(result, argv, env)
            if stopped is not None:
                return stopped
            res = self._run_installer(argv, env, result)
            journal.write("verify")
            hook("verify")
            early = _EarlyImport(self.system, self.python) if res.ok else None  # beside the RECORD check, not after it
            with self.steps.step("record", "stackdoctor: checking the installed files against their RECORD..."):
                st = self.state()
            result.state = st.state
            result.after = {k: v for k, v in st.now.items() if v != "twice"}
            if st.state == "new":
                return self._judge_new(result, st, early)
            return self._not_installed(res, result, st)
        except Interrupted as exc:
            return self._interrupted(exc, result)

    def _back_up(self, result: InstallResult, argv: list[str], env: Mapping[str, str | None] | None) -> InstallResult | None:
        """The journal, then the backup of the family: None when both are written, else the result that stops here."""
        journal = self._journal
        prev = journal.before
        try:
            journal.create()
        except OSError as e:
            journal.remove()
            return stopped_result(argv, prev, f"the install journal could not be written in {journal.dir} ({e.strerror or e})", env)
        self._phase = "backup"
        hook("backup")
        b = save_backup(self.system, self.python, list(TORCH_FAMILY), journal.backup, copy_cap=self.settings.backup_copy_cap)
        if b.error:
            with self.sig.shielded():
                journal.remove()
            return stopped_result(argv, prev, f"the backup failed ({b.error})", env)
        if b.missing:
            result.notes.append(f"the previous {', '.join(f'{n} ({k} files already missing)' for n, k in b.missing.items())} was backed up as it is.")
        return None

    def _run_installer(self, argv: list[str], env: Mapping[str, str | None] | None, result: InstallResult) -> CommandResult:
        self._journal.write("install")
        self._phase = "install"
        hook("install")
        s = self.settings
        res = self.system.run_streaming(
            argv, timeout=s.timeout_s, on_stdout=self.stream, on_stderr=self.stream, grace_s=s.grace_s, env=env,
            on_start=self._journal.started_installer,
        )
        result.returncode = res.returncode
        self._phase = "verify"
        if res.status == "interrupted":
            raise Interrupted(self.sig.received or int(signal.SIGINT))
        return res

    def _judge_new(self, result: InstallResult, st: FamilyState, early: _EarlyImport | None = None) -> InstallResult:
        """Exactly the new build is on disk: import it, judge it (and its GPU code), then commit or put back."""
        plan = self.plan
        assert plan is not None
        prev = self._journal.before
        hook("import")
        with self.steps.step("import", "stackdoctor: importing torch in the target..."):
            v = early.result() if early is not None else verify(self.system, self.python)
        result.verification = v
        ok, sentence = judge(plan, v, self.settings.accelerator, self.settings.facts)
        if ok:
            result.notes.extend(what_check_says(v, self.settings.facts))  # torch-numpy-missing ...: as the next check says it
        gpu = None
        if v.imported and reads_gpu_code(plan, self.settings.gpu_targets):
            with self.steps.step("gpu-code", "stackdoctor: reading the GPU code of the installed binaries..."):
                gpu = check_gpu_code(plan, v, self.settings.gpu_targets, self.system)
        if gpu is not None:
            result.gpu_code = gpu.data
            if gpu.cannot_run:  # binaries that cannot run on this machine's GPU: not done, put back as a failed verdict
                self.say(f"stackdoctor: {gpu.sentence}; " + (f"putting back the previous {fmt(prev)}." if prev else "removing it (the target had no torch before)."))
                self.put_back(result)
                result.ok, result.exit_code = False, ExitCode.FAILED
                result.message = gpu.sentence + "; " + restore_sentence(result, prev)
                return result
            result.notes.append(gpu.sentence + ".")
        if v.imported or not prev:
            return self._commit_new(result, st, ok, sentence)
        self.say(f"stackdoctor: {sentence}; putting back the previous {fmt(prev)}.")
        self.put_back(result)
        result.message = sentence + "; " + restore_sentence(result, prev)
        return result

    def _commit_new(self, result: InstallResult, st: FamilyState, ok: bool, sentence: str) -> InstallResult:
        hook("commit")
        if self.sig.received is not None:  # arrived while the import was checked: the user asked to stop
            raise Interrupted(self.sig.received)
        with self.sig.shielded(), self.steps.step("commit", "stackdoctor: committing the new build..."):
            err = self.commit(st, result)
            self.sig.commit_point()  # from here a signal is noted, never obeyed: the install succeeded
        if err:
            result.notes.append(f"the install journal {self._journal.dir} could not be removed ({err}); remove it by hand.")
        result.ok = ok
        result.exit_code = ExitCode.OK if ok else ExitCode.FAILED
        result.message = sentence + "."
        if self.sig.received is not None:  # arrived during the commit, which a signal never cuts short
            result.interrupted = True
            result.signal = signal_name(self.sig.received)
            result.exit_code = EXIT_FOR.get(self.sig.received, 130)
            result.message = f"the interrupt came while the new build was being committed, so it stays: {sentence}."
        return result

    def _not_installed(self, res: CommandResult, result: InstallResult, st: FamilyState) -> InstallResult:
        """The installer failed, timed out, or ended with something else than exactly the new build."""
        if res.status == "timeout":
            how = f"the install did not finish in {self.settings.timeout_s:g} s"
        elif not res.ok:
            how = f"the install failed ({failure_line(res)})"
        else:
            how = f"the install ended, but left {fmt(result.after) or 'no torch'} ({st.why})"
        if not res.ok and "externally-managed-environment" in (res.stdout or "") + (res.stderr or ""):
            result.notes.append(externally_managed(self.python, refused=True))  # PEP 668: what to do instead, as a command
        return self._undo(result, st, how)

    def _interrupted(self, exc: Interrupted, result: InstallResult) -> InstallResult:
        signum = self.sig.received or exc.signum
        prev = self._journal.before
        result.interrupted = True
        result.signal = signal_name(signum)
        result.exit_code = EXIT_FOR.get(signum, 130)
        how = "the install was interrupted" if signum == signal.SIGINT else f"the install was stopped by {result.signal}"
        if self._phase in ("journal", "backup"):
            with self.sig.shielded():
                err = self._journal.remove()
            result.state, result.after, result.stopped_before = "old", dict(prev), True
            result.message = f"{how} before anything was changed; {holds(prev)} as before." + (f" ({err})" if err else "")
            return result
        with self.sig.shielded():
            st = self.state()
        result.state = st.state
        result.after = {k: v for k, v in st.now.items() if v != "twice"}
        code = result.exit_code
        self._undo(result, st, how)
        result.exit_code = code
        return result

    def _undo(self, result: InstallResult, st: FamilyState, how: str) -> InstallResult:
        """After a failed or interrupted install: commit an untouched family as it is, else put the old files back."""
        prev = self._journal.before
        if result.exit_code == ExitCode.OK:
            result.exit_code = ExitCode.FAILED
        if st.state == "old":
            with self.sig.shielded():
                v = verify(self.system, self.python) if prev else None
                result.verification = v
                self._finish(result, st)
            result.after = dict(prev)
            if not prev:
                result.message = f"{how}; the target had no torch before and has none now."
            elif v and v.imported:
                result.message = f"{how}; nothing changed: the previous torch {v.version} still imports."
            else:
                result.message = f"{how}; nothing changed: the torch packages are exactly as before ({fmt(prev)}), but torch does not import: {v.error if v else '?'}."
            return result
        self.say(f"stackdoctor: {how}; {left_words(result.after, prev, st)}: putting back the previous versions.")
        self.put_back(result)
        result.message = f"{how}; " + restore_sentence(result, prev)
        return result

    def _remove_leftovers(self, result: InstallResult, predicted: Sequence[str]) -> None:
        if not predicted:  # nothing of a previous variant to look for (a fresh environment): no snapshot to wait for
            return
        after = snapshot(self.system, self.python)
        if after.ok:
            result.leftovers = leftovers(predicted, after)
        if result.leftovers and self.settings.remove_leftovers:
            argv = uninstall_command(result.leftovers, self.python, self.settings.installer, uv=self.settings.uv)
            rm = self.system.run_streaming(argv, timeout=600, on_stdout=self.stream, on_stderr=self.stream)
            if rm.ok:
                result.removed = list(result.leftovers)
                result.leftovers = []
            else:
                result.notes.append(f"removing the leftovers failed: {rm.describe_failure()}")


class _EarlyImport:
    """The import of the new build in the target, started as soon as the installer succeeded, in a daemon thread, so it
    runs while the family's files are checked against their RECORD (the two are independent reads; the outcome is still
    decided from the files: the import is used only when they are exactly the new build). Its child dies with
    stackdoctor (``dying_with_parent``), so an interrupt that abandons it leaves nothing running."""

    def __init__(self, system: System, python: str) -> None:
        import threading

        self._system, self._python = system, python
        self._done = threading.Event()
        self._value: Verification | None = None
        threading.Thread(target=self._run, name="stackdoctor-import", daemon=True).start()

    def _run(self) -> None:
        try:
            self._value = verify(self._system, self._python)
        except Exception:  # noqa: BLE001 - result() imports again in the main thread, where a failure is reported
            self._value = None
        finally:
            self._done.set()

    def result(self) -> Verification:
        self._done.wait()
        return self._value if self._value is not None else verify(self._system, self._python)


def execute(plan: Plan, *, system: System, python: str, settings: InstallSettings | None = None) -> InstallResult:
    """Install ``plan`` into ``python``: its argv (:func:`stackdoctor.install.argv.installer_argv`) run as one
    :class:`Transaction`."""
    s = settings or InstallSettings()
    argv, env = installer_argv(plan, python, s.installer, find_links=s.find_links, uv=s.uv, source_args=s.source_args, env=s.env, reinstall=s.reinstall)
    return Transaction(system, Target(python, plan), s).run(argv, env)


def execute_recovery(system: System, python: str, settings: InstallSettings | None = None) -> InstallResult:
    """``install --recover``: :meth:`Transaction.recover`."""
    return Transaction(system, Target(python), settings).recover()


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
