"""``install --emit``: the plan as requirements.txt lines or pyproject.toml fragments for uv."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackdoctor.install.argv import is_pypi, requirements

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.plan import Plan


def emit_requirements(plan: Plan, *, find_links: str | None = None) -> str:
    """requirements.txt lines that keep this choice on the next ``pip install -r``.

    ``--extra-index-url`` (not ``--index-url``) so the file's other requirements still come from
    the user's index; the local label (``+cu130``) pins the variant, which PyPI does not carry.
    """
    find_links = find_links or next((p.source for p in plan.packages if p.name == "torch" and p.source and p.index_url is None), None)  # torch found in a folder
    lines = [f"# torch {plan.torch_version} ({plan.variant}) chosen by stackdoctor"]
    if find_links:
        lines.append(f"--find-links {find_links}")
    elif not is_pypi(plan.index_url):
        lines.append(f"--extra-index-url {plan.index_url}")
    lines += requirements(plan)
    return "\n".join(lines) + "\n"


def emit_uv(plan: Plan) -> str:
    """pyproject.toml fragments: ``[tool.uv.sources]`` + an explicit ``[[tool.uv.index]]``."""
    deps = ", ".join(f'"{p.name}=={p.version}"' for p in plan.packages)
    lines = [f"# torch {plan.torch_version} ({plan.variant}) chosen by stackdoctor", f"# [project] dependencies: {deps}"]
    if is_pypi(plan.index_url):
        lines.append("# these come from PyPI: no [tool.uv.sources] entry is needed")
        return "\n".join(lines) + "\n"
    name = f"pytorch-{plan.variant}"
    lines += ["", "[tool.uv.sources]"]
    lines += [f'{p.name} = [{{ index = "{name}" }}]' for p in plan.packages]
    lines += ["", "[[tool.uv.index]]", f'name = "{name}"', f'url = "{plan.index_url}"', "explicit = true"]
    return "\n".join(lines) + "\n"
