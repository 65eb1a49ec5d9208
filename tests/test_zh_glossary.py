"""Issue 46 item 1: one Chinese rendering per technical term. stackdoctor/locale/glossary.yaml names each term's one
rendering and the variants a translator might reach for; no zh text (zh.yaml, an accelerator kind's locale/zh.yaml)
may use a variant (before: 次版本兼容 in explain, 小版本兼容 in install), and each rendering is in use."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
GLOSSARY = yaml.safe_load((REPO / "stackdoctor" / "locale" / "glossary.yaml").read_text(encoding="utf-8"))
ZH_FILES = sorted((REPO / "stackdoctor").rglob("locale/zh.yaml"))


def _strings(node: object, where: str):
    """Every text of a locale file, with its key path (comments are not texts)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, f"{where}[{i}]")
    elif isinstance(node, str):
        yield where, node


def zh_texts() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for path in ZH_FILES:
        out += list(_strings(yaml.safe_load(path.read_text(encoding="utf-8")), path.relative_to(REPO).as_posix()))
    return out


def test_the_glossary_is_well_formed():
    terms = GLOSSARY["terms"]
    assert len(terms) >= 20 and {"minor-version compatibility", "driver", "wheel", "variant", "mirror", "what-if", "witness"} <= {
        t.split(" (")[0] for t in terms}
    for term, entry in terms.items():
        assert entry["zh"] and isinstance(entry.get("avoid"), list) and entry["avoid"], term
        assert entry["zh"] not in entry["avoid"], term
    assert len(ZH_FILES) >= 2  # stackdoctor's and Ascend's


@pytest.mark.parametrize("term", sorted(GLOSSARY["terms"]))
def test_zh_texts_use_the_one_rendering(term):
    entry = GLOSSARY["terms"][term]
    texts = zh_texts()
    wrong = [f"{where}: {variant!r} in {text[:120]!r}" for where, text in texts for variant in entry["avoid"] if variant in text]
    assert not wrong, f"{term} is {entry['zh']!r} in Chinese (stackdoctor/locale/glossary.yaml):\n" + "\n".join(wrong)
    assert any(entry["zh"] in text for _, text in texts), f"{term}: {entry['zh']!r} is used nowhere; drop it from the glossary"


def test_the_check_fails_on_a_variant():
    """The check itself: a text with the other rendering of minor-version compatibility is caught."""
    avoid = GLOSSARY["terms"]["minor-version compatibility"]["avoid"]
    assert any(v in "满足 CUDA 12.x 的小版本兼容下限" for v in avoid)
    assert not any(v in "满足 CUDA 12.x 的次版本兼容下限" for v in avoid)
