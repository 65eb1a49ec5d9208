"""Exit codes and the exceptions that stop a command.

Exception tree::

    StackdoctorError            one sentence for the user, carries an exit code
    ├── UsageError              bad flag, unreadable or invalid input file (exit 2)
    │   ├── MatrixError         compat matrix file invalid (names file and line)
    │   ├── ReplayError         replay file unreadable, truncated, too new
    │   └── ConfigError         project requirements file malformed
    └── IndexError_             package index unreachable or broken (exit 2)

Only ``cli.main`` catches these; anything else is an internal error (exit 3).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # at least one failing finding, or an install request that cannot be met
    USAGE = 2  # stackdoctor could not run as asked
    INTERNAL = 3  # a bug in stackdoctor


class StackdoctorError(Exception):
    """A condition that stops a command; ``str(exc)`` is one sentence for the user."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(StackdoctorError):
    """The command could not run as asked: a bad flag or an unusable input file."""


class MatrixError(UsageError):
    """A compatibility matrix file is malformed or invalid."""


class ReplayError(UsageError):
    """A replay report cannot be loaded."""


class ConfigError(UsageError):
    """A project requirements file is malformed."""


class IndexError_(StackdoctorError):  # noqa: N801 - avoid shadowing the builtin IndexError
    """A package index could not be used (unreachable, 404/5xx, malformed, too large)."""

