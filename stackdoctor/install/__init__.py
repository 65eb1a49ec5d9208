"""The installer: a plan carried out in the target environment as a transaction.

What each file is:

- :mod:`~stackdoctor.install.flow` — ``stackdoctor install`` from its options to one outcome: facts, resolve, the
  sources, the routes, then act (dry run, ``--emit``, conda, or the transaction);
- :mod:`~stackdoctor.install.transaction` — the install as a transaction: the target holds exactly its previous
  torch family or exactly the new one, whatever happens;
- :mod:`~stackdoctor.install.journal` — the transaction's own state in the target: the journal, the lock, signals;
- :mod:`~stackdoctor.install.backup` — the target's torch family read, kept aside and put back (the workers);
- :mod:`~stackdoctor.install.verify` — after the install: the import, the verdict, the GPU code of the binaries;
- :mod:`~stackdoctor.install.argv` — the installer's argv, in one place; :mod:`~stackdoctor.install.emit` — ``--emit``;
- :mod:`~stackdoctor.install.result` — what an install ends with and the sentences that say it;
- :mod:`~stackdoctor.install.talk` — output that never stops a put-back, and what could not be printed;
- :mod:`~stackdoctor.wheels.leftovers` — the previous variant's runtime packages left behind;
- :mod:`~stackdoctor.wheels.sources`, :mod:`~stackdoctor.wheels.index`, :mod:`~stackdoctor.wheels.mirrors`,
  :mod:`~stackdoctor.wheels.lazywheel` — where wheels come from: the installer's configuration, index pages,
  mirrors of the PyTorch index, wheels read by HTTP ranges;
- :mod:`~stackdoctor.install.conda` — conda-family environments.

The public API is imported from here lazily (``from stackdoctor.install import execute``), so importing one of
the files (``stackdoctor.wheels.leftovers`` from the resolver, ``flow`` from the command) does not load the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.install.argv import install_command, installer_argv, is_pypi, restore_commands, uninstall_command
    from stackdoctor.install.backup import Snapshot, restore_backup, save_backup, snapshot
    from stackdoctor.install.emit import emit_requirements, emit_uv
    from stackdoctor.install.result import InstallResult, failure_line
    from stackdoctor.install.transaction import InstallSettings, Target, Transaction, execute, execute_recovery
    from stackdoctor.install.verify import Verification, check_gpu_code, intact, judge
    from stackdoctor.wheels.leftovers import TORCH_FAMILY, families_needed, predict_leftovers, runtime_family

_WHERE = {
    "install_command": "argv", "installer_argv": "argv", "is_pypi": "argv", "restore_commands": "argv", "uninstall_command": "argv",
    "Snapshot": "backup", "restore_backup": "backup", "save_backup": "backup", "snapshot": "backup",
    "emit_requirements": "emit", "emit_uv": "emit",
    "TORCH_FAMILY": "leftovers", "families_needed": "leftovers", "predict_leftovers": "leftovers", "runtime_family": "leftovers",
    "InstallResult": "result", "failure_line": "result",
    "InstallSettings": "transaction", "Target": "transaction", "Transaction": "transaction", "execute": "transaction",
    "execute_recovery": "transaction",
    "Verification": "verify", "check_gpu_code": "verify", "intact": "verify", "judge": "verify",
}

__all__ = [
    "InstallResult",
    "InstallSettings",
    "Snapshot",
    "TORCH_FAMILY",
    "Target",
    "Transaction",
    "Verification",
    "check_gpu_code",
    "emit_requirements",
    "emit_uv",
    "execute",
    "execute_recovery",
    "failure_line",
    "families_needed",
    "install_command",
    "installer_argv",
    "intact",
    "is_pypi",
    "judge",
    "predict_leftovers",
    "restore_backup",
    "restore_commands",
    "runtime_family",
    "save_backup",
    "snapshot",
    "uninstall_command",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{where}"), name)
