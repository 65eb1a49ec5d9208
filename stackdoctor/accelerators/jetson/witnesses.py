"""A Jetson's JetPack and CUDA from its L4T release (``jetson.yaml``), on reconcile's copy of the facts
(:meth:`Jetson.derive <stackdoctor.accelerators.jetson.Jetson.derive>`). Pure."""

from __future__ import annotations

from stackdoctor.matrix import Matrix
from stackdoctor.model.facts import Facts
from stackdoctor.reconcile.gpus import DERIVED, derived

__all__ = ["derive"]


def derive(f: Facts, matrix: Matrix) -> None:
    j = f.jetson
    for key in ("jetpack", "cuda"):
        if derived(j.sources.get(key)):
            setattr(j, key, None)
            del j.sources[key]
    row = matrix.jetpack_for(j.l4t_release)
    if row is None:
        return
    if j.jetpack is None:
        j.jetpack = row.jetpack
        j.sources["jetpack"] = DERIVED + f"compat_matrix/jetson.yaml l4t_releases ({row.source})"
    if j.cuda is None and row.cuda:
        j.cuda = row.cuda
        j.sources["cuda"] = DERIVED + f"compat_matrix/jetson.yaml l4t_releases ({row.source})"
