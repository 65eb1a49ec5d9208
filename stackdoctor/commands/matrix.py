"""``stackdoctor matrix show [--torch VERSION] [--json]`` and ``stackdoctor matrix validate FILE``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from stackdoctor.commands import LANG_HELP, use_lang
from stackdoctor.core.errors import ExitCode, IndexError_, UsageError


def _variant_lines(v: dict[str, Any], torch: str | None) -> list[str]:
    detail = " ".join(v["arch_list"] or v["gfx"] or [])
    announced = v.get("announced") or []
    lines = [f"  {v['name']:<10} {', '.join(v['platforms'])}" + (f" (announced, no artifact seen: {', '.join(announced)})" if announced else "")
             + (f"\n  {'':<10} {detail}" if detail else "")]
    if torch is not None:
        lines += [f"  {'':<10} {plat}: {' '.join(archs)}" for plat, archs in (v.get("arch_by_platform") or {}).items()]
        lines.append(f"  {'':<10} source: {v['source']}")
        lines += [f"  {'':<10} unknown: {u}" for u in v.get("unknown") or []]
    return lines


def _glibc(r: dict[str, Any]) -> str:
    """The release's glibc floor: its row's, else the lowest the Linux wheels' own tags name (``manylinux_2_28`` ->
    2.28); "unknown" where neither says."""
    if r.get("manylinux_glibc"):
        return str(r["manylinux_glibc"])
    from stackdoctor.matrix import parse_platform

    floors = sorted({f for v in r["variants"] for t in v["platforms"] if (p := parse_platform(t))[0] == "linux" and (f := p[2])})
    return f"{floors[0][0]}.{floors[0][1]} (the wheels' tags)" if floors else "unknown"


def _release_lines(r: dict[str, Any], torch: str | None) -> list[str]:
    pair = [f"torchvision {r['torchvision']}"] if r.get("torchvision") else []
    pair.append(f"torchaudio {r['torchaudio']}" if r.get("torchaudio") else "torchaudio unknown")
    if r.get("triton"):
        pair.append(f"triton {r['triton']}")
    lines = [f"torch {r['version']}" + (f" ({r['released']})" if r.get("released") else "") + ": " + ", ".join(pair)]
    if r.get("pythons"):
        lines.append(f"  python {', '.join(r['pythons'])}; glibc >= {_glibc(r)}; macOS >= {r.get('min_macos') or '?'}")
    if not r["variants"]:
        lines.append("  variants: unknown")
    for v in r["variants"]:
        lines += _variant_lines(v, torch)
    if torch is not None:
        lines.append(f"  source: {r['source']}")
        lines += [f"  unknown: {u}" for u in r.get("unknown") or []]
    return lines


def _variant_example() -> str:
    """One GPU build's index variant ("cu130": the newest example of the first kind that gives some), for the help."""
    from stackdoctor import kinds

    return next((a.variant_examples[-1] for a in kinds.ALL if a.variant_examples), "cpu")


def _kind_table_lines(torch: str | None) -> list[str]:
    """The accelerator kinds' own tables (a plug-in's too: ``Accelerator.table``), each row the torch it pairs with;
    with ``--torch``, only the rows of that release."""
    from stackdoctor import kinds

    lines: list[str] = []
    for acc, data in kinds.tables():
        rows = [r for r in data.get("releases") or [] if isinstance(r, dict) and (torch is None or str(r.get("torch")) == torch)]
        package = data.get("package") or acc.name
        lines.append(f"{acc.label} table {acc.table} ({data.get('schema') or '?'}): {len(rows)} {package} release(s)")
        lines += [f"  {package} {r.get('version')}: torch {r.get('torch') or '?'}" for r in rows]
    return lines


def _show_text(data: dict[str, Any], torch: str | None) -> str:
    lines: list[str] = []
    if data.get("files"):
        lines.append("matrix files: " + ", ".join(data["files"]))
    for r in data["releases"]:
        lines += _release_lines(r, torch)
    if torch is None:
        from stackdoctor import kinds

        lines += [line for acc in kinds.ALL for line in acc.matrix_lines(data)]
    return "\n".join(lines + _kind_table_lines(torch))


def show(
    torch: Annotated[Optional[str], typer.Option("--torch", help="Show one release (e.g. 2.13.0) with sources and unknowns.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    matrix: Annotated[Optional[list[str]], typer.Option("--matrix", help="Layer a YAML matrix file over the embedded one (repeatable).")] = None,
    lang: Annotated[Optional[str], typer.Option("--lang", help=LANG_HELP)] = None,
) -> int:
    """Print the compatibility matrix (embedded, with --matrix / STACKDOCTOR_MATRIX layered over it)."""
    use_lang(lang)
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

def validate(file: Annotated[str, typer.Argument(help="A YAML matrix file to check.")]) -> int:
    """Check a matrix file against the schema (exit 0 valid, exit 2 with one sentence naming file and line)."""
    from stackdoctor.matrix import load_matrix, validate_file

    parsed = validate_file(file)
    load_matrix([file])  # layering must work too
    from stackdoctor import kinds

    n = parsed.count("releases")
    counts = sorted(c for acc in kinds.ALL for c in acc.matrix_counts)  # the kinds' tables, in the sentence's order
    said = "".join(f", {parsed.count(table)} {words}" for _, table, words in counts)
    print(f"{file}: valid ({n} release{'s' if n != 1 else ''}{said}).")
    return int(ExitCode.OK)

def learn_cmd(
    index: Annotated[Optional[str], typer.Option("--index", help=f"The index to learn from (PEP 503/691; default: the matrix's pypi index). A download.pytorch.org-shaped variant index works too (…/whl/{_variant_example()}).")] = None,
    snapshot: Annotated[Optional[str], typer.Option("--snapshot", help="Learn from an index snapshot (benchmarks/pypi_via_pip.py) instead of --index.")] = None,
    wheels: Annotated[Optional[str], typer.Option("--wheels", help="With --snapshot --download: a folder of wheels downloaded earlier (checked against the index's sha256).")] = None,
    out: Annotated[Optional[str], typer.Option("--out", help="The layer file to write (default: ~/.config/stackdoctor/learned.yaml, or STACKDOCTOR_LEARNED).")] = None,
    shipped: Annotated[bool, typer.Option("--shipped", help="Write the shipped layer compat_matrix/learned.yaml of this source checkout (maintainers).")] = False,
    torch: Annotated[Optional[list[str]], typer.Option("--torch", help="Learn only this release (repeatable).")] = None,
    since: Annotated[str, typer.Option("--since", help="Oldest release to learn.")] = "2.0",
    download: Annotated[bool, typer.Option("--download", help="Read GPU code too (as --gpu-code), and download whole wheels where the index refuses range requests (within --max-wheel-mb).")] = False,
    gpu_code: Annotated[bool, typer.Option("--gpu-code", help="Read the GPU wheels' GPU code (arch lists, PTX, gfx) by range requests: the GPU library's bytes, only its headers kept.")] = False,
    refresh: Annotated[bool, typer.Option("--refresh", help="Read releases already learned again.")] = False,
    no_companions: Annotated[bool, typer.Option("--no-companions", help="Do not read torchvision/torchaudio pairings.")] = False,
    max_wheel_mb: Annotated[int, typer.Option("--max-wheel-mb", help="Largest wheel --download reads, in MiB.")] = 6144,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds for one index page.")] = 20.0,
    lang: Annotated[Optional[str], typer.Option("--lang", help=LANG_HELP)] = None,
) -> int:
    """Learn torch releases from an index's wheels (names, core metadata, with --download their GPU code) into a matrix layer."""
    use_lang(lang)
    from stackdoctor.matrix import load_matrix
    from stackdoctor.wheels import learn as L
    from stackdoctor.wheels.index import IndexClient

    target = _learn_target(since, torch, index, snapshot, max_wheel_mb, timeout, shipped, out)
    doc = L.read_layer(target)
    existing = {str(r.get("version")): r for r in doc.get("releases") or [] if isinstance(r, dict)}
    client = None
    if snapshot:
        src: L.Source = L.SnapshotSource(Path(snapshot), wheels=Path(wheels) if wheels and download else None)
    else:
        url = (index or load_matrix().index_url("pypi")).rstrip("/")
        client = IndexClient(timeout_s=timeout)
        src = L.HttpSource(url, client, download=download, max_wheel_bytes=max_wheel_mb * 1024 * 1024)
    try:
        res = L.learn(src, existing=existing, since=since, versions=torch or (), refresh=refresh, download=download or gpu_code, companions=not no_companions)
    except IndexError_ as exc:
        raise IndexError_(shown(str(exc))) from None  # the index URL may carry credentials
    finally:
        if client is not None:
            client.close()
    if not _said(res, src, target, torch):
        return int(ExitCode.FAILED if res.missing else ExitCode.OK)
    L.write_layer(target, doc, res)
    print(f"wrote {len(res.rows)} release row(s) to {target}")
    if res.missing:
        print(f"{len(res.missing)} thing(s) asked for could not be learned (listed above as not learned)")
        return int(ExitCode.FAILED)
    return int(ExitCode.OK)


def shown(text: str) -> str:
    """On the user's own terminal: credentials masked, their own hosts as they typed them (a bundle's host
    redaction is for sharing), and matrix learn's own flag where the index client names install's."""
    from stackdoctor.core.redact import scrub_secrets

    return scrub_secrets(text).replace("check the network, HTTPS_PROXY, or use --index-base / --offline", "check the network or HTTPS_PROXY, or give another --index")


def _learn_target(since: str, torch: list[str] | None, index: str | None, snapshot: str | None, max_wheel_mb: int, timeout: float,
                  shipped: bool, out: str | None) -> Path:
    """The layer file ``matrix learn`` writes, once its flags are checked (one sentence and exit 2 when they are not)."""
    from packaging.version import InvalidVersion, Version

    from stackdoctor.matrix import learned_layer_path

    try:
        Version(since)
        for t in torch or ():
            Version(t)
    except InvalidVersion as exc:
        raise UsageError(f"not a torch version: {str(exc).split(':', 1)[-1].strip()}.") from None
    if index and snapshot:
        raise UsageError("--index and --snapshot are two sources; give one.")
    if max_wheel_mb < 1 or timeout <= 0:
        raise UsageError("--max-wheel-mb and --timeout must be positive.")
    if shipped and out:
        raise UsageError("--shipped and --out name two layer files; give one.")
    if not shipped:
        return Path(out).expanduser() if out else learned_layer_path()
    target = Path(__file__).resolve().parent.parent.parent / "compat_matrix" / "learned.yaml"
    if not target.parent.is_dir():
        raise UsageError("--shipped needs a source checkout (compat_matrix/ beside the stackdoctor package).")
    return target


def _said(res: Any, src: Any, target: Path, torch: list[str] | None) -> bool:
    """Print what ``matrix learn`` read; False when it learned no row (said so, or a usage error when the releases
    asked for are not served)."""
    for line in res.lines:
        print(shown(line))
    if res.skipped:
        print(f"already learned (not fetched again; --refresh reads them): torch {', '.join(res.skipped)}")
    for err in [*res.errors, *getattr(src, "notes", [])]:
        print(shown(f"warning: {err}"))
    fetched = getattr(src, "fetched", 0)
    if fetched:
        print(f"read {fetched / (1024 * 1024):.1f} MiB of wheels by range requests")
    for miss in res.missing:
        print(shown(f"not learned: {miss}"))
    if res.rows:
        return True
    if torch and not res.skipped:
        if res.errors:
            raise UsageError(str(shown(res.errors[0])).rstrip(".") + ".")  # the index's own sentence
        raise UsageError(shown(f"{src.name} serves no torch {', '.join(torch)}."))
    print(shown(f"nothing new on {src.name}; {target} unchanged."))
    return False


def register(app: typer.Typer) -> None:
    sub = typer.Typer(name="matrix", help="Show, validate or learn the compatibility matrix.", no_args_is_help=True, rich_markup_mode=None)
    sub.command("show")(show)
    sub.command("validate")(validate)
    sub.command("learn")(learn_cmd)
    app.add_typer(sub, name="matrix")
