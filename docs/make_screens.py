"""Regenerate README's screens: the real `check` renderer, exported by rich as SVG and text.

- healthy: a live `stackdoctor check` of the shared torch 2.13.0+cpu venv on this (GPU-less) machine;
- broken: a live `stackdoctor check` of a fake machine: the real nvidia-smi output of fixture c14
  (RTX 4070, driver 550.40.07, CUDA 12.4) replayed by a fake nvidia-smi, and a target venv whose
  `torch` package reports itself as 2.13.0+cu130 and fails CUDA initialisation the way a real
  cu130 wheel does on a 550 driver. Both are then re-rendered from their JSON reports.

    python docs/make_screens.py [--torch-python PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from rich.console import Console

from stackdoctor.model.report import report_from_data
from stackdoctor.render.human import render_report

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FAKE_TORCH = '''
import warnings
__version__ = "2.13.0+cu130"
class version:
    cuda = "13.0"; hip = None; debug = False
class _Cuda:
    @staticmethod
    def is_available():
        warnings.warn("CUDA initialization: The NVIDIA driver on your system is too old (found version 12040). "
                      "Please update your GPU driver by downloading and installing a new version from the URL: "
                      "http://www.nvidia.com/Download/index.aspx")
        return False
    @staticmethod
    def device_count():
        return 0
    @staticmethod
    def get_arch_list():
        return ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
cuda = _Cuda()
'''


def check_json(args: list[str], env: dict[str, str] | None = None) -> dict:
    out = subprocess.run([sys.executable, "-m", "stackdoctor", "check", "--json", *args], capture_output=True, text=True, env=env)
    return json.loads(out.stdout)


def save(name: str, data: dict) -> None:
    report = report_from_data(data)
    console = Console(record=True, width=100, color_system="truecolor", force_terminal=True, file=open(os.devnull, "w"))
    render_report(report, console)
    console.save_svg(str(HERE / f"screen-{name}.svg"), title=f"stackdoctor check ({name})")
    # the text is what `check` prints into a pipe or a CI log (no fix folded, no trailing spaces): the real CLI
    # re-rendering the same report, less the line that names the replayed file
    with tempfile.TemporaryDirectory() as d:
        saved = Path(d) / "report.json"
        saved.write_text(json.dumps(data))
        env = dict(os.environ, COLUMNS="100", LANG="C.UTF-8", LC_ALL="C.UTF-8")
        out = subprocess.run([sys.executable, "-m", "stackdoctor", "check", "--replay", str(saved)], capture_output=True, text=True, env=env)
    lines = out.stdout.splitlines()
    if lines and lines[0].startswith("replay of "):
        lines = lines[1:]
    text = "\n".join(lines).strip("\n") + "\n"
    (HERE / f"screen-{name}.txt").write_text(text)
    if name == "broken":
        readme = REPO / "README.md"
        start, end = "<!-- screen-broken.txt: written by docs/make_screens.py -->\n  ```text\n", "\n  ```\n"
        body = readme.read_text(encoding="utf-8")
        head, rest = body.split(start, 1)
        readme.write_text(head + start + "\n".join(("  " + ln).rstrip() for ln in text.splitlines()) + end + rest.split(end, 1)[1], encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torch-python", default=os.path.expanduser("~/.cache/stackdoctor-tests/torch-venv/bin/python"))
    args = ap.parse_args()
    save("healthy", check_json(["--python", args.torch_python]))
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = next((venv / "lib").glob("python3*/site-packages"))
        (site / "torch").mkdir()
        (site / "torch" / "__init__.py").write_text(textwrap.dedent(FAKE_TORCH))
        bindir = root / "bin"
        bindir.mkdir()
        smi = (REPO / "tests/fixtures/real/c14-rtx4070-driver550-linux/nvidia-smi.txt").read_text().split("\n", 1)[1]
        (bindir / "smi.txt").write_text(smi)
        (bindir / "nvidia-smi").write_text(f"#!/bin/sh\ncat {bindir / 'smi.txt'}\n")
        (bindir / "nvidia-smi").chmod(0o755)
        sysroot = root / "root"
        (sysroot / "etc").mkdir(parents=True)
        (sysroot / "etc/os-release").write_text('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
        env = dict(os.environ, PATH=f"{bindir}:/usr/bin:/bin", STACKDOCTOR_SYSROOT=str(sysroot))
        # --import-torch: the fake torch speaks only when imported (its CUDA-init warning is the point)
        save("broken", check_json(["--python", str(venv / "bin" / "python"), "--no-kernels", "--import-torch"], env))


if __name__ == "__main__":
    main()
