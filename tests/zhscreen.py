"""What counts as an untranslated English word on a Chinese screen (issue 46 item 1).

A zh screen may show values: a command line, a flag, a path or URL, a version or anything with a digit, a
`code in backticks`, a 'quoted' value, an identifier (``linux_x86_64``, ``torch.cuda``), a {field}, a finding code, an
acronym in capitals (CPU, CANN, PEP), a metavar (PATH, VERSION). Every other word of Latin letters must be one the
glossary keeps as written (``stackdoctor/locale/glossary.yaml``: ``keep:``, the names of products, tools and
packages, and the terms whose one Chinese rendering is the English word, such as wheel); anything else is English
left on a Chinese screen. Pure text in, words out, so a test says exactly which words are left."""

from __future__ import annotations

import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GLOSSARY = REPO / "stackdoctor" / "locale" / "glossary.yaml"

# a value, never a word of a sentence
_VALUE = re.compile(
    r"`[^`]*`"  # code in backticks
    r"|\S*<[^>\s]+>\S*"  # a name with a <placeholder> in it: stackdoctor-build-<time>.log
    r"|'[^'\s][^']*'"  # a 'quoted' value (never an apostrophe inside a word: that one has a letter before it)
    r"|\{[^}]*\}"  # a {field}
    r"|https?://\S+|file://\S+"  # a URL
    r"|\S*[/\\=]\S*"  # a path, KEY=value
    r"|(?<![\w-])--?[A-Za-z][\w.-]*"  # a flag
    r"|[\w.+-]*\d[\w.+-]*"  # a version, a number, anything with a digit (sm_89, cu126, gfx1100, 2.13.0+cpu)
    r"|\w+(?:[._]\w+)+(?:\(\))?"  # an identifier: linux_x86_64, torch.cuda.is_available(), report.json
    r"|<[^>\s]+>"  # a <placeholder>
)
# a command line as the screen shows one (the plan's command, a route's): a program, not a sentence
_COMMAND_LINE = re.compile(r"^(\$ |env |[A-Z_]+=|/|python|stackdoctor |pip |uv |conda |mamba |micromamba |pixi |export |& |\.venv)")
# --help's usage line: the command path and its metavars
_USAGE = re.compile(r"^用法：")
# a name in the first column of a table or of --help's lists (a package, a command, an option), 2+ spaces after it
_TERM = re.compile(r"^[^\s\u4e00-\u9fff]+(?=\s{2,}\S)")
# what others said, quoted as they said it: the OS's error text ([Errno 111] Connection refused), click's default value
# ([默认：fleet]), the compatibility matrix's own notes on what it does not know (data with its sources, compat_matrix/)
_QUOTED = re.compile(r"\[Errno \d+\][^；;）)]*|\[默认：[^\]]*\]|(?:有未经核实的信息|兼容性矩阵中的未知信息)：.*$")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*[A-Za-z]|[A-Za-z]")


@functools.cache
def glossary() -> dict:
    import yaml

    return yaml.safe_load(GLOSSARY.read_text(encoding="utf-8"))


@functools.cache
def kept_words() -> frozenset[str]:
    """The words a Chinese screen shows as written: the glossary's ``keep:`` and every finding code."""
    from stackdoctor.rules import catalog

    words = {str(w) for w in glossary().get("keep") or []}
    words |= {str(t["zh"]) for t in (glossary().get("terms") or {}).values() if re.fullmatch(r"[A-Za-z][\w-]*", str(t["zh"]))}
    return frozenset(words | set(catalog.codes()))


@functools.cache
def kept_phrases() -> tuple[str, ...]:
    """The glossary's kept names that are not one plain word ("Data Center GPU Max", "#wrong", "µs"), longest first."""
    return tuple(sorted((w for w in kept_words() if not re.fullmatch(r"[A-Za-z0-9_-]+", w)), key=len, reverse=True))


def _allowed(word: str) -> bool:
    if word in kept_words():
        return True
    if re.fullmatch(r"[A-Z][A-Z0-9]*s?", word):  # an acronym, a metavar or a unit: CPU, GPUs, CANN, PATH, N, B
        return True
    # a name written in more than one piece (torch-npu, pytorch-cuda, driver-too-old): each kept piece, or a code
    return "-" in word and all(part in kept_words() or re.fullmatch(r"[A-Z][A-Z0-9]+", part) for part in word.split("-") if part)


def english_words(text: str) -> list[str]:
    """The English words left in ``text`` (a zh screen), in order, each once per line it appears on."""
    out: list[str] = []
    for line in text.splitlines():
        s = re.sub(r"^[-+!•·✓✗│|└├─ ]*[-+!•·✓✗](?=\s)|^[│|└├─ ]+", "", line.strip()).strip()  # a list mark, never a flag's dashes
        if _COMMAND_LINE.match(s):
            continue
        if _USAGE.match(s):  # click's usage line: a command line
            continue
        s = _QUOTED.sub(" ", _TERM.sub("", s))
        for phrase in kept_phrases():
            s = s.replace(phrase, " ")
        s = _VALUE.sub(" ", s)
        for word in _WORD.findall(s):
            if not _allowed(word.strip("'’")):
                out.append(word)
    return out


def english_sentences(text: str) -> list[str]:
    """The lines of ``text`` that still hold an English word (how many sentences a zh screen left in English)."""
    return [line.strip() for line in text.splitlines() if english_words(line)]
