"""The catalogue keeps English and Chinese in step, and knows every code the package emits.

- every catalogued code has a title and an explanation in both languages;
- both locale files have the same codes, the same detail/fix keys and the same {fields};
- every code that can warn or fail has a fix template;
- every ``code="..."`` literal in the package source is catalogued (so `explain` knows it);
- `stackdoctor explain` lists, explains, and refuses an unknown code with exit 2.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from stackdoctor import catalog

PKG = Path(catalog.__file__).resolve().parent
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_locale_files_have_exactly_the_catalogue_codes():
    for lang in catalog.LANGS:
        assert set(catalog.texts(lang)["codes"]) == set(catalog.codes()), lang


@pytest.mark.parametrize("code", catalog.codes())
def test_every_code_has_title_and_explanation_in_both_languages(code):
    for lang in catalog.LANGS:
        entry = catalog.texts(lang)["codes"][code]
        assert entry.get("title") and "\n" not in entry["title"].strip(), (lang, code)
        assert entry.get("explain"), (lang, code)
    assert catalog.title(code, "en") != catalog.title(code, "zh")
    assert CJK.search(catalog.title(code, "zh")) and CJK.search(catalog.explain(code, "zh"))
    assert not CJK.search(catalog.explain(code, "en"))


@pytest.mark.parametrize("code", catalog.codes())
def test_templates_match_between_languages(code):
    en, zh = catalog.texts("en")["codes"][code], catalog.texts("zh")["codes"][code]
    for kind in ("detail", "fix"):
        e, z = en.get(kind) or {}, zh.get(kind) or {}
        assert set(e) == set(z), (code, kind)
        for key in e:
            assert catalog.placeholders(e[key]) == catalog.placeholders(z[key]), (code, kind, key)


@pytest.mark.parametrize("code", [c.code for c in catalog.CHECKS if c.severity != "ok"])
def test_every_problem_code_has_a_fix(code):
    fixes = catalog.texts("en")["codes"][code].get("fix") or {}
    assert fixes.get("default") or fixes, code


def test_commands_in_fixes_are_not_translated():
    """The backticked commands and the leading command of each fix are identical in both languages."""
    for code in catalog.codes():
        en = (catalog.texts("en")["codes"][code].get("fix") or {})
        zh = (catalog.texts("zh")["codes"][code].get("fix") or {})
        for key, text in en.items():
            assert re.findall(r"`([^`]+)`", text) == re.findall(r"`([^`]+)`", zh[key]), (code, key)
            first = text.split()[0]
            if re.match(r"^[a-z{]", first) and not CJK.search(zh[key].split()[0]):
                assert zh[key].split()[0] == first, (code, key)


def test_findings_are_made_only_by_the_rules():
    """No ``Finding(`` is built outside the rules: every finding comes from one declared rule (through
    ``Ctx.add`` in rules/core.py, with the rule's severity and layer and the locale's texts), so every code is
    catalogued and translated."""
    builders = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"\bFinding\(", line) and not line.lstrip().startswith(("class ", "#")) and rel not in ("catalog.py", "rules/core.py"):
                builders.append(f"{rel}:{n}: {line.strip()}")
    assert builders == [], builders
    declared = re.findall(r'@rule\(\s*"([a-z0-9-]+)"', "\n".join(p.read_text(encoding="utf-8") for p in (PKG / "rules").glob("*.py")))
    assert declared and sorted(declared) == sorted(c for c in catalog.codes() if c != "rule-error")


def test_message_fills_fields_and_falls_back():
    text = catalog.message("driver-too-old", "detail", "default", "en", torch="2.13.0+cu130", cuda="13.0", floor="580", os="Linux", driver="550.54.14", driver_cuda="12.4", error="")
    assert "2.13.0+cu130" in text and "550.54.14" in text and "{" not in text
    # an unknown key falls back to the default template; a missing field stays visible, never raises
    assert catalog.message("driver-too-old", "detail", "nope", "zh", torch="x").startswith("torch x")
    assert "{cuda}" in catalog.message("driver-too-old", "detail", "default", "en")


def test_make_finding_carries_catalogue_severity_and_layer():
    f = catalog.make_finding("torch-missing", "zh", detail="d", fix="stackdoctor install")
    assert (f.code, f.severity, f.layer) == ("torch-missing", "warn", "torch")
    assert CJK.search(f.title)


def _explain(*args: str, env_lang: str = "C") -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "LANG": env_lang, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "stackdoctor", "explain", *args], capture_output=True, text=True, env=env, timeout=60)


def test_explain_lists_every_code():
    r = _explain()
    assert r.returncode == 0, r.stderr
    for code in catalog.codes():
        assert re.search(rf"^\s+{re.escape(code)}\s", r.stdout, re.M), code


def test_explain_a_code_in_both_languages():
    en = _explain("driver-too-old", "--lang", "en")
    assert en.returncode == 0, en.stderr
    assert "CUDA Version" in en.stdout and "+cu126" in en.stdout and "+cu130" in en.stdout
    zh = _explain("driver-too-old", env_lang="zh_CN.UTF-8")
    assert zh.returncode == 0 and CJK.search(zh.stdout)
    assert "driver-too-old" in zh.stdout  # the code itself is never translated


def test_explain_unknown_code_is_one_sentence_and_exit_2():
    r = _explain("no-such-code")
    assert r.returncode == 2
    assert r.stdout == ""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no-such-code" in lines[0]
