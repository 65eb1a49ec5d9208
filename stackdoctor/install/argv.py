"""The installer's argv, in one place: the install command (pip or uv), the repair flags, credentials moved out of
the argv into the environment, the uninstall of leftovers and the last-resort reinstall of the previous build."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from stackdoctor.wheels.leftovers import canonical_name
from stackdoctor.wheels.sources import is_pypi

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.model.plan import Plan




def requirements(plan: Plan) -> list[str]:
    return [p.requirement for p in plan.packages]


def install_command(
    plan: Plan,
    python: str,
    installer: str = "pip",
    *,
    find_links: str | None = None,
    uv: str = "uv",
    source_args: Sequence[str] | None = None,
) -> list[str]:
    """The exact argv that installs ``plan`` into ``python``.

    ``source_args`` (from the index check, :mod:`stackdoctor.resolve.availability`) point the installer at the
    sources that answered, on top of the user's configuration. Without them: ``--index-url`` is the
    variant's index (download.pytorch.org mirrors every dependency torch needs, as its own install
    commands assume); PyPI plans (macOS) leave the user's index configuration alone; ``find_links``
    installs from a directory with ``--no-index``.
    """
    argv = _installer(python, installer, uv) + requirements(plan)
    if source_args is not None:
        argv += list(source_args)
    elif find_links:
        argv += ["--no-index", "--find-links", find_links]
    elif not is_pypi(plan.index_url):
        argv += ["--index-url", str(plan.index_url)]
        # a package from another index (a kind's companion, torch-npu from PyPI beside torch's CPU build): an extra index
        argv += [a for url in dict.fromkeys(p.index_url for p in plan.packages if p.index_url and p.index_url != plan.index_url)
                 for a in ("--extra-index-url", url)]
    return argv


def installer_argv(
    plan: Plan,
    python: str,
    installer: str = "pip",
    *,
    find_links: str | None = None,
    uv: str = "uv",
    source_args: Sequence[str] | None = None,
    env: Mapping[str, str | None] | None = None,
    reinstall: bool = False,
) -> tuple[list[str], dict[str, str | None] | None]:
    """The one argv (and environment) the installer is run with: :func:`install_command`, plus the repair flags
    (``reinstall``: the same build, damaged, gets its files again) and with any credentialed URL moved out of the
    argv into the environment (:func:`credentials_out_of_argv`)."""
    argv = install_command(plan, python, installer, find_links=find_links, uv=uv, source_args=source_args)
    if reinstall:  # the same build, damaged: its files again (a transactional repair)
        at = argv.index("install") + 1
        argv[at:at] = _reinstall_flags(installer)
    return credentials_out_of_argv(argv, env, installer)


def _installer(python: str, installer: str, uv: str) -> list[str]:
    """The installer's own words for "install into ``python``": ``uv pip install --python P`` or ``P -m pip install``."""
    return [uv, "pip", "install", "--python", python] if installer == "uv" else [python, "-m", "pip", "install"]


def _reinstall_flags(installer: str) -> list[str]:
    """The same versions over what is there, without touching their dependencies."""
    return ["--reinstall" if installer == "uv" else "--force-reinstall", "--no-deps"]


# where an installer takes each option's value from its environment (uv: the separator of a list)
_OPTION_VARS = {
    "pip": {"--index-url": ("PIP_INDEX_URL", " "), "--extra-index-url": ("PIP_EXTRA_INDEX_URL", " "), "--find-links": ("PIP_FIND_LINKS", " ")},
    "uv": {"--index-url": ("UV_DEFAULT_INDEX", " "), "--default-index": ("UV_DEFAULT_INDEX", " "), "--index": ("UV_INDEX", " "),
           "--extra-index-url": ("UV_INDEX", " "), "--find-links": ("UV_FIND_LINKS", ",")},
}


def credentials_out_of_argv(
    argv: Sequence[str], env: Mapping[str, str | None] | None, installer: str = "pip"
) -> tuple[list[str], dict[str, str | None] | None]:
    """``argv`` without a credentialed URL, and the environment that carries it instead: the installer's argv
    is visible to every local user (``ps``, /proc/<pid>/cmdline), its environment is not. A value of the
    same variable already in ``env`` is kept in front (the sources the index check chose)."""
    from stackdoctor.core.redact import has_credentials

    table = _OPTION_VARS["uv" if installer == "uv" else "pip"]
    out: list[str] = []
    moved: dict[str, list[str]] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in table and i + 1 < len(argv) and has_credentials(argv[i + 1]):
            moved.setdefault(a, []).append(argv[i + 1])
            i += 2
            continue
        out.append(a)
        i += 1
    if not moved:
        return list(argv), dict(env) if env is not None else None
    new_env: dict[str, str | None] = dict(env or {})
    for option, values in moved.items():
        var, sep = table[option]
        if var in ("PIP_INDEX_URL", "UV_DEFAULT_INDEX"):  # one default index: the argv's wins
            new_env[var] = values[-1]
            continue
        have = new_env.get(var)
        new_env[var] = sep.join([*([have] if have and have.strip() else []), *values])
    return out, new_env


def uninstall_command(names: Sequence[str], python: str, installer: str = "pip", *, uv: str = "uv") -> list[str]:
    if installer == "uv":
        return [uv, "pip", "uninstall", "--python", python, *names]
    return [python, "-m", "pip", "uninstall", "-y", *names]


def restore_commands(
    before: Mapping[str, str], python: str, installer: str, *, offline: bool = False, find_links: Sequence[str] = (), uv: str = "uv"
) -> list[list[str]]:
    """The last resort when the saved files could not be put back: reinstall exactly the previous build
    (version and local label) over what is there, from the sources the user's own configuration trusts, never a
    ``--index-base`` / mirror given for the new build. Offline (``--offline`` / ``--no-index``): only the user's
    ``--find-links`` folders, with ``--no-index``; none, no command."""
    pins = [f"{n}=={v}" for n, v in before.items()]
    if not pins:
        return []
    where: list[str] = []
    if offline:
        if not find_links:
            return []
        where = ["--no-index"] + [x for d in find_links for x in ("--find-links", d)]
    return [_installer(python, installer, uv) + _reinstall_flags(installer) + pins + where]


def planned_versions(plan: Plan) -> dict[str, str]:
    """name -> the exact version the plan installs (local label included)."""
    out = {}
    for p in plan.packages:
        if "==" in p.requirement:
            out[canonical_name(p.name)] = p.requirement.split("==", 1)[1]
    return out
