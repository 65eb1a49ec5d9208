"""Rules about the CUDA toolkit (nvcc): only needed to build extensions, never to run torch."""

from __future__ import annotations

import re

from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import built_for
from stackdoctor.versions import release as vt


@rule("nvcc-mismatch", severity="warn", layer="toolkit")
def nvcc_mismatch(ctx: Ctx) -> None:
    f, t, tk = ctx.facts, ctx.facts.torch, ctx.facts.cuda_toolkit
    if built_for(f) != "cuda" or not t.cuda or not tk.nvcc_version or vt(tk.nvcc_version)[:1] == vt(t.cuda)[:1]:
        return
    major = vt(t.cuda)[0]
    match = next((k for k in tk.toolkits if vt(k.nvcc_version or k.version_json)[:1] == (major,)), None)
    fix_text = None
    if match is not None:
        root = re.sub(r"[/\\]bin[/\\]nvcc(\.exe)?$", "", match.path)  # C:\...\v12.4\bin\nvcc.exe too
        bin_dir = root + ("\\bin" if "\\" in root else "/bin")
        fix_text = f'export CUDA_HOME="{root}" PATH="{bin_dir}:$PATH"'  # quoted: C:\Program Files\... has spaces
    ctx.add(
        fix=None if fix_text else "default",
        fix_text=fix_text,
        facts=["cuda_toolkit.nvcc_version", "torch.cuda"],
        nvcc=tk.nvcc_version,
        nvcc_path=tk.nvcc_path or "nvcc",
        cuda=t.cuda,
        major=major,
        torch=t.version,
    )
