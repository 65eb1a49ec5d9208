"""A report as JUnit XML, for GitLab, Jenkins, Azure and the other CI test-report viewers.

Two suites:

- ``stackdoctor.findings``: one testcase per finding (name = code, classname =
  ``stackdoctor.<layer>``). ``fail`` -> ``<failure>``; ``ok`` -> passed; ``warn`` -> passed, with the
  warning in ``<system-out>`` (a warning does not fail ``check``, so it must not fail the test
  report either; ``warnings_fail`` / ``--strict`` turn warnings into ``fail`` findings first). A finding that
  says what was not verified (``runtime-not-verified``) is ``<skipped>``: not passed, not failed, its message the
  command that verifies it.
- ``stackdoctor.probes``: one testcase per probe; a probe that was ``skipped`` is ``<skipped>``,
  one that errored or timed out passes with its error in ``<system-out>`` (what it means for the
  machine is a finding above, so it is not counted twice).

Control characters that XML 1.0 forbids are removed from all text.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from stackdoctor.model.report import Report, not_verified

__all__ = ["render_junit"]

_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _x(text: object) -> str:
    return _ILLEGAL_XML.sub("", "" if text is None else str(text))


def render_junit(report: Report, lang: str = "en") -> str:
    """The JUnit XML document (UTF-8 text with an XML declaration); its words in ``lang``."""
    from stackdoctor.core.texts import ui

    root = ET.Element("testsuites", name="stackdoctor")
    ts = report.created_at or ""

    suite = ET.SubElement(root, "testsuite", name="stackdoctor.findings", timestamp=_x(ts))
    seen: dict[str, int] = {}
    failures = unverified = 0
    for f in report.findings:
        seen[f.code] = seen.get(f.code, 0) + 1
        name = f.code if seen[f.code] == 1 else f"{f.code} [{seen[f.code]}]"
        case = ET.SubElement(suite, "testcase", name=_x(name), classname=_x(f"stackdoctor.{f.layer or 'general'}"), time="0")
        text = "\n".join(x for x in (f.title, f.detail, ui("annotation_fix", lang, fix=f.fix) if f.fix else "") if x)
        if f.severity == "fail":
            failures += 1
            el = ET.SubElement(case, "failure", message=_x(f.title), type=_x(f.code))
            el.text = _x(text)
        elif not_verified(f):
            unverified += 1
            ET.SubElement(case, "skipped", message=_x(f.detail or f.title)).text = _x(text)  # its detail names the command
        elif f.severity == "warn":
            ET.SubElement(case, "system-out").text = _x(ui("junit_warning", lang, text=text))
        else:
            ET.SubElement(case, "system-out").text = _x(text)
    suite.set("tests", str(len(report.findings)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(unverified))

    psuite = ET.SubElement(root, "testsuite", name="stackdoctor.probes", timestamp=_x(ts))
    skipped = 0
    total_time = 0.0
    for p in report.probes:
        total_time += p.duration_s or 0.0
        case = ET.SubElement(psuite, "testcase", name=_x(p.name), classname="stackdoctor.probes", time=f"{p.duration_s or 0.0:.3f}")
        if p.status == "skipped":
            skipped += 1
            ET.SubElement(case, "skipped", message=_x(p.error or "skipped"))
        elif p.status != "ok":
            ET.SubElement(case, "system-out").text = _x(f"{p.status}: {p.error or ''}")
    psuite.set("tests", str(len(report.probes)))
    psuite.set("failures", "0")
    psuite.set("errors", "0")
    psuite.set("skipped", str(skipped))
    psuite.set("time", f"{total_time:.3f}")

    root.set("tests", str(len(report.findings) + len(report.probes)))
    root.set("failures", str(failures))
    root.set("errors", "0")
    root.set("skipped", str(skipped + unverified))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
