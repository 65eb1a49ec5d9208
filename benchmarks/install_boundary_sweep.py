"""The install boundary's full kill sweep: N trials of each SIGKILL boundary and every output reader at every phase.

The suite (tests/test_install_boundary.py) runs one trial per boundary (SIGKILL of the process group at "uninstalling",
"uninstalled", "unpacking"; Ctrl-C into ``| tee`` at the uninstall and into ``| grep`` at the unpack). A race at a
boundary shows up only now and then, so this script runs the same tests many times over, crossed::

    python3 benchmarks/install_boundary_sweep.py            # 2 trials per boundary: 6 SIGKILL + 8 piped Ctrl-C
    python3 benchmarks/install_boundary_sweep.py --trials 10

Linux only (ptys, PR_SET_PDEATHSIG), as the tests. Prints pytest's own summary; exit code is pytest's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2, help="trials per boundary (default 2)")
    ap.add_argument("-n", default="auto", help="pytest-xdist workers (default auto)")
    a = ap.parse_args()
    env = dict(os.environ, STACKDOCTOR_BOUNDARY_SWEEP=str(max(a.trials, 1)))
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", a.n, "--dist", "load", "tests/test_install_boundary.py",
           "-k", "sigkill_of_the_process_group or ctrl_c_with_the_output_piped", "--durations=5"]
    return subprocess.run(cmd, cwd=REPO, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
