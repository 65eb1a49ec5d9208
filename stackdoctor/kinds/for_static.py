"""What the static read of torch's files asks a kind (its libraries, its GPU code reader, its runtime wheels).

A part of :class:`stackdoctor.kinds.base.Accelerator` (which inherits it); every method has the generic default a kind
overrides where it has something to say."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    pass

if TYPE_CHECKING:
    from stackdoctor.binaries.binfmt import SectionTable, ZstdDecoder
    from stackdoctor.model.facts import LibraryInfo, TorchFiles


class StaticSeam:
    # what its defaults read of the kind (:class:`~stackdoctor.kinds.base.Accelerator` and the kinds set them)
    build_witness: ClassVar[str | None]
    torch_version_fields: ClassVar[tuple[str, ...]]

    # What the static read of torch's files (stackdoctor.probes.torch_static) needs to know of a build of its kind:
    static_code: ClassVar[str | None] = None  # the GPU code its torch libraries carry, as LibraryInfo.kind says it ("cuda" | "hip" | "xpu")
    torch_library_files: ClassVar[tuple[tuple[str, bool], ...]] = ()  # (path under the torch package, primary: carries the build's arch list)
    runtime_library_names: ClassVar[tuple[tuple[str, str], ...]] = ()  # (library file stem, runtime name): versions from file names
    runtime_library_dirs: ClassVar[tuple[str, ...]] = ()  # site-packages folders whose <package>/lib and <package>/bin hold its runtime libraries
    site_interest: ClassVar[tuple[str, ...]] = ()  # name prefixes of its other distributions a diagnosis asks about (beside runtime_wheels)

    def version_py_fields(self) -> tuple[str, ...]:
        """The fields of torch/version.py that a build of its kind sets (its build witness, its runtime's versions)."""
        return tuple(dict.fromkeys(f for f in (self.build_witness, *self.torch_version_fields) if f))

    def torch_libraries(self, listing: Sequence[str]) -> tuple[tuple[str, bool], ...]:
        """Its torch libraries that carry GPU code (path under the torch package, primary), ``listing`` being torch/lib's."""
        return self.torch_library_files

    def runtime_name(self, dist: str) -> str | None:
        """The runtime name of one of its runtime wheels (a normalised distribution name); None: not a runtime library."""
        return dist

    def static_variant(self, files: TorchFiles) -> str | None:
        """The variant the version fields of torch's files say a build of its kind is, when its version has no local label."""
        return None

    def read_gpu_code(self, info: LibraryInfo, fh: Any, table: SectionTable, zstd: ZstdDecoder | None, deadline: float | None) -> None:
        """Read the GPU code of one of its libraries (``table``: the file's sections) into ``info``."""
        info.error = f"{info.path}: no reader for {info.kind} GPU code"

    def take_arch_list(self, files: TorchFiles, info: LibraryInfo) -> None:
        """Take the build's GPU code list from its primary library ``info`` into ``files``, when none was taken yet."""
