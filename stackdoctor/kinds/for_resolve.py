"""What the resolver, the install flow and the wheel readers ask a kind (its plans, pins, toolkits, learned code).

A part of :class:`stackdoctor.kinds.base.Accelerator` (which inherits it); every method has the generic default a kind
overrides where it has something to say."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from stackdoctor.model.facts import Facts, TorchFacts

if TYPE_CHECKING:
    from packaging.version import Version

    from stackdoctor.matrix import CondaInfo, CondaRelease, Matrix, Release, Variant
    from stackdoctor.model.plan import Plan, Request
    from stackdoctor.model.toolchain import BuildTools
    from stackdoctor.model.view import MachineView
    from stackdoctor.system import System


class ResolveSeam:
    # what its defaults read of the kind (:class:`~stackdoctor.kinds.base.Accelerator` and the kinds set them)
    name: ClassVar[str]
    build_label: ClassVar[str]
    vendor_label: ClassVar[str]
    gpu_code: ClassVar[str | None]

    # What the resolver's stages, the install flow and the wheel readers ask of a kind instead of naming it
    # (branch resolve, issue 45). The defaults are a kind that says nothing of these.
    # its builds are the PyTorch index's variants: published in the matrix's releases, each version's local label its
    # variant (2.8.0+cu126); False: a kind whose wheels come from a source of its own (JetPack's, from its own rows)
    index_builds: ClassVar[bool] = True
    what_if_flags: ClassVar[tuple[str, ...]] = ()  # install's built-in what-if flags that name its devices or driver ("--gpu", "--driver")
    heaviest_build_files: ClassVar[str | None] = None  # a torch source build's largest compile jobs are its files ("CUDA"): the memory fix names them
    not_runtime_wheels: ClassVar[tuple[str, ...]] = ()  # names under its runtime_wheels prefixes that bundle no runtime ("nvidia-ml-py")
    triton_packages: ClassVar[tuple[str, ...]] = ()  # the triton its builds pin, beside triton and pytorch-triton ("pytorch-triton-rocm")
    # how its libraries' GPU code (:attr:`gpu_code`) is read (stackdoctor.wheels.learn_wheels): the binfmt sections it lives
    # in (binfmt's CUDA_SECTIONS: ".nv_fatbin", ".nv_fatb"), and whether an installed library's may be zstd-compressed
    library_code_sections: ClassVar[tuple[str, ...]] = ()
    library_code_zstd: ClassVar[bool] = False
    # what `matrix learn` writes of its builds (stackdoctor.wheels.learn): the variant names it learns (a regex: r"cu\d{2,3}"),
    # and the fields a row lacks when its GPU code was not read (then the row says so)
    learned_variant: ClassVar[str | None] = None
    conda_libraries: ClassVar[tuple[str, ...]] = ()  # conda's packages of its runtime, which shadow a pip wheel's (conda-pip-mix)
    clang_as_gcc: ClassVar[str | None] = None  # what installs a gcc that is clang on its platform ("Apple's Xcode tools")
    unread_code_fields: ClassVar[tuple[str, ...]] = ()

    def runtime_release(self, variant: Variant) -> str | None:
        """The release of its runtime a build of ``variant`` is made for ("12.6" of cu126, "6.4" of rocm6.4): among
        the builds that fit, the newest is planned; None when it names none."""
        return None

    def fit_host(self, view: MachineView, values: Mapping[str, str], what_if: bool) -> object | None:
        """The state of the host its :meth:`fit` reads beyond the devices (AMD's ROCm user space and amdgpu), kept in the
        resolver's target under its name (``Target.hosts``): ``values`` are its what-if values (:attr:`what_if_values`,
        by key), ``what_if`` says the plan is for another machine (whose host is then not this one's). None: nothing."""
        return None

    def initialised_runtime(self, torch: TorchFacts) -> str | None:
        """The release of its runtime that the installed torch, a build of its kind, initialised on this machine's driver
        (a CUDA build's ``torch.version.cuda`` when ``torch.cuda.is_available()``): what the driver is known to run when
        its version is not; None when it says nothing."""
        return None

    def host_machine(self, facts: Facts) -> str | None:
        """The CPU architecture the machine runs natively, where this kind's probe read it and the interpreter may be a
        translated one (macOS's ``arm64``, read outside Rosetta); None when it says nothing."""
        return None

    def os_release(self, facts: Facts) -> str | None:
        """The OS release this kind's probe read ("14.5": macOS's), what the wheels' platform floor is judged against;
        None when it says nothing."""
        return None

    def default_build_requires(self, requires: Iterable[str]) -> tuple[str, str] | None:
        """(the variant, its runtime in words) a label-less torch wheel's ``Requires-Dist`` lines pin of this kind's
        runtime (``cuda-toolkit[...]==13.0.3`` -> ("cu130", "the CUDA 13.0 runtime")); None when they pin none of it."""
        return None

    def variant_from_pins(self, pins: Mapping[str, str]) -> str | None:
        """The variant a label-less build is, from its runtime wheels' pins (:func:`stackdoctor.wheels.learn_wheels.runtime_pins`:
        ``cuda-toolkit==13.2.2`` -> ``cu132``); "" when its runtime is pinned in a form that names no release; None
        when none of its runtime is pinned."""
        return None

    def read_library_code(self, fh: Any, sec: Any, label: str) -> dict[str, Any]:
        """The GPU code in section ``sec`` of the open library ``fh`` as ``matrix learn`` writes it (``{"kind":
        gpu_code, "library": label, ...}``: ``arch_list`` / ``ptx``, or ``gfx``; ``containers``, ``error``)."""
        return {"kind": self.gpu_code, "library": label, "error": "no reader of this GPU code"}

    def installed_library_code(self, info: Any, member: str) -> dict[str, Any]:
        """An installed library's GPU code (``probes.torch_static.read_library``'s LibraryInfo) in :meth:`read_library_code`'s shape."""
        return {"kind": self.gpu_code, "library": member, "containers": info.containers, "error": info.error}

    def learned_code_into(self, row: dict[str, Any], code: Mapping[str, Any], platform: str) -> None:
        """Write the GPU code read from a wheel for ``platform`` (:meth:`read_library_code`'s shape) into the variant row."""

    def learned_code_from(self, row: dict[str, Any], known: Variant) -> None:
        """Write the GPU code of ``known``, the nearest known build, into the variant row (inferred, not read)."""

    def plans_target(self, target: Any) -> bool:
        """Its own resolution path plans this target (``stackdoctor.resolve.Target``; macOS: Apple's default build)
        instead of the devices' stages."""
        return False

    def plan_target(self, view: MachineView, matrix: Matrix, request: Request, target: Any, cands: list[tuple[Release, Version]],
                    plan: Plan) -> Plan:
        """The plan its own path makes for ``target`` (:meth:`plans_target`), from the releases ``cands`` the request allows."""
        raise NotImplementedError

    def find_build_tools(self, system: System, tools: BuildTools, *, python: str, timeout_s: float) -> None:
        """Find what a source build for it needs beyond the generic tools (its toolkit: NVIDIA's nvcc, cuDNN and NVTX;
        ROCm) on this machine, through ``system``, into ``tools``; never raises."""

    def unlisted_reason(self, count: int) -> tuple[str, str]:
        """(why no build of its kind could be planned, what to do) where ``count`` of its GPUs are on the PCI bus and no
        working driver lists them (:meth:`unlisted`)."""
        return (f"{count} GPU(s) are on the PCI bus but no working driver lists them, so no {self.build_label or self.name} build can be checked or chosen",
                "install or repair the driver, then resolve again")

    # conda-forge's builds of pytorch for it (stackdoctor.install.conda; asked where conda_forge_build is True)
    def conda_build(self, release: CondaRelease, subdir: str, view: MachineView, matrix: Matrix, driver: str | None,
                    reasons: list[str]) -> str | None:
        """The runtime release of conda-forge's newest build of ``release`` for it that runs here (``driver``: the
        driver planned for), saying why in ``reasons``; None: the CPU build."""
        return None

    def conda_specs(self, info: CondaInfo, release: CondaRelease, runtime: str) -> list[str]:
        """The match specs that select conda-forge's build of it for ``runtime`` (``pytorch=2.13.0=cuda*``, its selector)."""
        return [f"{info.package}={release.version}"]

    def conda_selection(self, info: CondaInfo, runtime: str, view: MachineView, hypothetical: bool) -> tuple[list[str], dict[str, str], list[str]]:
        """(reasons, environment, cautions) the conda-forge route adds for its build of ``runtime``: how it is selected,
        and what the solver needs where the machine does not show it (``hypothetical``: a what-if)."""
        return [], {}, []

    def conda_forge_only(self, reasons: list[str], variant: str) -> None:
        """Say in ``reasons`` that conda-forge builds pytorch for the CPU and this kind only, not ``variant``'s: the CPU build."""
        reasons.append(f"conda-forge builds pytorch for CPU and {self.build_label} only (no {variant}): the CPU build")

    def bad_driver_error(self, value: str) -> str:
        """The sentence install exits 2 with when ``--driver``, which names its driver (:attr:`what_if_flags`), is not a
        version of it."""
        return f"--driver {value} is not a {self.vendor_label or self.name} driver version."

    def no_driver_error(self, gpu: str) -> str:
        """The sentence install exits 2 with when ``--gpu`` names one of its devices and no driver of it is here or named."""
        return f"--gpu {gpu}: this machine has no {self.vendor_label or self.name} driver to assume; add --driver VERSION."
