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

from stackdoctor import kinds
from stackdoctor.rules import catalog

PKG = Path(catalog.__file__).resolve().parent.parent  # stackdoctor/ (the catalogue is rules/catalog.py)
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
            if re.search(r"\bFinding\(", line) and not line.lstrip().startswith(("class ", "#")) and rel not in ("rules/catalog.py", "rules/core.py"):
                builders.append(f"{rel}:{n}: {line.strip()}")
    assert builders == [], builders
    kind_rules = [PKG.parent / (m.replace(".", "/") + ".py") for m in kinds.rule_modules()]  # the accelerator kinds' own rules
    declared = re.findall(r'@rule\(\s*"([a-z0-9-]+)"', "\n".join(p.read_text(encoding="utf-8") for p in [*(PKG / "rules").glob("*.py"), *kind_rules]))
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


# ---------------------------------------------------------------------------- stackdoctor's own sentences (issue 24)

_ERRORS = {"UsageError", "StackdoctorError", "MatrixError", "ReplayError", "ConfigError", "IndexError_"}
# Raise sites whose message is not a literal, and why that is fine: already in the user's language, or a
# sentence another layer wrote (and that layer's literal is checked where it is written).
_NOT_LITERAL = {
    "catalog.ui(": "already in the user's language",
    "str(exc)": "re-raises another error's sentence",
    "kind_err": "an accelerator kind's flag_error sentence (NVIDIA's: catalogued as cur_gpu_impossible)",
    "redact_text(str(exc))": "re-raises another error's sentence, credentials masked",
    "shown(str(exc))": "re-raises the index client's sentence (its templates are catalogued), credentials masked",
    "str(redact_text(res.errors[0]))": "the index client's sentence (its templates are catalogued), credentials masked",
    "str(shown(res.errors[0]))": "the index client's sentence (its templates are catalogued), credentials masked",
    'redact_text(f"{src.name} serves no torch': "a literal, masked for credentials: catalogued as learn_serves_no_torch",
    'shown(f"{src.name} serves no torch': "a literal, masked for credentials: catalogued as learn_serves_no_torch",
    "bad": "resolve.request_value_error's sentences (catalogued as request_*; tests/test_cli_language_and_help.py runs each in Chinese)",
    "p.detail or f'{p.source.url} did not answer.'": "the index client's sentence, else a literal covered here",
}


def _variants(arg):
    """Every message a raise's argument can produce: one per truth assignment of its conditions (the same
    condition twice decides both places alike), each value (a path, a version) a token, the same expression
    the same token. None when the message is not built from literals."""
    import ast
    import itertools

    tests = list(dict.fromkeys(ast.unparse(n.test) for n in ast.walk(arg) if isinstance(n, ast.IfExp)))
    tokens: dict[str, str] = {}

    def render(node, choice):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            parts = [render(v, choice) for v in node.values]
            return None if None in parts else "".join(parts)
        if isinstance(node, ast.FormattedValue):
            inner = render(node.value, choice) if isinstance(node.value, (ast.IfExp, ast.Constant)) else None
            return inner if inner is not None else tokens.setdefault(ast.unparse(node.value), f"Zq{len(tokens)}q")
        if isinstance(node, ast.IfExp):
            return render(node.body if choice[ast.unparse(node.test)] else node.orelse, choice)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = render(node.left, choice), render(node.right, choice)
            return None if left is None or right is None else left + right
        return None

    out = [render(arg, dict(zip(tests, bits, strict=True))) for bits in itertools.product((True, False), repeat=len(tests))]
    return None if None in out else (out, list(tokens.values()))


def _raise_sites():
    import ast

    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                func = node.exc.func
                if (func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")) in _ERRORS:
                    yield f"{path.relative_to(PKG).as_posix()}:{node.lineno}", node.exc.args[0]


def test_every_error_sentence_is_catalogued_and_translated():
    """Each literal message a StackdoctorError is raised with was written from a ``sentences:`` template, so a
    Chinese user reads it in Chinese (the values, as tokens here, come through unchanged)."""
    import ast

    missing, sites = [], 0
    for where, arg in _raise_sites():
        found = _variants(arg)
        if found is None:
            src = ast.unparse(arg)
            assert any(src.startswith(k) for k in _NOT_LITERAL), f"{where}: a message the catalogue cannot check: {src}"
            continue
        sites += 1
        variants, tokens = found
        for text in variants:
            zh = catalog.sentence(text, "zh")
            if zh == text or any(t in text and t not in zh for t in tokens):
                missing.append(f"{where}: {text}")
    assert sites > 100  # the walk found the package's raise sites
    assert not missing, "add a sentences: entry to en.yaml and zh.yaml for:\n" + "\n".join(missing)


def test_ui_and_sentences_have_the_same_keys_and_fields_in_both_languages():
    for section in ("ui", "sentences"):
        en, zh = catalog.texts("en")[section], catalog.texts("zh")[section]
        assert set(en) == set(zh), (section, set(en) ^ set(zh))
        for key in en:
            assert catalog.placeholders(str(en[key])) == catalog.placeholders(str(zh[key])), (section, key)


def test_a_sentence_comes_back_in_chinese_with_its_values():
    assert catalog.sentence("--python /no/such: no such file.", "zh") == "--python /no/such：文件不存在。"
    # the most specific template wins; a value that is itself a sentence is translated too
    assert catalog.sentence("cannot write /x: it is a directory.", "zh") == "无法写入 /x：这是一个目录。"
    assert catalog.sentence("Invalid value for '--only': the value is empty", "zh") == "'--only' 的值无效：值为空"
    assert catalog.sentence("a sentence nobody wrote", "zh") == "a sentence nobody wrote"
    assert catalog.sentence("--python /x: no such file.", "en") == "--python /x: no such file."


def test_one_chinese_term_per_concept():
    """内核 is the operating system's kernel; a compute kernel is always 计算内核 (the glossary atop zh.yaml)."""
    text = (PKG / "locale" / "zh.yaml").read_text(encoding="utf-8")
    os_terms = ("内核模块", "内核驱动", "内核日志", "内核更新", "当前内核", "运行中内核", "内核 {kernel}")
    lines = [line.strip() for line in text.splitlines() if not line.lstrip().startswith("#")]  # the glossary itself
    bare = [line for line in lines if "内核" in line.replace("计算内核", "") and not any(t in line for t in os_terms)]
    assert bare == [], bare
    ui = catalog.texts("zh")["ui"]
    assert ui["col_kernel"] == "计算内核" and ui["md_kernel"].startswith("内核 ")
    for key in ("severity", "fix", "layer"):  # labels are followed by a full-width colon in Chinese
        assert catalog.ui("label_value", "zh", label=ui[key], value="x") == f"{ui[key]}：x"
    assert ui["fix_prefix"] == "修复："
