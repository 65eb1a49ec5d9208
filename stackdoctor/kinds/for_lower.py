"""More of the seam (:class:`~stackdoctor.kinds.base.Accelerator` inherits it): what the layers below the kinds read of
each kind as data: its runtime's error texts, where the report keeps its values, what redaction hides...

Each method has the generic default: a kind without the thing answers "nothing"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class ErrorDialect:
    """How one kind's runtime writes its errors in torch's text (a kind's :meth:`Accelerator.runtime_error_dialect`):
    regexes, the API each names (the matrix rows' ``api``). What every kind declares is read together."""

    names: tuple[tuple[str, str], ...]  # (an enum name's regex, its API), read case-sensitively
    numbers: tuple[str, ...]  # the forms a number is printed in: regexes (case-insensitive), each with a group ``n``
    messages: tuple[tuple[str, str], ...]  # (the prefix before the runtime's own string, its API), case-sensitive
    context: str  # a line this matches (case-insensitive) says whose error number it is
    number_api: str  # the API of a number on a line :attr:`claims` matches
    claims: str | None = None  # (case-insensitive) a line of this API; None: the API of a line nobody claims


class LowSeam:
    """The methods of :class:`~stackdoctor.kinds.base.Accelerator` that the layers below the kinds ask of them."""

    # where the report keeps its values (stackdoctor.model.view.ViewKeys, read by kinds.view_keys()): the fields of its
    # ``reconciled`` section of its driver's version and of its runtime level, and its other stable keys whose value
    # reconcile chooses from their witnesses ("subject.name", its ``reconciled()``'s keys)
    driver_key: ClassVar[str | None] = None
    runtime_key: ClassVar[str | None] = None
    chosen_keys: ClassVar[tuple[str, ...]] = ()
    # what a redacted report hides of it (stackdoctor.core.redact.DeviceIds, read by kinds.device_ids()): the fields of
    # its subject's ``gpus`` entries that identify a device ("uuid", "serial"), and the user and host names its systems
    # ship with, which identify no one
    gpu_ids: ClassVar[tuple[str, ...]] = ()
    anonymous_names: ClassVar[tuple[str, ...]] = ()

    def runtime_error_dialect(self) -> ErrorDialect | None:
        """How its runtime writes its errors in torch's text (:mod:`stackdoctor.kinds.runtime_errors`); None: it has
        no error numbers there."""
        return None
