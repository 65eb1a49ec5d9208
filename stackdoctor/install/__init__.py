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
- :mod:`~stackdoctor.install.conda` — conda-family environments.

Each is imported by its own name (``from stackdoctor.install.transaction import execute``).
"""
