"""Folding prose to a screen's width by display cells: between words, and between CJK characters (which
Chinese breaks anywhere), never inside a word; a word wider than the whole line is the one thing cut.
Pure: text in, lines out (the console's width is the caller's)."""

from __future__ import annotations

import re
import unicodedata

# a unit that may not be split: a run of non-space non-CJK characters or one CJK character, each with the
# closing punctuation that must stay on its line (，。、；：！？）」』》…)
_CLOSERS = "，。、；：！？）」』》…,.;:!?)"
_UNIT = re.compile(r"\s+|[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f][" + re.escape(_CLOSERS) + r"]*|[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f]+[" + re.escape(_CLOSERS) + r"]*")


def _cells(s: str) -> int:
    from rich.cells import cell_len

    return cell_len(s)


def _wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


def reflow(text: str) -> list[list[tuple[str, str]]]:
    """Paragraphs of ``text`` (separated by blank lines), each a list of items ``(lead, text)``: the hard-wrapped
    source lines of a paragraph, or of a list item (``  1. ...``, ``- ...``, ``lead`` its indent and marker),
    joined back into one, with a space between two words and nothing where either side is a CJK character."""
    paras: list[list[tuple[str, str]]] = []
    for block in re.split(r"\n[ \t]*\n", text.strip("\n")):
        items: list[tuple[str, str]] = []
        for raw in block.splitlines():
            line = raw.strip()
            mark = _MARKER.match(raw)
            if mark:
                items.append((mark.group(0), raw[mark.end():].strip()))
            elif line and items:
                lead, joined = items[-1]
                items[-1] = (lead, joined + ("" if _wide(joined[-1]) or _wide(line[0]) else " ") + line)
            elif line:
                items.append(("", line))
        paras.append(items)
    return paras


_MARKER = re.compile(r"[ \t]*(?:\d+[.)]|[-*•])[ \t]+")


def wrap(text: str, width: int, indent: str = "", hang: str | None = None) -> list[str]:
    """``text`` (one paragraph) in lines of at most ``width`` cells: the first after ``indent``, the others after
    ``hang`` (default ``indent``, as wide); breaks only at spaces and beside CJK characters."""
    hang = indent if hang is None else hang
    lines: list[str] = []
    cur, prefix = "", indent
    for unit in _UNIT.findall(text):
        if unit.isspace():
            if cur:
                cur += " "
            continue
        room = width - _cells(prefix)
        if cur and _cells(cur + unit) > room:
            lines.append(prefix + cur.rstrip())
            cur, prefix = "", hang
            room = width - _cells(prefix)
        while _cells(unit) > room > 0 and not cur:  # one word wider than a line: the only cut
            head = _fit(unit, room)
            lines.append(prefix + head)
            unit, prefix = unit[len(head):], hang
            room = width - _cells(prefix)
        cur += unit
    lines.append(prefix + cur.rstrip())
    return lines


def _fit(word: str, room: int) -> str:
    out = ""
    for ch in word:
        if _cells(out + ch) > room:
            break
        out += ch
    return out or word[:1]
