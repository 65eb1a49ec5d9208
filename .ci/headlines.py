"""Fail CI when a headline test did not run: ``python3 .ci/headlines.py REPORT``.

REPORT is what tests/conftest.py writes when STACKDOCTOR_HEADLINE_REPORT names a file: every test marked
``@pytest.mark.headline(CATEGORY)`` and what became of it. A category is satisfied when every one of its
tests passed. STACKDOCTOR_CI_ALLOW_SKIP (comma-separated categories, e.g. ``netns,unprivileged``) says this
machine cannot run them (a contributor without root): their skips are then listed but do not fail.
Exit 0 when satisfied, 1 otherwise, with one sentence naming every test that did not run and why.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python3 .ci/headlines.py REPORT", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as fh:
            report = json.load(fh)
    except (OSError, ValueError) as exc:
        print(f"CI: no headline report from the test run ({exc}); the test command did not finish its session.", file=sys.stderr)
        return 1
    categories: dict[str, str] = report["categories"]
    tests: dict[str, dict[str, str]] = report["tests"]
    allowed = {c.strip() for c in os.environ.get("STACKDOCTOR_CI_ALLOW_SKIP", "").split(",") if c.strip()}
    unknown = allowed - set(categories)
    if unknown:
        print(f"CI: STACKDOCTOR_CI_ALLOW_SKIP names unknown categories {', '.join(sorted(unknown))} (known: {', '.join(categories)}).", file=sys.stderr)
        return 2
    missing: list[str] = []
    allowed_skips: list[str] = []
    for cat, what in categories.items():
        mine = {k: v for k, v in tests.items() if v["category"] == cat}
        passed = sum(v["outcome"] == "passed" for v in mine.values())
        print(f"headline {cat:<13} {passed}/{len(mine)} passed  ({what})")
        not_run = [f"{k} ({v['outcome']}{': ' + v['reason'] if v['reason'] else ''})" for k, v in sorted(mine.items()) if v["outcome"] in ("skipped", "not run")]
        if not mine:
            not_run = [f"no test marked headline({cat!r}) was collected"]
        (allowed_skips if cat in allowed else missing).extend(f"[{cat}] {t}" for t in not_run)
    if allowed_skips:
        print(f"CI: allowed by STACKDOCTOR_CI_ALLOW_SKIP={','.join(sorted(allowed))}: " + "; ".join(allowed_skips))
    if missing:
        print(
            f"CI FAILED: {len(missing)} headline test(s) did not run, so README's Reliability claims are unproven on this machine: "
            + "; ".join(missing)
            + ". Fix the machine, or set STACKDOCTOR_CI_ALLOW_SKIP=<categories> (README: Tests) if it cannot run them.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
