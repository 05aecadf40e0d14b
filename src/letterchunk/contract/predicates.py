"""The text tests the rules apply: whitespace and entity folding, sentence counting, years,
evidence quotes, section references, prose and list detection, chunk ids.

See :mod:`letterchunk.contract.validate` for the decisions behind each.  The public predicates
(``entity_found``, ``quote_problem``, ``years_in``, ...) are the validator's own checks, public so
that code proposing values to the model (enrich's candidate enums) filters through the very same
test the validator applies.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from letterchunk.contract.rules import EVIDENCE_MIN_WORDS, RELATED_YEAR_RANGE

__all__ = [
    "has_text",
    "shows_text",
    "normalise_ws",
    "fold",
    "concept_key",
    "entity_text",
    "entity_found",
    "related_year_ok",
    "quote_problem",
    "section_reference_problem",
    "concept_known",
    "count_sentences",
    "years_in",
    "ends_mid_sentence",
    "count_lines",
    "has_prose",
    "LIST_ITEM",
    "list_item_value",
    "parse_id",
    "short",
    "value_key",
    "content_stems",
    "line_labels",
]

_WS = re.compile(r"\s+")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})


def has_text(text: str) -> bool:
    """``text.strip() != ""`` without copying the text: it holds a non-whitespace character
    (``str.isspace`` and ``str.strip`` agree on what whitespace is).  The validator asks it of
    every chunk's content, which can be a whole letter."""
    return bool(text) and not text.isspace()


def shows_text(text: str) -> bool:
    """Whether ``text`` holds a visible character: not only white space and invisible format
    characters (zero-width space, byte-order mark, word joiner).  Stops at the first visible
    character, the first or second of any real content."""
    return any(not c.isspace() and unicodedata.category(c) != "Cf" for c in text)


def normalise_ws(text: str) -> str:
    """Collapse every run of whitespace to one space and strip (the evidence-matching form)."""
    return _WS.sub(" ", text).strip()


def concept_key(text: str) -> str:
    """Spelling-insensitive form of a concept (case, spaces, '_' and '-' ignored): concept.case."""
    return re.sub(r"[\s_\-]+", " ", text).strip().casefold()


def _normalise_entity(text: str) -> str:
    return normalise_ws(unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold())


def fold(text: str) -> str:
    """``text`` NFKC-normalised, quotes straightened, whitespace collapsed and case-folded (the
    form the injection rules compare)."""
    return normalise_ws(unicodedata.normalize("NFKC", text).translate(_QUOTES)).casefold()


def entity_text(content: str) -> str:
    """``content`` in the form :func:`entity_found` searches (fold it once per chunk)."""
    return _normalise_entity(content)


def _word_char(text: str, at: int) -> bool:
    """``text[at]`` is what the regex ``\\w`` matches in a str pattern (a Unicode letter or
    digit, or ``_``); False outside the text."""
    return 0 <= at < len(text) and (text[at].isalnum() or text[at] == "_")


def entity_found(name: str, folded_content: str) -> bool:
    """Rule entity.not_found: ``name`` occurs at word boundaries in ``entity_text(content)``
    (no word character, ``\\w``, right before or after it).

    A plain scan rather than a regex built per name: names are many and distinct, so each
    pattern would be compiled afresh (re's cache holds 512), and that compile dominated."""
    key = _normalise_entity(name)
    if not key:
        return False
    at = folded_content.find(key)
    while at != -1:
        if not _word_char(folded_content, at - 1) and not _word_char(folded_content, at + len(key)):
            return True
        at = folded_content.find(key, at + 1)
    return False


def related_year_ok(year: int) -> bool:
    """Rule xref.year_range: ``year`` lies in :data:`RELATED_YEAR_RANGE`."""
    return RELATED_YEAR_RANGE[0] <= year <= RELATED_YEAR_RANGE[1]


def quote_problem(quote: object, normalised_content: str) -> str | None:
    """Evidence rules: "too_short", "not_found" or None for a quote against
    ``normalise_ws(content)``."""
    q = normalise_ws(quote) if isinstance(quote, str) else ""
    if len(q.split()) < EVIDENCE_MIN_WORDS:
        return "too_short"
    return None if q in normalised_content else "not_found"


def section_reference_problem(title: str, own_title: str, titles: Iterable[str]) -> str | None:
    """Rules xref.self_section / xref.unknown_section: "self", "unknown" or None.

    ``titles`` empty means the letter's sections are unknown: any other title passes.
    """
    if title == own_title:
        return "self"
    titles = titles if isinstance(titles, (set, frozenset)) else set(titles)
    return "unknown" if titles and title not in titles else None


def concept_known(concept: str, vocabulary: Iterable[str]) -> bool:
    """Rules concept.unknown / concept.case: ``concept`` is spelled as in the vocabulary."""
    return concept in vocabulary


_ABBREV = re.compile(  # the word before a '.', searched in the last 12 characters
    r"(?:\b(?:Mr|Mrs|Ms|Dr|Jr|Sr|St|Inc|Co|Corp|Ltd|No|vs|etc|approx|Bros)|\b[A-Z]|\b(?:[A-Za-z]\.){1,3}[A-Za-z])$"
)
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s+[\"'\u201c\u2018(]?[A-Z0-9])")


def count_sentences(text: str) -> int:
    """Sentences in a short summary (the rule is in the docstring of
    :mod:`letterchunk.contract.validate`)."""
    text = normalise_ws(text)
    if not text:
        return 0
    count = 1
    for m in _SENTENCE_END.finditer(text):
        if m.group(0).startswith(".") and _ABBREV.search(text[max(0, m.start() - 12) : m.start()]):
            continue
        count += 1
    return count


_YEAR4 = re.compile(r"(?<!\d)(\d{4})(?!\d)")  # "March 14,1978" counts; a superset of enrich's
_YEAR2 = re.compile(r"['\u2019](\d{2})(?!\d)")


def years_in(text: str) -> set[int]:
    """Rule year.comparison_not_found: the years ``text`` is found to hold."""
    years = {int(y) for y in _YEAR4.findall(text)}
    for yy in _YEAR2.findall(text):
        years.update((1900 + int(yy), 2000 + int(yy)))
    return years


_FOOTNOTE = re.compile(r"^\s*(?:\(\w{1,2}\)|\*+|\d{1,2}\)|\d{1,2}\s)")
_TERMINAL = re.compile(r"[.!?:;\"'\u201d\u2019)\]*\-\u2014]\s*$")
_TERMINAL_CHARS = frozenset(".!?:;\"'\u201d\u2019)]*-\u2014")  # _TERMINAL's class


def ends_mid_sentence(content: str) -> bool:
    """True when the chunk ends in a prose line without terminal punctuation.

    Prose means: the last paragraph has >= 8 words, its last line >= 4 words, and no line of it
    is indented like layout (signature blocks, tables and dates are indented 8+ spaces).
    """
    tail = content[-4000:].rstrip()  # the tail is enough: O(1) per chunk
    if not tail or tail[-1] in _TERMINAL_CHARS:
        return False  # ends in terminal punctuation (what _TERMINAL finds): most chunks
    last = tail.rsplit("\n\n", 1)[-1]
    lines = [line for line in last.split("\n") if line.strip()]
    if not lines or len(last.split()) < 8 or len(lines[-1].split()) < 4:
        return False
    if any(len(line) - len(line.lstrip(" ")) >= 8 for line in lines):
        return False
    if _FOOTNOTE.match(lines[-1]):
        return False  # table footnotes end without punctuation
    return not _TERMINAL.search(last)


_LINE = re.compile(r"\S[^\n]*")  # one match per non-blank line


def count_lines(text: str, stop: int) -> int:
    """Non-blank lines of ``text``, counting no further than ``stop`` (cheap on long chunks)."""
    n = 0
    for _ in _LINE.finditer(text):
        n += 1
        if n >= stop:
            break
    return n


_WORD = re.compile(
    r"[\"'\u201c\u2018(]?[A-Za-z][\w\u2019'\",;()/&\-]*?([.!?:]?)[\"'\u201d\u2019)]*$"
)


def has_prose(text: str) -> bool:
    """A sentence: >= 6 consecutive words starting with a letter, the last ending in . ! ? or :.

    Table rows break the run with numbers and dot leaders.  Linear in the text length.
    """
    run = 0
    for token in text.split():
        m = _WORD.match(token)
        if m is None:
            run = 0
            continue
        run += 1
        if m.group(1):
            if run >= 6:
                return True
            run = 0
    return False


LIST_ITEM = re.compile(r"^\s*\(?(\d{1,2}|[a-h])[.)]\s", re.MULTILINE)


def list_item_value(token: str) -> int:
    """The position a list marker names: ``3`` -> 3, ``c`` -> 3."""
    return int(token) if token.isdigit() else ord(token) - ord("a") + 1


_ID = re.compile(r"^(\d{4})-S(\d+)-T([123])-(\d{3})$")


def parse_id(chunk_id: str) -> tuple[int, int, int, int] | None:
    """(year, section, tier, sequence) of a chunk id, or None when it does not match."""
    m = _ID.match(chunk_id)
    return (int(m[1]), int(m[2]), int(m[3]), int(m[4])) if m else None


def short(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def value_key(text: str) -> str:
    """``text`` folded with punctuation and underscores as spaces: the form in which the
    injection rules call two values the same ("Operating Earnings:" ~ "operating earnings")."""
    return re.sub(r"[\W_]+", " ", fold(text)).strip()


# Words that ground nothing: function words, and the words a summary uses about the task.
_NOT_CONTENT = frozenset(
    """
a about above after again against all also an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers him his how i if in into is it its itself just me more most my
no nor not now of off on once only or other our ours out over own same she should so some such
than that the their them then there these they this those through to too under until up very
was we were what when where which while who whom why will with would you your
chunk letter section text summary passage
""".split()
)
_STEM = 5  # a word's first letters: "insurance" ~ "insurer", "earnings" ~ "earning"


def content_stems(text: str) -> set[str]:
    """The content words of ``text`` (folded, function words left out) cut to their first five
    letters, and its numbers of two or more digits: what rule injection.ungrounded_summary
    compares between a summary and its chunk."""
    words = re.findall(r"[^\W\d_]+|\d[\d,.]*\d", fold(text))
    out = set()
    for word in words:
        if word[0].isdigit():
            out.add(re.sub(r"[,.]", "", word))
        elif len(word) >= 3 and word not in _NOT_CONTENT:
            out.add(word[:_STEM])
    return out


# where a line's label ends: dot leaders, a run of spaces, a figure or a money sign
_LABEL_END = re.compile(r"\.{2,}|\s{2,}|[$\d(]")


def line_labels(text: str, max_words: int = 6) -> set[str]:
    """The labels of ``text``'s lines, as :func:`value_key` gives them: the words each line
    starts with before dot leaders, a wide gap or a figure, when they are at most ``max_words``
    (a table's row labels, a caption, a header)."""
    out = set()
    for line in text.splitlines():
        head = _LABEL_END.split(line.strip(), maxsplit=1)[0]
        key = value_key(head)
        if key and len(key.split()) <= max_words:
            out.add(key)
    return out
