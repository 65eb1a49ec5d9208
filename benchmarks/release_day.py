"""The release-day refresh the scheduled workflow runs (.github/workflows/matrix-refresh.yml): learn the torch releases
an index serves into the learned layer, then check that layer against the index (benchmarks/matrix_drift.py), and write
the report the pull request carries.

    python benchmarks/release_day.py --since 2.14 --report drift.md            # PyPI into compat_matrix/learned.yaml
    python benchmarks/release_day.py --index URL --out layer.yaml --report r.md  # another index, another layer file

Exit 0 when the refreshed layer agrees with the index (the pull request then carries the learned rows), 1 when drift is
left after learning (the report says what, for a person to read), 2 when learning itself failed (the report says why).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def learn(index: str | None, out: Path | None, since: str, gpu_code: bool) -> subprocess.CompletedProcess[str]:
    """``stackdoctor matrix learn`` as a maintainer runs it (the shipped layer, or ``out``)."""
    cmd = [sys.executable, "-m", "stackdoctor", "matrix", "learn", "--since", since]
    cmd += ["--out", str(out)] if out is not None else ["--shipped"]
    if index:
        cmd += ["--index", index]
    if gpu_code:
        cmd.append("--gpu-code")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=REPO)


def drift(index: str | None, layer: Path | None, since: str, gpu_code: bool) -> tuple[int, str]:
    sys.path.insert(0, str(HERE))
    import matrix_drift

    argv = ["--since", since] + (["--index", index] if index else []) + (["--matrix", str(layer)] if layer is not None else [])
    argv += ["--gpu-code"] if gpu_code else []
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = matrix_drift.main(argv)
    return rc, buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", help="the index to learn from (default: the matrix's pypi index)")
    ap.add_argument("--out", type=Path, help="the layer file to write (default: the shipped compat_matrix/learned.yaml)")
    ap.add_argument("--since", default="2.14")
    ap.add_argument("--gpu-code", action="store_true", help="read the builds' GPU code too (arch lists, by range requests)")
    ap.add_argument("--report", type=Path, required=True, help="where to write the report (Markdown)")
    a = ap.parse_args(argv)
    learned = learn(a.index, a.out, a.since, a.gpu_code)
    lines = ["## stackdoctor release-day refresh", "", f"`stackdoctor matrix learn --since {a.since}`: exit {learned.returncode}", "",
             "```", (learned.stdout + learned.stderr).strip(), "```", ""]
    if learned.returncode not in (0, 1):  # 1: some release was not learned whole, said in its output
        a.report.write_text("\n".join(lines), encoding="utf-8")
        print(f"learning failed (exit {learned.returncode}); see {a.report}")
        return 2
    rc, said = drift(a.index, a.out, a.since, a.gpu_code)
    lines += [f"`benchmarks/matrix_drift.py --since {a.since}`: exit {rc}", "", "```", said.strip(), "```", ""]
    a.report.write_text("\n".join(lines), encoding="utf-8")
    print(f"report: {a.report} (drift check exit {rc})")
    return 1 if rc else 0


if __name__ == "__main__":
    raise SystemExit(main())
