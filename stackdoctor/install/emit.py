"""``install --emit``: the plan as requirements.txt lines or pyproject.toml fragments for uv."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackdoctor.install.argv import is_pypi, requirements

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.model.plan import Plan


def emit_requirements(plan: Plan, *, find_links: str | None = None, public_index: str | None = None) -> str:
    """requirements.txt lines that keep this choice on the next ``pip install -r``, on a teammate's machine too.

    ``--extra-index-url`` (not ``--index-url``) so the file's other requirements still come from
    the user's index; the local label (``+cu130``) pins the variant, which PyPI does not carry, so a labelled pin
    always comes with the index that serves it. A folder on this machine (``--find-links``, pip's configuration)
    is not a source another machine has: it is named in a comment, and the index line is ``public_index`` (PyTorch's
    own for the variant) in its place; a find-links URL is written as is.
    """
    local = find_links or next((p.source for p in plan.packages if p.name == "torch" and p.source and p.index_url is None), None)  # torch found in a folder
    lines = [f"# torch {plan.torch_version} ({plan.variant}) chosen by stackdoctor"]
    if local and "://" in local and not local.startswith("file:"):
        lines.append(f"--find-links {local}")
    else:
        if local:
            lines.append(f"# found on this machine in {local} (a local folder: not written as a source, another machine may not have it)")
        index = (public_index or plan.index_url) if local else plan.index_url
        if is_pypi(index) and any("+" in r for r in requirements(plan)):  # a +cpu pin: PyPI does not serve it
            index = public_index
        if index and not is_pypi(index):
            lines.append(f"--extra-index-url {index}")
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
