"""What the renderers, ``diff``, the commands and the runner ask a kind (the screens' words, the fleet table, the compared facts).

A part of :class:`stackdoctor.kinds.base.Accelerator` (which inherits it); every method has the generic default a kind
overrides where it has something to say."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from stackdoctor.model.facts import Facts, TorchFacts

if TYPE_CHECKING:
    pass





from stackdoctor.kinds.shapes import Say


class RenderSeam:
    device_example: ClassVar[str | None] = None  # one of its devices as `kernels --device` takes it, for the help ("cuda:0", "mps")
    fleet_runtime: ClassVar[str | None] = None  # the fleet table's column of the runtime its torch bundles ("cuda"): a node's key
    witness_keys: ClassVar[tuple[str, str] | None] = None  # the ui keys of the witness rows of its driver and runtime in the view

    def fleet_node(self, facts: Facts) -> tuple[str | None, str | None, str | None]:
        """(driver, runtime, GPU names) of this node as the fleet table compares them, for the kind that declares
        :attr:`fleet_runtime`."""
        return None, None, None

    def toolkit(self, facts: Facts) -> tuple[str, str | None] | None:
        """Its compiler toolkit as the stack's toolkit layer shows it (the tool and version, the path), or None."""
        return None

    def runtime_words(self, torch: TorchFacts, say: Say) -> tuple[str, bool] | None:
        """The runtime layer's words when the installed torch carries its runtime ("CUDA 12.6 (bundled in the wheel),
        cuDNN 9.1"), and whether torch's availability follows them; None when it carries none of it."""
        return None

    def files_build_words(self, facts: Facts, say: Say) -> str | None:
        """The runtime layer's words for a torch read from its files (not imported) on its platform ("macOS build")."""
        return None

    def torch_versions(self, torch: TorchFacts) -> list[tuple[str, str]]:
        """Its runtime's versions as the Markdown torch row lists them ([("CUDA", "12.6")])."""
        return []

    def availability_words(self, torch: TorchFacts, say: Say) -> str | None:
        """What torch said of its devices, for the Markdown torch row ("MPS available"), or None."""
        return None

    def compared(self, facts: Facts) -> dict[str, Any]:
        """Its facts as ``diff`` compares them, key -> plain value (``nvidia.driver_version``, ``nvidia.gpus[0].name``,
        ``torch.cuda``): the stack-defining ones, never volatile or identifying ones (UUIDs, serials, paths)."""
        return {}

    def diff_sections(self) -> dict[str, int]:
        """The sections of its keys (``compared``) and their places in the diff's stack order
        (:data:`stackdoctor.model.diff.SECTION_PLACES` holds every machine's)."""
        return {}

    # the shared matrix's tables that are about it, as `matrix validate` counts them: (place in its sentence, table, words)
    matrix_counts: ClassVar[tuple[tuple[int, str, str], ...]] = ()
    variant_examples: ClassVar[tuple[str, ...]] = ()  # its index variants as the help shows them ("cu126", "cu130")

    def matrix_lines(self, data: Mapping[str, Any]) -> list[str]:
        """Its lines in `matrix show`, from the shared matrix's data (``Matrix.to_data``), after the releases."""
        return []
