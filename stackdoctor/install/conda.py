"""conda / mamba / micromamba / pixi targets: both routes, with reasons.

A conda environment can take PyTorch two ways:

- **pip wheels into the env** (the plan as for any venv): every release and variant PyTorch publishes,
  newest first; but conda does not see pip's torch, and conda packages of CUDA libraries or of
  ``pytorch`` next to it are the ``conda-pip-mix`` failure (``stackdoctor explain conda-pip-mix``);
- **conda-forge's build** (``compat_matrix/conda.yaml``): ``pytorch`` whose CUDA build is selected by the
  ``cuda-version`` package (or ``pytorch-gpu``), CPU by ``pytorch-cpu``; one package manager for the
  whole env, but releases land later and there are no ROCm or XPU builds.

Everything here is pure (facts + matrix + plan in, routes / text out) except :func:`run_conda`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackdoctor import kinds
from stackdoctor.core.errors import UsageError
from stackdoctor.core.shell import format_command
from stackdoctor.model.facts import conda_name
from stackdoctor.model.plan import Route
from stackdoctor.resolve.candidates import english_sentence

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.matrix import CondaInfo, CondaRelease, Matrix
    from stackdoctor.model.facts import Facts
    from stackdoctor.model.plan import Plan
    from stackdoctor.model.view import MachineView

CONDA_INSTALLERS = ("conda", "mamba", "micromamba", "pixi")


@dataclass
class CondaChoice:
    """The conda-forge build that fits: version, CPU or which runtime of a kind's build (CUDA 12.9), and the match
    specs that select it."""

    release: CondaRelease
    subdir: str  # "linux-64"
    runtime: str | None  # "12.9"; None: the CPU build
    specs: list[str]
    reasons: list[str]
    kind: kinds.Accelerator | None = None  # the kind whose build it is (None: the CPU build)


def conda_subdir(facts: MachineView, platform_tag: str | None = None) -> str | None:
    """The conda platform of the target: ``linux-64``, ``linux-aarch64``, ``osx-arm64``, ``osx-64``, ``win-64``."""
    tag = (platform_tag or facts.facts.python.platform_tag or "").lower()
    machine = (facts.facts.platform.machine or "").lower()
    if tag.startswith(("manylinux", "linux", "musllinux")) or (not tag and (facts.facts.platform.system or "").lower() == "linux"):
        return "linux-aarch64" if ("aarch64" in tag or machine in ("aarch64", "arm64")) else "linux-64"
    if tag.startswith("macosx") or (not tag and (facts.facts.platform.system or "").lower() == "darwin"):
        return "osx-arm64" if ("arm64" in tag or machine == "arm64") else "osx-64"
    if tag.startswith("win") or (not tag and (facts.facts.platform.system or "").lower() == "windows"):
        return "win-64"
    return None


def is_conda_target(facts: Facts) -> bool:
    return facts.python.env_kind == "conda"


def _specs(info: CondaInfo, rel: CondaRelease, kind: kinds.Accelerator | None, runtime: str | None, packages: Sequence[str]) -> list[str]:
    specs: list[str] = []
    if kind is not None and runtime:
        specs += kind.conda_specs(info, rel, runtime)
    else:
        specs.append(f"{info.package}={rel.version}={info.cpu_build or 'cpu_*'}")
    # conda-forge torchvision / torchaudio; the solver pairs them with pytorch
    return specs + [p for p in packages if p != "torch"]


def _conda_forge_builds(plan: Plan) -> bool | None:
    """Whether conda-forge builds pytorch for the kind the plan's variant is for (its answer,
    :attr:`Accelerator.conda_forge_build`: CUDA yes; ROCm and XPU no); None for a CPU plan or a kind that does not say."""
    acc = kinds.for_variant(plan.variant)
    return acc.conda_forge_build if acc is not None else None


def choose(
    info: CondaInfo, plan: Plan, facts: MachineView, matrix: Matrix, *, subdir: str | None, driver: str | None, packages: Sequence[str]
) -> CondaChoice | None:
    """conda-forge's build for the plan: the same torch release when conda-forge has it (else its newest), CUDA
    when the plan is a CUDA one and a CUDA build runs on the driver, else the CPU build."""
    from packaging.version import Version

    if subdir is None:
        return None
    releases = [r for r in info.releases if subdir in r.platforms]
    if not releases:
        return None
    want = plan.torch_version
    same = next((r for r in releases if want and r.version == want), None)
    rel = same or releases[0]
    reasons: list[str] = []
    if same is None and want:
        newer = Version(rel.version) < Version(want)
        reasons.append(
            f"conda-forge has no pytorch {want}; its {'newest' if newer else 'closest'} for {subdir} is {rel.version} ({rel.source.split(' ')[0]})"
        )
    runtime: str | None = None
    acc = kinds.for_variant(plan.variant)
    builds = _conda_forge_builds(plan)
    if builds is True and acc is not None:
        runtime = acc.conda_build(rel, subdir, facts, matrix, driver, reasons)
    elif builds is False:
        built = next((a for a in kinds.BUILTIN if a.conda_forge_build), None)  # the GPU build conda-forge has
        if built is not None:
            built.conda_forge_only(reasons, plan.variant or "")
    kind = acc if runtime else None
    return CondaChoice(rel, subdir, runtime, _specs(info, rel, kind, runtime, packages), reasons, kind)


def conda_command(installer: str, specs: Sequence[str], *, channel: str, prefix: str | None, yes: bool = True) -> list[str]:
    """The install command for ``specs`` with conda, mamba, micromamba or pixi (pixi: into the project in the
    current directory, the way pixi manages environments)."""
    if installer == "pixi":
        return ["pixi", "add", "--channel", channel, *[_pixi_spec(s) for s in specs]]
    argv = [installer, "install"]
    if yes:
        argv.append("-y")
    if prefix:
        argv += ["-p", prefix]
    argv += ["-c", channel, *specs]
    return argv


def _pixi_spec(spec: str) -> str:
    """``pytorch=2.13.0=cuda*`` -> ``pytorch[version='==2.13.0', build='cuda*']`` (pixi takes full match specs)."""
    parts = spec.split("=")
    if len(parts) == 3:
        return f"{parts[0]}[version='=={parts[1]}', build='{parts[2]}']"
    if len(parts) == 2:
        return f"{parts[0]}=={parts[1]}"
    return spec


def _conda_libraries() -> set[str]:
    """conda's torch and the kinds' runtime libraries: a conda env with them and pip's torch mixes the two (conda-pip-mix)."""
    return {"pytorch", *(n for a in kinds.ALL for n in a.conda_libraries)}


def _pip_route(plan: Plan, pip_command: Sequence[str], conda_pkgs: Sequence[str]) -> Route:
    pip_route = Route("pip-wheels", f"PyTorch's wheels into the conda env with pip: torch {plan.torch_version} ({plan.variant})", list(pip_command))
    pip_route.reasons.append(english_sentence("nc_route_pip_reason"))  # the builds PyTorch publishes: the locale's
    pip_route.cautions.append("conda does not see pip's torch: do not conda-install packages that depend on pytorch into this env afterwards")
    if conda_pkgs:
        pip_route.cautions.append(
            english_sentence("nc_route_pip_mix", packages=", ".join(conda_pkgs), names=" ".join(conda_pkgs))  # whose libraries: the locale's
        )
    return pip_route


def _conda_route(info: CondaInfo, choice: CondaChoice, plan: Plan, facts: MachineView, *, installer: str, hypothetical: bool, conda_pkgs: Sequence[str]) -> Route:
    prefix = None if hypothetical else facts.facts.python.env_prefix
    tool = installer if installer in CONDA_INSTALLERS else "conda"
    cf = Route(
        "conda-forge",
        f"conda-forge's build: pytorch {choice.release.version} ({f'{choice.kind.build_label} {choice.runtime}' if choice.kind and choice.runtime else 'CPU'})",
        conda_command(tool, choice.specs, channel=info.channel, prefix=prefix),
        specs=list(choice.specs),
        channels=[info.channel],
    )
    cf.reasons += choice.reasons
    cf.reasons.append("one package manager for the whole env: conda resolves torch together with every other conda package")
    if choice.kind is not None and choice.runtime:
        reasons, env, cautions = choice.kind.conda_selection(info, choice.runtime, facts, hypothetical)
        cf.reasons += reasons
        cf.env.update(env)
        cf.cautions += cautions
    if _conda_forge_builds(plan) is False:
        cf.cautions.append(f"conda-forge has no {plan.variant} build: this route gives CPU-only torch on this GPU")
    if conda_pkgs and "pytorch" not in conda_pkgs:
        cf.reasons.append(f"this env already has conda's {', '.join(conda_pkgs)}: staying with conda avoids conda-pip-mix")
    return cf


def routes(
    plan: Plan,
    facts: MachineView,
    matrix: Matrix,
    *,
    pip_command: Sequence[str],
    installer: str,
    platform_tag: str | None,
    driver: str | None,
    packages: Sequence[str],
    hypothetical: bool = False,
) -> list[Route]:
    """Both routes for a conda environment, each with its reasons and cautions; one is recommended."""
    info = matrix.conda
    conda_pkgs = sorted({n for n in (conda_name(p) for p in facts.facts.torch.conda_packages) if n in _conda_libraries()})
    pip_route = _pip_route(plan, pip_command, conda_pkgs)
    if info is None:
        return [pip_route]
    choice = choose(info, plan, facts, matrix, subdir=conda_subdir(facts, platform_tag), driver=driver, packages=packages)
    if choice is None:
        pip_route.recommended = True
        return [pip_route]
    cf = _conda_route(info, choice, plan, facts, installer=installer, hypothetical=hypothetical, conda_pkgs=conda_pkgs)
    # which one to recommend
    lags = plan.torch_version is not None and choice.release.version != plan.torch_version
    builds = _conda_forge_builds(plan)
    gpu_loss = builds is False or (builds is True and choice.runtime is None)
    if installer in CONDA_INSTALLERS or (conda_pkgs and not gpu_loss):
        cf.recommended = True
    elif lags or gpu_loss:
        pip_route.recommended = True
    else:
        cf.recommended = True
    return [pip_route, cf]


def environment_yml(route: Route, *, name: str | None, python: str | None, pip_reqs: Sequence[str] = (), pip_args: Sequence[str] = ()) -> str:
    """An ``environment.yml`` conda, mamba, micromamba (and pixi import) accept, for one route."""
    lines = [f"# {route.title}; chosen by stackdoctor"]
    if name:
        lines.append(f"name: {_yaml_str(name)}")
    channels = route.channels or ["conda-forge"]
    lines.append("channels:")
    lines += [f"  - {_yaml_str(c)}" for c in channels]
    lines.append("dependencies:")
    if python:
        lines.append(f"  - python={python}")
    if route.name == "conda-forge":
        lines += [f"  - {_yaml_str(s)}" for s in route.specs]
    else:
        lines.append("  - pip")
        lines.append("  - pip:")
        lines += [f"      - {_yaml_str(' '.join(pip_args[i:i + 2]))}" for i in range(0, len(pip_args), 2)]
        lines += [f"      - {_yaml_str(r)}" for r in pip_reqs]
    if route.env:
        lines.append("variables:")
        lines += [f"  {k}: {_yaml_str(v)}" for k, v in route.env.items()]
    return "\n".join(lines) + "\n"


def _yaml_str(value: str) -> str:
    """A YAML scalar: quoted when it holds YAML syntax (``*``, ``:``, ``#``, leading ``-``, quotes)."""
    if re.match(r"^[A-Za-z0-9_.=<>!,+/-]+$", value) and not value.startswith(("-", "!")):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def index_args(argv: Sequence[str]) -> list[str]:
    """The ``--index-url X`` / ``--extra-index-url X`` / ``--find-links X`` pairs of a pip command line."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--index-url", "--extra-index-url", "--find-links") and i + 1 < len(argv):
            out += [argv[i], argv[i + 1]]
            i += 2
            continue
        i += 1
    return out


def which(installer: str, env: Mapping[str, str]) -> str | None:
    import shutil

    return shutil.which(installer, path=env.get("PATH") or os.defpath)


def require_tool(installer: str, argv: Sequence[str], env: Mapping[str, str]) -> str:
    path = which(installer, env)
    if path is None:
        raise UsageError(f"{installer} is not on PATH, so stackdoctor cannot run it; run it yourself: {format_command(list(argv), windows=os.name == 'nt')}")
    return path
