"""What one line of cleaned letter text looks like: the per-line tests block detection uses.

A :class:`Line` carries a line's offsets and cheap features; the predicates here decide from
one line (or one cell) whether it is a table row, a rule, a numeric cell, column headers, a
header, prose, a bullet, a salutation, a separator or a sign-off line.  Each regex is guarded
by a cheap character test where that matters: detection asks them of every line of every
letter.  How the predicates combine into blocks is :mod:`letterchunk.text.blocks`.
"""

from __future__ import annotations

import re
from functools import lru_cache

# the line classifiers and patterns ``blocks`` and ``tables`` build on
__all__ = [
    "Line",
    "split_lines",
    "is_table_row",
    "numeric_cell",
    "split_cells",
    "ends_sentence",
    "is_bullet",
    "is_salutation",
    "is_separator",
    "is_rule",
    "prose_like",
    "header_like_cells",
    "headerish",
    "date_line",
    "signature_line",
    "BULLET",
    "BULLET_FIRST",
    "CLOSING_WORD",
    "END_LAST",
    "FOOTNOTE",
    "INITIALS",
    "LEADER",
    "LEADER_ONLY",
    "LETTERS2",
    "LETTERS3",
    "OPENING_SALUTATION",
    "PAREN_ANY",
    "PAREN_LINE",
    "PLAIN_NAME",
    "ROW_END",
    "SEPARATOR",
    "SEPARATOR_FIRST",
    "YEAR_CELL",
]

# three or more asterisks (ASCII "*" or the look-alikes PDFs produce: "∗" "⁎" "✱"), spaced or
# not, or a run of underscores
_STARS = "*\u2217\u204e\u2731"
SEPARATOR = re.compile(rf"^\s*(?:[{_STARS}]\s*){{3,}}$|^\s*_{{5,}}\s*$")
_UNITS_NOTE = re.compile(r"\d|[$%£€]|\b(?:millions?|billions?|thousands?|omitted|dollars)\b", re.I)
SEPARATOR_FIRST = tuple(_STARS + "_")
_RULE = re.compile(r"^\s*[-=_]{3,}(?:\s+[-=_]{3,})*\s*$")
# a dot leader: three or more dots, each maybe followed by a space (". . . .", "....."), or a
# run of ellipses.  Each branch starts with its literal so the regex engine skips to a "." or
# "…" instead of trying both branches at every character (three times faster on a long line).
LEADER = re.compile(r"\.\s?(?:\.\s?){2,}\.?|…+")
_NUMERIC = re.compile(
    r"^(?:[$£€]\s*)?[(\-–—+]?\s*(?:[$£€]\s*)?(?:\d[\d,]*(?:\.\d+)?|\.\d+)\s*(?:%|x|pts?\.?)?\)?"
    r"[%*†]?$"
)
# footnote marks after a value: "6.3%(1)", "47(2)", "205 (1)", "263,265(1)(2)"
_FOOTNOTE_MARKS = re.compile(r"(?:\s?\(\d{1,2}\)){1,3}$")
_DASH_CELL = re.compile(r"^(?:[-–—]+|-0-|N/?A|n/?a|nil|None|none)$")
LEADER_ONLY = re.compile(r"^(?:[.…]\s?){4,}$")
_CELL_SPLIT = re.compile(r"\s\s+|\t")  # as \s{2,}: a first character the engine skips to
BULLET = re.compile(r"^\s*(?:[•◦▪■□●○·Š‹›»\uf000-\uf8ff]|o(?=\s+[A-Z(“\"$])|[-–—](?=\s{2,}))\s+\S")
_SALUTATION = re.compile(r"^\s*(?:To the .{3,80}[:,]|Dear .{2,60}[:,])\s*$")
# a sign-off title standing alone (optionally after a comma: "Warren E. Buffett, Chairman")
_SIG_TITLE = re.compile(
    r"(?:(?:Vice[ -])?Chairman(?: of the Board)?(?: and (?:CEO|Chief Executive Officer))?|"
    r"President|Chief Executive Officer|CEO|Sincerely|Cordially|Yours(?: truly| sincerely)?)"
    r"[,.]?"
)
# a personal name as signed: with a middle initial ("Warren E. Buffett") or after "/s/"
_NAME = re.compile(
    r"^(?:/s/\s*[A-Z][a-z]+(?: [A-Z]\.)*(?: [A-Z][a-z]+){1,3}|[A-Z][a-z]+(?: [A-Z]\.)+"
    r"(?: [A-Z][a-z]+){1,2})(?:,? (?:Jr|Sr)\.?)?(?:, [A-Z][A-Za-z ]+)?$"
)
_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
)
# a sign-off date: "March 4, 1986", "FEBRUARY 2008", "27 February 2015", "Dated: March 1, 1990"
_DATE = re.compile(
    rf"(?:dated?:?\s*)?(?:\b{_MONTH}\s*(?:\d{{1,2}}(?:st|nd|rd|th)?\s*,\s*)?"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH},?\s+)\d{{4}}\b",
    re.IGNORECASE,
)
# a date line at a letter's top: a sign-off date, a month and year ("July, 1961"), or a
# numeric date ("1-30-61"); and a numeric date after a signed name ("Warren E. Buffett 1-30-61")
_MONTH_YEAR = re.compile(rf"{_MONTH},?\s+\d{{4}}", re.IGNORECASE)
_NUMERIC_DATE = re.compile(r"\d{1,2}[-/]\d{1,2}[-/](?:\d{4}|\d{2})")
_NAME_DATE = re.compile(r"^(?P<name>.+?)\s+\d{1,2}[-/]\d{1,2}[-/](?:\d{4}|\d{2})$")
# a salutation of any addressee at the top of a letter ("TO MY PARTNERS:", "To My Partners for
# 1964:", "Gentlemen:"); _SALUTATION is the narrower form that may stand anywhere in a letter
OPENING_SALUTATION = re.compile(
    r"^\s*(?:to (?:my|the|all|our) [\w .,'’-]{2,60}|dear [\w .,'’-]{2,60}"
    r"|(?:ladies and )?gentlemen)\s*[:,]\s*$",
    re.IGNORECASE,
)
# a closing word that a plain signed name ("Warren Buffett") may follow
CLOSING_WORD = re.compile(r"^(?:Sincerely|Cordially|Yours)\b")
PLAIN_NAME = re.compile(r"^[A-Z][a-z]+ [A-Z][a-z]+$")
# a typist's reference initials under a signature ("WEBeh", "WEB:eh", "WEB/eh")
INITIALS = re.compile(r"^[A-Z]{2,4}[:/]?[a-z]{1,3}$")
FOOTNOTE = re.compile(
    r"^\s*(?:Notes?\s*[:.]|NOTES?\b|Footnotes?\b|\*+\s*\S|\(\d{1,2}\)\s|\([a-z]\)\s|†|Sources?:)"
)
_MINOR = {
    "a", "an", "and", "as", "at", "but", "by", "for", "from", "in", "into", "is", "of", "on",
    "or", "the", "to", "vs", "vs.", "with", "versus", "its", "our", "per", "than", "via", "&",
    "–", "—", "-", "not", "be", "we", "it", "up", "how", "what", "who", "why", "when",
}  # fmt: skip
_TRAILING_MINOR = {
    "a", "an", "and", "as", "at", "but", "by", "for", "from", "in", "into", "of", "on", "or",
    "the", "to", "with", "than", "that", "which", "our", "its", "their", "is", "are", "was",
}  # fmt: skip
_SENTENCE_END = re.compile(r"[.?!:;][\"'”’)\]]*$|[\"”’]$")
_CLOSERS = "\"'”’)]"
END_LAST = frozenset(".?!:;" + _CLOSERS)  # the last character of any line ends_sentence accepts
# cheap first-character tests: a line that fails one cannot match the regex it guards
BULLET_FIRST = frozenset("•◦▪■□●○·Š‹›»o-–—")
ROW_END = frozenset("0123456789)%*")
_WIDE_GAP = re.compile(r"\S\s{3,}\S")
# a page marker ("Page 12", "- Page 3 -", "Page 3 of 10"): a page's furniture, never a title
_PAGE_MARK = re.compile(r"(?:[-–—]\s*)?page\s+\d{1,4}(?:\s+of\s+\d{1,4})?(?:\s*[-–—])?", re.I)
_GAP3 = re.compile(r"\s\s\s+")  # \s{3,}, written so the engine skips to a space
LETTERS2 = re.compile(r"[A-Za-z]{2}")
LETTERS3 = re.compile(r"[A-Za-z]{3,}")
_ABBREV_END = re.compile(r"\b(?:Inc|Co|Corp|Ltd|etc|No)\.$")
_WORD = re.compile(r"(?<![0-9A-Za-z])[A-Za-z][A-Za-z'’.&-]*")  # not the "th" of "50th"
_LEADER_AFTER = re.compile(r"[$(\d-]")
PAREN_LINE = re.compile(r"\s*\([^)]{2,40}\)\s*")
PAREN_ANY = re.compile(r"\s*\(.*\)\s*")
# a year or date column heading, maybe with a footnote mark ("2011*", "2016(1)")
YEAR_CELL = re.compile(r"(?:(?:19|20)\d\d|\d{1,2}/\d{1,2}/\d{2,4})(?:[*†‡]+|\(\d\))?")


def ends_sentence(t: str) -> bool:
    """``_SENTENCE_END.search(t) is not None`` for one line (no newline), without a regex scan:
    the line ends in a closing quote, or in sentence punctuation before closing quotes/brackets."""
    if not t:
        return False
    if t[-1] in '"”’':
        return True
    r = t.rstrip(_CLOSERS)
    return bool(r) and r[-1] in ".?!:;"


def is_bullet(ln: Line) -> bool:
    c = ln.text[:1]
    return (
        bool(c)
        and (c in BULLET_FIRST or "\uf000" <= c <= "\uf8ff")
        and BULLET.match(ln.raw) is not None
    )


def is_salutation(ln: Line) -> bool:
    return ln.text.startswith(("To the ", "Dear ")) and _SALUTATION.match(ln.raw) is not None


def is_separator(ln: Line) -> bool:
    return ln.text[:1] in SEPARATOR_FIRST and SEPARATOR.match(ln.raw) is not None


class Line:
    """One line of the text with its offsets and cheap features, computed once."""

    __slots__ = ("start", "end", "raw", "text", "blank", "indent")

    def __init__(self, start: int, raw: str) -> None:
        text = raw.strip()
        self.start = start  # offset of the line's first character in the text
        self.end = start + len(raw)  # offset just past the line (before "\n")
        self.raw = raw
        self.text = text
        self.blank = not text
        self.indent = len(raw) - len(raw.lstrip()) if text else 0


def split_lines(text: str) -> list[Line]:
    """The text's lines, each as :class:`Line` (the same fields ``Line(start, raw)`` sets).

    Built without calling ``Line.__init__`` per line: a letter has thousands of lines and
    block detection splits every letter, so the per-line call was a tenth of its time."""
    out: list[Line] = []
    append, new = out.append, object.__new__
    pos = 0
    for raw in text.split("\n"):
        ln = new(Line)
        n = len(raw)
        ln.start = pos
        ln.end = pos + n
        ln.raw = raw
        t = ln.text = raw.strip()
        ln.blank = not t
        ln.indent = n - len(raw.lstrip()) if t else 0
        append(ln)
        pos += n + 1
    return out


# --------------------------------------------------------------------------------------------
# line predicates


@lru_cache(maxsize=4096)
def numeric_cell(cell: str) -> bool:
    """A cell that holds one value: a number (maybe with a currency sign, a sign, parentheses,
    a percent or footnote marks), or a dash / "N/A" for none.

    Memoised (bounded LRU): block detection, then table parsing, ask it of the same cells two
    to four times (a row's test, its split, the side-by-side test), and a letter's cells repeat
    ("$", "1985", "—"); the bound keeps memory flat over a corpus.  ``cache_clear`` forgets."""
    c = cell.strip()
    if not c:
        return False
    if _NUMERIC.match(c) is not None or _DASH_CELL.match(c) is not None:
        return True
    if c[-1] == ")":  # a value with footnote marks (checked only then: the match is costly)
        bare = _FOOTNOTE_MARKS.sub("", c)
        return bool(bare) and bare != c and _NUMERIC.match(bare) is not None
    return False


def split_cells(s: str) -> list[str]:
    return [c for c in _CELL_SPLIT.split(s.strip()) if c]


def is_table_row(raw: str) -> bool:
    """A line that is a table row by itself (see module docstring)."""
    s = raw.strip()
    if len(s) < 4:
        return False
    if "  " not in s and "\t" not in s and ".." not in s and ". ." not in s and "…" not in s:
        # a row needs column gaps, a leader, or a run of values
        return s[-1] in ROW_END and _numeric_tail(s) >= 3
    if s[0] in "-=_" and _RULE.match(raw):
        return False
    m = None
    if "." in s or "…" in s:  # a leader needs one
        leaders = list(LEADER.finditer(s))
        m = leaders[-1] if leaders else None  # the last leader on the line
    if m is not None:
        after = s[m.end() :].strip()
        before = s[: m.start()].strip()
        if not after and m.group(0).count(".") + m.group(0).count("…") * 3 < 4:
            pass  # a trailing ellipsis ("losing theirs . . .") is not a leader
        elif before:
            if not after:
                return True
            # a leader with words after it and no number is an ellipsis in prose; the first
            # cell after the leader decides most rows, so the others are split only when asked
            if numeric_cell(_CELL_SPLIT.split(after, 1)[0]) or (
                _LEADER_AFTER.match(after)
                and (len(cells := split_cells(after)) >= 2 or any(map(numeric_cell, cells)))
            ):
                return True
    if _numeric_tail(s) >= 3:
        return True  # "Total earnings $ 85,945 $ 68,632 $ 70,146": values set with single spaces
    cells = split_cells(s)
    if len(cells) < 2:
        return False
    if not numeric_cell(cells[-1]):
        return False  # both rules below need a value in the last cell
    if any(map(numeric_cell, cells[:-1])):
        return True  # two or more values, the last one at the end
    if _WIDE_GAP.search(s) and len(cells[0]) <= 60:
        # label + one value, e.g. "Total ...   $ 1,234" with a wide gap
        words = len(s.split())
        return words <= 12
    return False


def _numeric_tail(s: str) -> int:
    """How many numeric values end the line (a lone "$" joins the number after it)."""
    if not s or s[-1] not in "0123456789)%*":
        return 0
    # the last few words decide most lines (a prose line ending "in 1985" stops at "in"):
    # only those are split off; the whole line is split when all of them are values
    words = s.rsplit(None, 4)
    if len(words) == 5:
        n, stopped = _count_tail(words[1:])
        if stopped:
            return n
        words = s.split()
    return _count_tail(words)[0]


def _count_tail(words: list[str]) -> tuple[int, bool]:
    """(values ending ``words``, whether a word that is no value stopped the count)."""
    n = 0
    for tok in reversed(words):
        if tok in ("$", "£", "€"):
            continue
        if numeric_cell(tok) and any(map(str.isdigit, tok)):
            n += 1
        else:
            return n, True
    return n, False


def is_rule(raw: str) -> bool:
    return _RULE.match(raw) is not None and not SEPARATOR.match(raw)


def prose_like(raw: str) -> bool:
    """A line that reads as running text: long and without column gaps."""
    s = raw.strip()
    return len(s) >= 50 and _WIDE_GAP.search(s) is None and len(s.split()) >= 8


def header_like_cells(raw: str, width: int = 40) -> bool:
    s = raw.strip()
    if not s:
        return False
    parts = [p for p in _GAP3.split(s) if p]
    return len(parts) >= 2 and all(len(p) <= width for p in parts)


def _title_case(s: str) -> bool:
    words: list[str] = _WORD.findall(s)
    if not words:
        return False
    if s.upper() == s and sum(c.isalpha() for c in s) >= 3:
        return True
    major = [w for w in words if w.lower() not in _MINOR]
    if not major:
        return False
    caps = sum(w[0].isupper() for w in major)
    return words[0][0].isupper() and caps / len(major) >= 0.8


def headerish(raw: str) -> bool:
    s = raw.strip()
    if not (2 <= len(s) <= 100) or not (s[0].isupper() or s[0] in "“\"'‘(" or s[0].isdigit()):
        return False
    # _ABBREV_END ends the line: looked for in its last five characters ("Corp."), not along it
    if s[-1] in ".,;" and not _ABBREV_END.search(s, max(0, len(s) - 5)):
        return False
    if not LETTERS2.search(s) or _PAGE_MARK.fullmatch(s):
        return False
    nwords = len(s.split())
    if nwords > 14:
        return False
    if _GAP3.search(s):  # column gaps: a table header, not a title
        return False
    c = s[0]
    if (c == "T" or c == "D") and _SALUTATION.match(raw):
        return False
    if (c in BULLET_FIRST or "\uf000" <= c <= "\uf8ff") and BULLET.match(raw):
        return False
    if s.endswith(":") and nwords > 8:
        return False
    words = s.rstrip(":?!").split()
    if words and words[-1] in _TRAILING_MINOR:
        return False  # a title does not end with "the", "and", "of"...: a wrapped prose line
    if _numeric_tail(s) >= 2:
        return False
    if (
        s[-1] in ROW_END or "  " in s or "\t" in s or ".." in s or ". ." in s or "…" in s
    ) and is_table_row(raw):
        return False
    s = s.rstrip(":?")
    if s.endswith(")") and "(" in s[1:]:
        # a title with a subtitle in parentheses: "“The Bet” (or how your money finds its way
        # to Wall Street)"; the title before it decides.  Not a units note ("Balance Sheet
        # 12/31/12 (in millions)" is a table caption).
        cut = s.rindex("(")
        head, note = s[:cut].rstrip(), s[cut + 1 : -1]
        if head and len(note.split()) >= 3 and not _UNITS_NOTE.search(note):
            return _title_case(head)
    return _title_case(s)


def date_line(t: str) -> bool:
    """A line holding only a date ("January 24, 1962", "July 11th, 1968", "July, 1961",
    "1-30-61")."""
    t = t.strip().rstrip(".")
    return bool(_DATE.fullmatch(t) or _MONTH_YEAR.fullmatch(t) or _NUMERIC_DATE.fullmatch(t))


def signature_line(raw: str) -> str | None:
    """'name' | 'title' | 'date' | 'name+title' | 'name+date' when the line is a sign-off
    line, else None."""
    s = raw.strip()
    if not s or len(s) > 90:
        return None
    if not ("A" <= s[0] <= "Z" or s[0] == "/" or s[0].isdigit()):
        return None  # a date, a title and a name start with a capital ("/s/", "27 February")
    if s[0].isdigit() and _DATE.match(s) is None:
        return None  # a line that starts with a number is a sign-off line only as a date
    if len(s) > 45 and "   " not in s and len(raw) - len(raw.lstrip()) < 10:
        return None  # a sign-off line is short, indented, or split in columns
    parts = [p for p in _GAP3.split(s) if p]
    kinds = set()
    for p in parts:
        if _DATE.fullmatch(p.rstrip(".")):
            kinds.add("date")
        elif _SIG_TITLE.fullmatch(p.removeprefix("/s/").strip()):
            kinds.add("title")
        elif (m := _NAME_DATE.match(p)) is not None and _NAME.match(m.group("name")):
            kinds.update(("name", "date"))  # "Warren E. Buffett 1-30-61"
        elif _NAME.match(p) and len(p.split()) <= 6:
            kinds.add("name")
            tail = p.split(",", 1)[1].strip() if "," in p else ""
            if tail and _SIG_TITLE.fullmatch(tail):  # "Warren E. Buffett, Chairman"
                kinds.add("title")
        else:
            return None
    if {"title", "name"} <= kinds:
        return "name+title"
    if {"name", "date"} <= kinds:
        return "name+date"
    if "title" in kinds:
        return "title"
    if "name" in kinds:
        return "name"
    return "date" if kinds else None
