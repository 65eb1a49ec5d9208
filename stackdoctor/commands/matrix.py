"""``stackdoctor matrix show [--torch VERSION] [--json]`` and ``stackdoctor matrix validate FILE``."""

from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer

from stackdoctor.errors import ExitCode, UsageError


def _show_text(data: dict[str, Any], torch: str | None) -> str:
    lines: list[str] = []
    if data.get("files"):
        lines.append("matrix files: " + ", ".join(data["files"]))
    for r in data["releases"]:
        pair = []
        if r.get("torchvision"):
            pair.append(f"torchvision {r['torchvision']}")
        pair.append(f"torchaudio {r['torchaudio']}" if r.get("torchaudio") else "torchaudio unknown")
        if r.get("triton"):
            pair.append(f"triton {r['triton']}")
        lines.append(f"torch {r['version']}" + (f" ({r['released']})" if r.get("released") else "") + ": " + ", ".join(pair))
        if r.get("pythons"):
            lines.append(f"  python {', '.join(r['pythons'])}; glibc >= {r.get('manylinux_glibc') or '?'}; macOS >= {r.get('min_macos') or '?'}")
        if not r["variants"]:
            lines.append("  variants: unknown")
        for v in r["variants"]:
            detail = ""
            if v["arch_list"]:
                detail = " ".join(v["arch_list"])
            elif v["gfx"]:
                detail = " ".join(v["gfx"])
            lines.append(f"  {v['name']:<10} {', '.join(v['platforms'])}" + (f"\n  {'':<10} {detail}" if detail else ""))
            if torch is not None:
                for plat, archs in (v.get("arch_by_platform") or {}).items():
                    lines.append(f"  {'':<10} {plat}: {' '.join(archs)}")
                lines.append(f"  {'':<10} source: {v['source']}")
                for u in v.get("unknown") or []:
                    lines.append(f"  {'':<10} unknown: {u}")
        if torch is not None:
            lines.append(f"  source: {r['source']}")
            for u in r.get("unknown") or []:
                lines.append(f"  unknown: {u}")
    if torch is None and data.get("cuda"):
        lines.append("CUDA: minimum driver Linux / Windows (minor-version floor Linux / Windows)")
        for ver, row in data["cuda"].items():
            lines.append(
                f"  {ver:<5} {row['min_driver_linux'] or '?'} / {row['min_driver_windows'] or 'unknown'}"
                f" ({row['minor_compat_floor_linux'] or '?'} / {row['minor_compat_floor_windows'] or '?'})"
            )
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    sub = typer.Typer(name="matrix", help="Show or validate the compatibility matrix.", no_args_is_help=True, rich_markup_mode=None)

    @sub.command("show")
    def show(
        torch: Annotated[Optional[str], typer.Option("--torch", help="Show one release (e.g. 2.13.0) with sources and unknowns.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
        matrix: Annotated[Optional[list[str]], typer.Option("--matrix", help="Layer a YAML matrix file over the embedded one (repeatable).")] = None,
    ) -> int:
        """Print the compatibility matrix (embedded, with --matrix / STACKDOCTOR_MATRIX layered over it)."""
        from stackdoctor.matrix import load_matrix

        m = load_matrix(matrix or ())
        if torch is not None and m.release(torch) is None:
            raise UsageError(f"torch {torch} is not in the compatibility matrix (newest known: {m.releases[0].version if m.releases else 'none'}).")
        data = m.to_data(torch)
        if as_json:
            print(json.dumps(data, indent=2))
        else:
            print(_show_text(data, torch))
        return int(ExitCode.OK)

    @sub.command("validate")
    def validate(file: Annotated[str, typer.Argument(help="A YAML matrix file to check.")]) -> int:
        """Check a matrix file against the schema (exit 0 valid, exit 2 with one sentence naming file and line)."""
        from stackdoctor.matrix import load_matrix, validate_file

        parsed = validate_file(file)
        load_matrix([file])  # layering must work too
        n = len(parsed.releases)
        print(
            f"{file}: valid ({n} release{'s' if n != 1 else ''}, {len(parsed.cuda)} CUDA row(s), {len(parsed.gpu_rows)} GPU name(s), "
            f"{len(parsed.overrides)} ROCm override(s), {len(parsed.jetson)} Jetson row(s))."
        )
        return int(ExitCode.OK)

    app.add_typer(sub, name="matrix")
