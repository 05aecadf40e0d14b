"""Sentences of a chunk, abbreviation-aware: the units evidence quotes are chosen from.

A sentence ends at ``.``, ``!`` or ``?`` (with any closing quotes or brackets) followed by
whitespace and a capital, a digit or an opening quote.  A period does not end a sentence when
it closes a common English abbreviation (:data:`ABBREVIATIONS`: titles such as "Mr.", corporate
forms such as "Inc." and "Co.", "U.S.", "e.g.", months) or an initial ("E.", "R.C."), because
the letters are full of "Mr. Chace", "U.S. Steel" and "Berkshire Hathaway Inc."; a splitter that
stops there cuts a true sentence in two, and neither half can then be quoted as evidence.
"""

from __future__ import annotations

import re

__all__ = ["ABBREVIATIONS", "sentences", "sentence_spans"]

# a period after one of these (compared in lower case) does not end a sentence
ABBREVIATIONS = frozenset(
    """mr mrs ms messrs dr sr jr st mt sir prof gen gov sen rep rev hon capt col lt sgt
    inc corp co cos ltd llc plc bros assn dept est approx vs etc no nos vol fig
    jan feb mar apr jun jul aug sep sept oct nov dec
    e.g i.e u.s u.k u.s.a a.m p.m n.a""".split()
)
_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s+[\"'\u201c\u2018(\[]?[A-Z0-9])")
_INITIALS = re.compile(r"(?:[A-Za-z]\.)*[A-Z]")  # "E" of "E.", "R.C" of "R.C.", "U.S"
_OPENERS = "(\"'\u201c\u2018["
_WS = re.compile(r"\s+")


def _abbreviation_before(text: str, dot: int) -> bool:
    """True when the '.' at ``dot`` closes an abbreviation or an initial.

    The word is the last whitespace-free run before ``dot`` (blanks right before the period
    skipped), found by walking back from ``dot``: the walk reads only that word and those blanks,
    never the text before them, so splitting a paragraph costs time in proportion to its length
    (copying or scanning everything before each period made a long paragraph quadratic)."""
    end = dot
    while end > 0 and text[end - 1].isspace():
        end -= 1
    if end == 0:
        return False
    start = end - 1
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    word = text[start:end].lstrip(_OPENERS)
    return word.lower() in ABBREVIATIONS or bool(_INITIALS.fullmatch(word))


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text``, in order, without surrounding blanks."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _END.finditer(text):
        if text[match.start()] == "." and _abbreviation_before(text, match.start()):
            continue
        if text[start : match.end()].strip():
            spans.append((start, match.end()))
        start = match.end()
        while start < len(text) and text[start].isspace():
            start += 1
    if text[start:].strip():
        end = len(text.rstrip())
        spans.append((start, end))
    return spans


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` with whitespace collapsed to single spaces, in order."""
    flat = _WS.sub(" ", text).strip()
    return [flat[s:e] for s, e in sentence_spans(flat)]
