"""Block detection: cleaned letter text -> an ordered list of :class:`Block`.

Every non-blank line of the cleaned text belongs to exactly one block, so chunks made of whole
blocks tile the letter.  Block spans exclude leading/trailing whitespace.

Kinds and the rule that finds each (general rules, never lists of known titles):

``table``      A run of *table rows* -- lines with a dot leader (``. . . .``, ``.....``,
               ``……``; a 3-dot ellipsis ending a line is not one) followed by a value, lines
               with at least two numeric cells split by runs of 2+ spaces (column-aligned
               numbers without leaders), or lines ending in a run of 3+ values
               (``$ 85,945 $ 68,632 $ 70,146``) -- plus rule lines (``-----``, ``=====``).
               Rows may be separated by up to two blank lines and by up to three non-prose
               lines (wrapped row labels, sub-totals, ``(in millions)``); a single long label
               line directly between two rows is a wrapped row too.  Upward it takes
               column-header lines (cells split by 3+ spaces, short or far-indented lines
               without sentence punctuation) and a caption directly above (short, no sentence
               punctuation at the end) -- so a caption that looks like a section header
               belongs to the table.  A caption one blank line above the column headers is a
               *detached caption*; it also opens a section.  Downward it takes footnotes that
               follow within one blank line (``Note:``, ``Notes:``, ``Footnote``, ``*``,
               ``(1)``, ``(a)``, ``Source:``) up to the end of their sentence/paragraph, after
               the rest of a row label wrapped under the last row (``Annual`` over
               ``Compounded Rate``: at most two short unended lines, then a blank line).  At
               least two rows (or one row and a rule line) are needed.
``separator``  A line of asterisks only (``* * *``, ``*   *   *``, ``************``) or of
               underscores only.  Text directly after it is a new block.
``signature``  A run of sign-off lines (at most one blank line between them): a signed name
               (with a middle initial or ``/s/``; a plain first and last name directly under
               a closing word such as ``Cordially,``), a title (Chairman, President,
               Sincerely...), a date -- with a name and a title or date, a title and a date,
               or a name with a title or date on one line (``Warren E. Buffett, Chairman``,
               ``Warren E. Buffett 1-30-61``).  A typist's initials (``WEBeh``) within one
               blank line under the run belong to it.
``letterhead`` A letter's opening at the top of the text: short indented letterhead lines
               (with a label such as ``1961 Letter``), then a date line (``July, 1961``; the
               partners' names directly under it belong to it).  The salutation of any
               addressee that follows (``TO MY PARTNERS:``) is a ``salutation`` block.  An
               opening needs a date line or two letterhead lines, one in capitals; a title,
               salutation or caption at the margin opens none (see :func:`_mark_opening`).
``salutation`` ``To the Shareholders of ...:`` / ``Dear ...,`` on a line of its own.
``header``     A short line (at most 100 characters, at most 14 words) with letters, starting
               with a capital, in Title Case (80% of the major words capitalised) or ALL CAPS,
               not ending in sentence punctuation (a colon or question mark is allowed) or in a
               function word (``the``, ``and``, ``of``: a wrapped prose line), not a table row,
               not a colon line whose enumeration continues its sentence (``Harry:`` over
               ``(1) took the inventory…``),
               preceded by a blank line, a separator, a table, the start, or a line ending a
               sentence (a page number between them was removed); the next line may be blank
               or not.  A header line directly followed by another header line (no blank) forms
               one header (title and subtitle).
``list``       Bullet items: a line starting with a bullet glyph (``•``, ``o``, ``Š``, ``‹``,
               private-use glyphs, ``-``/``–`` followed by spaces) and its continuation lines;
               items separated by blank lines stay one list.
``paragraph``  Everything else, split at blank lines AND at a line indented deeper than the
               paragraph's other lines when the line before ends a sentence (paragraphs that
               run into each other with no blank line).  A paragraph continues across blank
               lines when its sentence does: the line before ends without punctuation and the
               next line starts in lowercase at the margin (a page break).  Indented quoted
               prose stays prose: it has no numeric columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypedDict

from letterchunk.text.lines import (
    BULLET,
    BULLET_FIRST,
    CLOSING_WORD,
    END_LAST,
    FOOTNOTE,
    INITIALS,
    LEADER_ONLY,
    LETTERS2,
    LETTERS3,
    OPENING_SALUTATION,
    PAREN_ANY,
    PAREN_LINE,
    PLAIN_NAME,
    ROW_END,
    SEPARATOR,
    SEPARATOR_FIRST,
    YEAR_CELL,
    Line,
    date_line,
    ends_sentence,
    header_like_cells,
    headerish,
    is_bullet,
    is_rule,
    is_salutation,
    is_separator,
    is_table_row,
    numeric_cell,
    prose_like,
    signature_line,
    split_cells,
    split_lines,
)

__all__ = ["Block", "Line", "split_lines", "detect_blocks", "is_table_row", "numeric_cell"]


# an enumerated item that continues a sentence: "(1) took the inventory…", "a) sold…"
_LOWER_ITEM = re.compile(r"^\s*\(?(?:\d{1,2}|[a-z])\)\s+[a-z]")


class BlockMeta(TypedDict, total=False):
    """What block detection records about a table block."""

    line_start: int  # char offset of the table's first line (its indentation included)
    rows: list[bool]  # is_table_row of each line, so parse_table need not ask again
    detached_caption: bool  # the caption stands one blank line above the column headers


@dataclass
class Block:
    # paragraph | header | table | list | separator | signature | salutation | letterhead
    kind: str
    first: int  # index of first line
    last: int  # index of last line (inclusive)
    start: int  # char offset of first non-space character
    end: int  # char offset just past the last non-space character
    title: str = ""  # header text, or table caption
    meta: BlockMeta = field(default_factory=BlockMeta)


# --------------------------------------------------------------------------------------------
# detection


def _find_tables(lines: list[Line], detached: set[int]) -> tuple[list[tuple[int, int]], list[bool]]:
    """Line ranges of tables, and ``is_table_row`` of every line; ``detached`` receives the line
    indices of captions that stand one blank line above the column headers (such a caption
    opens a section).

    Tables are found in two passes: runs of rows first (:func:`_row_spans`), then each run
    grows up over its column headers and caption and down over its footnotes, never into the
    table before it.
    """
    row = _row_flags(lines)
    rule = _rule_flags(lines)
    strong = [r or u for r, u in zip(row, rule, strict=True)]
    out: list[tuple[int, int]] = []
    prev_end = -1
    for first, last in _row_spans(lines, row, rule, strong):
        top = _extend_up(lines, first, prev_end, detached)
        bottom = _extend_down(lines, strong, last)
        out.append((top, bottom))
        prev_end = bottom
    return out, row


def _row_flags(lines: list[Line]) -> list[bool]:
    """``is_table_row`` of every line, asked only of lines that can be rows (a value at the
    end, a gap, a leader): the full test is the costly one."""
    return [
        len(t) >= 4
        and (t[-1] in ROW_END or "  " in t or "\t" in t or ".." in t or ". ." in t or "…" in t)
        and is_table_row(ln.raw)
        for ln in lines
        for t in (ln.text,)
    ]


def _rule_flags(lines: list[Line]) -> list[bool]:
    """Rule lines, and dot-leader lines with nothing else (a row whose leader wrapped)."""
    return [
        (c := ln.text[:1]) in _RULE_FIRST  # one set test rejects almost every line
        and (
            (c in "-=_" and is_rule(ln.raw))
            or (c in ".…" and LEADER_ONLY.match(ln.text) is not None)
        )
        for ln in lines
    ]


_RULE_FIRST = frozenset("-=_.…")  # the first characters of a rule or a lone dot leader


def _row_spans(
    lines: list[Line], row: list[bool], rule: list[bool], strong: list[bool]
) -> list[tuple[int, int]]:
    """(first, last) line of each run of rows: rows (or rules, ``strong``) joined over short
    gaps, kept when it holds two rows or one row with a rule."""
    n = len(lines)
    spans: list[tuple[int, int]] = []
    i = 0
    while i < n:
        if not row[i]:
            i += 1
            continue
        first = last = i
        nrows = 1
        j = i + 1
        while j < n:
            k, blanks, soft = _gap_end(lines, strong, j)
            if not (k < n and strong[k] and blanks <= 2 and soft <= 3):
                break
            if blanks and soft and _new_table_after_gap(lines, j, k):
                break
            last = k
            nrows += row[k]
            j = k + 1
        if nrows >= 2 or (nrows >= 1 and any(rule[first : last + 1])):
            spans.append((first, last))
        i = last + 1
    return spans


def _gap_end(lines: list[Line], strong: list[bool], j: int) -> tuple[int, int, int]:
    """(index where the gap from ``j`` ends, blank lines in it, soft lines in it).

    The look-ahead crosses at most 2 blanks and 3 soft lines; it stops early at a separator
    and at prose, except a long row label wrapped onto its own line directly above a row.
    """
    n = len(lines)
    k, blanks, soft = j, 0, 0
    while k < n and not strong[k]:
        if lines[k].blank:
            blanks += 1
        elif is_separator(lines[k]):
            break
        elif prose_like(lines[k].raw):
            wrapped = k + 1 < n and strong[k + 1] and not ends_sentence(lines[k].text)
            if not wrapped:
                break
            soft += 1
        else:
            soft += 1
        if blanks > 2 or soft > 3:
            break
        k += 1
    return k, blanks, soft


def _new_table_after_gap(lines: list[Line], j: int, k: int) -> bool:
    """Whether the soft lines ``j..k-1`` after a blank line start a new table: one of them is
    long and not cells (a caption, not a wrapped label), one looks like column headings, or
    line ``k`` is a row of years."""
    return (
        not _cells_align(lines, j, k)
        or any(header_like_cells(lines[x].raw) for x in range(j, k))
        or _heading_row(lines[k].text)
    )


def _extend_up(lines: list[Line], first: int, prev_end: int, detached: set[int]) -> int:
    """The top line of the table whose rows start at ``first``: column headers (short, unended
    or indented lines, rules) directly above, then a caption above those.

    At most one blank line is crossed at a time; nothing above ``prev_end`` (the previous
    table's last line) is taken.  A title-like caption that stands one blank line above the
    headers goes into ``detached``: it opens a section.
    """
    top = first
    k = first - 1
    blanks = 0
    while k > prev_end:
        raw = lines[k].raw
        if lines[k].blank:
            blanks += 1
            if blanks > 1:
                break
            k -= 1
            continue
        if _header_line_above(lines[k]):
            top = k
            blanks = 0
            k -= 1
            continue
        took_headers = top < first
        alone = k == 0 or lines[k - 1].blank
        if _caption_like(raw) and (
            blanks == 0 or (took_headers and alone and (headerish(raw) or len(lines[k].text) <= 60))
        ):
            top = k
            if blanks and headerish(raw):
                detached.add(k)
        break
    return top


def _header_line_above(ln: Line) -> bool:
    """A line above a table's rows that belongs to its column headers: header-like cells, a
    rule, an indented short line or a parenthesised note, and neither prose nor a signature."""
    raw = ln.raw
    unended = not ends_sentence(ln.text)
    headerish_row = (
        (header_like_cells(raw, 60) and unended)
        or is_rule(raw)
        or (ln.indent >= 8 and len(ln.text) <= 60 and unended)
        or (ln.indent >= 20 and unended)
        or PAREN_LINE.fullmatch(raw) is not None
    )
    return headerish_row and not prose_like(raw) and signature_line(raw) is None


def _extend_down(lines: list[Line], strong: list[bool], last: int) -> int:
    """The bottom line of the table whose rows end at ``last``: each footnote that follows
    (after at most one blank line) with its continuation lines."""
    n = len(lines)
    bottom = _wrapped_label_end(lines, last)
    k = bottom + 1
    while k < n:
        kk = k
        if kk < n and lines[kk].blank:
            kk += 1
        if not (kk < n and FOOTNOTE.match(lines[kk].raw) and not is_separator(lines[kk])):
            break
        bottom = _footnote_end(lines, strong, kk)
        k = bottom + 1
    return bottom


def _wrapped_label_end(lines: list[Line], last: int) -> int:
    """The last line of the table whose last row is ``last``, with the rest of that row's label
    when it wrapped under the row ("Annual" over "Compounded" over "Rate"): at most two short
    lines directly under a row that starts with a label, ending no sentence, with a blank line
    or the end of the text after them."""
    n = len(lines)
    if not lines[last].text[:1].isalpha():
        return last
    k = last
    while (
        k + 1 < n
        and k - last < 2
        and not lines[k + 1].blank
        and len(lines[k + 1].text) <= 30
        and len(lines[k + 1].text.split()) <= 3
        and not ends_sentence(lines[k + 1].text)
        and lines[k + 1].text[:1].isalpha()
    ):
        k += 1
    if k > last and (k + 1 >= n or lines[k + 1].blank):
        return k
    return last


def _footnote_end(lines: list[Line], strong: list[bool], kk: int) -> int:
    """The last line of the footnote starting at ``kk``: lines follow until a blank, a row, a
    separator or salutation, or a finished sentence followed by a differently indented line or
    a header (a paragraph starts)."""
    n = len(lines)
    foot_indent = lines[kk].indent
    while kk + 1 < n and not lines[kk + 1].blank and not strong[kk + 1]:
        nxt = lines[kk + 1]
        if is_separator(nxt) or is_salutation(nxt):
            break
        ended = ends_sentence(lines[kk].text)
        if ended and (abs(nxt.indent - foot_indent) >= 2 or headerish(nxt.raw)):
            break
        kk += 1
    return kk


def _heading_row(s: str) -> bool:
    """A row of column headings made of years or dates only ("2016   2015   2014")."""
    cells = split_cells(s)
    return len(cells) >= 2 and all(YEAR_CELL.fullmatch(c) for c in cells)


def _cells_align(lines: list[Line], a: int, b: int) -> bool:
    """Soft lines between table parts separated by blank lines: accept when short."""
    return all(
        lines[i].blank or len(lines[i].text) <= 60 or header_like_cells(lines[i].raw)
        for i in range(a, b)
    )


def _caption_like(raw: str) -> bool:
    s = raw.strip()
    if not s or len(s) > 90 or prose_like(raw):
        return False
    if s[-1] in ".,;:" and not s.endswith(")"):
        return False
    return s[0].isupper() or s[0] in "(“\"'"


def detect_blocks(text: str) -> list[Block]:
    lines = split_lines(text)
    n = len(lines)
    kind: list[str | None] = [None] * n
    detached: set[int] = set()
    spans, row = _find_tables(lines, detached)
    for a, b in spans:
        for i in range(a, b + 1):
            kind[i] = "table"
    for i, ln in enumerate(lines):
        if ln.text[:1] in SEPARATOR_FIRST and kind[i] is None and SEPARATOR.match(ln.raw):
            kind[i] = "separator"
    _mark_opening(lines, kind)  # first: partners' names under the date line sign nothing
    _mark_signatures(lines, kind)
    blocks: list[Block] = []
    i = 0
    while i < n:
        ln = lines[i]
        if ln.blank:
            i += 1
            continue
        k = kind[i]
        if k in ("table", "signature", "letterhead"):
            j = i
            while j + 1 < n and kind[j + 1] == k:
                j += 1
            # trim trailing blank lines inside a table run
            while lines[j].blank:
                j -= 1
            blocks.append(_mk(lines, k, i, j))
            if k == "table":
                blocks[-1].meta["line_start"] = lines[i].start
                # is_table_row of each line, so parse_table need not ask again
                blocks[-1].meta["rows"] = row[i : j + 1]
                blocks[-1].title = _table_caption(lines, row, i, j)
                blocks[-1].meta["detached_caption"] = i in detached
            i = j + 1
            continue
        if k == "separator":
            blocks.append(_mk(lines, "separator", i, i))
            i += 1
            continue
        if k == "salutation" or is_salutation(ln):
            blocks.append(_mk(lines, "salutation", i, i))
            i += 1
            continue
        if _is_header_at(lines, kind, i):
            j = _header_end(lines, kind, i)
            header = _mk(lines, "header", i, j)
            header.title = " ".join(lines[x].text for x in range(i, j + 1)).rstrip(":")
            blocks.append(header)
            i = j + 1
            continue
        if is_bullet(ln):
            j = _list_end(lines, kind, i)
            blocks.append(_mk(lines, "list", i, j))
            i = j + 1
            continue
        j = _paragraph_end(lines, kind, i)
        blocks.append(_mk(lines, "paragraph", i, j))
        i = j + 1
    return blocks


def _header_end(lines: list[Line], kind: list[str | None], i: int) -> int:
    """Last line of the header starting at line ``i``: short header-like lines that follow it,
    each alone before a blank line, belong to it."""
    n = len(lines)
    j = i
    while (
        j + 1 < n
        and kind[j + 1] is None
        and not lines[j + 1].blank
        and headerish(lines[j + 1].raw)
        and (j + 2 >= n or lines[j + 2].blank)
        and len(lines[j + 1].text) <= 80
    ):
        j += 1
    return j


def _paragraph_end(lines: list[Line], kind: list[str | None], i: int) -> int:
    """Last line of the paragraph starting at line ``i``: until a blank line, another kind, a
    header, a bullet, or an indent break."""
    n = len(lines)
    ln = lines[i]
    j = i
    cont_indent: int | None = None
    while j + 1 < n:
        back = j  # where the paragraph ends if the next line does not continue it
        nxt = lines[j + 1]
        if nxt.blank:
            resume = _page_break_continuation(lines, kind, j)
            if resume is None:
                break
            j = resume - 1  # the sentence goes on after a page break: same paragraph
            nxt = lines[resume]
        # is_bullet / is_salutation / ends_sentence with their cheap tests inlined (the
        # hottest loop: every line of every paragraph)
        c = nxt.text[0]
        t = lines[j].text
        if (
            kind[j + 1] is not None
            or ((c in BULLET_FIRST or "\uf000" <= c <= "\uf8ff") and BULLET.match(nxt.raw))
            or ((c == "T" or c == "D") and is_salutation(nxt))
            or (
                t
                and t[-1] in END_LAST
                and ends_sentence(t)
                and (
                    _is_header_at(lines, kind, j + 1, after_text=True)
                    # paragraphs running into each other: only the indent tells
                    or nxt.indent >= (ln.indent if cont_indent is None else cont_indent) + 2
                )
            )
        ):
            j = back  # not across the blank lines of a page break that leads nowhere
            break
        if cont_indent is None:
            cont_indent = nxt.indent
        j += 1
    return j


def _page_break_continuation(lines: list[Line], kind: list[str | None], j: int) -> int | None:
    """Index of the line that continues line ``j``'s sentence across blank lines (a page break
    whose page number the cleaner removed), or None.  Continuation: line ``j`` ends without
    sentence punctuation, at most three blank lines follow, and the next line starts with a
    lowercase letter at the paragraph margin."""
    text = lines[j].text
    if not text or ends_sentence(text):
        return None
    k = j + 1
    while k < len(lines) and lines[k].blank and k - j <= 3:
        k += 1
    if k >= len(lines) or not lines[k].text or lines[k].blank or kind[k] is not None:
        return None
    first = lines[k].text[0]
    if not first.islower() or lines[k].indent > lines[j].indent + 1:
        return None
    return k


def _mk(lines: list[Line], kind: str, a: int, b: int) -> Block:
    first_line, last_line = lines[a], lines[b]
    start = first_line.start + first_line.indent
    end = last_line.start + len(last_line.raw.rstrip())
    return Block(kind=kind, first=a, last=b, start=start, end=end)


def _is_header_at(
    lines: list[Line], kind: list[str | None], i: int, after_text: bool = False
) -> bool:
    n = len(lines)
    if i >= n or kind[i] is not None or lines[i].blank:
        return False
    if i + 1 < n and not lines[i + 1].blank and kind[i + 1] is None:
        # the last test below, asked first: it is cheap and rejects most lines inside prose
        # (a paragraph's first line over a line that continues it: no header there, and the
        # next line, starting in lowercase, fails headerish at its first test)
        nxt = lines[i + 1]
        if nxt.indent <= lines[i].indent:
            longer = len(nxt.text) - len(lines[i].text)
            if after_text and longer <= 20:
                return False
            if not after_text and longer <= 10 and not headerish(nxt.raw):
                return False
    raw = lines[i].raw
    if not headerish(raw) or signature_line(raw) is not None:
        return False
    k = i + 1
    while k < n and lines[k].blank:
        k += 1
    if k < n and is_salutation(lines[k]):
        return False  # a letterhead above "To the Shareholders...:" is not a section title
    if k < n and lines[i].text.endswith(":") and _LOWER_ITEM.match(lines[k].raw):
        return False  # "Harry:" over "(1) took the inventory…": a sentence's subject
    prev_ok = after_text or i == 0 or lines[i - 1].blank
    prev_ok = prev_ok or kind[i - 1] in ("separator", "table", "signature")
    if not prev_ok:
        # previous line ends a sentence (a page number between them was removed)
        prev_ok = ends_sentence(lines[i - 1].text)
    if not prev_ok:
        return False
    if i + 1 >= n or lines[i + 1].blank:
        return True
    nxt = lines[i + 1]
    if kind[i + 1] is not None:
        return True  # a table, separator or sign-off right under the title
    # no blank after: the next line must look like a paragraph start (indent or longer text)
    longer = len(nxt.text) - len(lines[i].text)
    if after_text:
        return nxt.indent > lines[i].indent or longer > 20
    return nxt.indent > lines[i].indent or longer > 10 or headerish(nxt.raw)


def _list_end(lines: list[Line], kind: list[str | None], i: int) -> int:
    n = len(lines)
    j = i
    while j + 1 < n:
        nxt = lines[j + 1]
        if kind[j + 1] is not None:
            break
        if nxt.blank:
            k = j + 1
            while k < n and lines[k].blank:
                k += 1
            if k < n and kind[k] is None and is_bullet(lines[k]) and k - j <= 3:
                j = k
                continue
            break
        if _is_header_at(lines, kind, j + 1, after_text=True) and ends_sentence(lines[j].text):
            break
        j += 1
    return j


def _mark_signatures(lines: list[Line], kind: list[str | None]) -> None:
    """Mark sign-off runs: sign-off lines, at most one blank line between them, 1-6 lines, with
    a name and a title or date, or a title and a date."""
    n = len(lines)
    # the lines that may start a run, told by signature_line's cheap tests in one pass (most
    # lines end here); a run marks only lines before the next one looked at
    starts = [
        i
        for i, ln in enumerate(lines)
        if kind[i] is None
        and (t := ln.text)
        and ("A" <= t[0] <= "Z" or t[0] == "/")
        # a long line is no sign-off line unless split in columns or indented
        and not (len(t) > 45 and (len(t) > 90 or ("   " not in t and ln.indent < 10)))
    ]
    after = 0  # the first line no run has taken
    for i in starts:
        if i < after or (first := signature_line(lines[i].raw)) is None:
            continue
        j, kinds, last = i, [], i
        while j < n and kind[j] is None:
            if lines[j].blank:
                if j + 1 < n and not lines[j + 1].blank and kind[j + 1] is None:
                    j += 1
                    continue
                break
            s = first if j == i else signature_line(lines[j].raw)
            if s is None and _signed_after_closing(lines, last, j):
                s = "name"  # "Cordially," then "Warren Buffett": a name without an initial
            if s is None:
                break
            kinds.append(s)
            last = j
            j += 1
        has = {part for k in kinds for part in k.split("+")}
        ok = 1 <= len(kinds) <= 6 and (
            ("name" in has and ("title" in has or "date" in has))
            or ("title" in has and "date" in has)
        )
        if ok:
            last = _initials_after(lines, kind, last)
            for x in range(i, last + 1):
                kind[x] = "signature"
        after = last + 1


def _signed_after_closing(lines: list[Line], last: int, j: int) -> bool:
    """Line ``j`` is a plain name ("Warren Buffett") signed under the closing word on line
    ``last`` ("Cordially,")."""
    return (
        j > last
        and CLOSING_WORD.match(lines[last].text) is not None
        and PLAIN_NAME.match(lines[j].text) is not None
    )


def _initials_after(lines: list[Line], kind: list[str | None], last: int) -> int:
    """The last line of a sign-off ending at ``last``: a typist's reference initials ("WEBeh")
    within one blank line under it belong to it."""
    n = len(lines)
    k = last + 1
    if k < n and lines[k].blank:
        k += 1
    if k < n and kind[k] is None and INITIALS.match(lines[k].text) is not None:
        return k
    return last


def _mark_opening(lines: list[Line], kind: list[str | None]) -> None:
    """Mark a letter's opening at the top of the text: its letterhead lines (with the label and
    date line under them) as ``letterhead``, the salutation that follows as ``salutation``.

    Read group by group (groups are split by blank lines): first letterhead groups -- short
    indented lines, the first group of any shape, later ones in capitals ("12 MAIN ST.") --
    then a group opening with a date line (names of partners under it belong to it), then one
    salutation line ("TO MY PARTNERS:").  It is an opening only when it holds a date line, or
    at least two letterhead lines with one in capitals; a title, a salutation or a table
    caption at the margin opens none (the Berkshire letters have none).
    """
    groups = _line_groups(lines)
    head_last, sal, dated, heads, caps = -1, -1, False, 0, False
    for first, last in groups:
        if any(kind[x] is not None for x in range(first, last + 1)):
            break
        texts = [lines[x].text for x in range(first, last + 1)]
        if not dated and date_line(texts[0]) and all(_short_unended(t) for t in texts[1:]):
            dated = True
        elif not dated and all(_letterhead_line(lines[x]) for x in range(first, last + 1)):
            if heads and not all(_caps(t) for t in texts):
                break
            heads += len(texts)
            caps = caps or any(_caps(t) for t in texts)
            dated = any(date_line(t) for t in texts)
        elif first == last and OPENING_SALUTATION.match(lines[first].raw) and head_last >= 0:
            sal = first
            break
        else:
            break
        head_last = last
    if head_last < 0 or not (dated or (heads >= 2 and caps)):
        return
    for x in range(head_last + 1):
        kind[x] = "letterhead"
    if sal >= 0:
        kind[sal] = "salutation"


def _line_groups(lines: list[Line], limit: int = 8) -> list[tuple[int, int]]:
    """(first, last) line of the first ``limit`` runs of non-blank lines."""
    out: list[tuple[int, int]] = []
    i, n = 0, len(lines)
    while i < n and len(out) < limit:
        if lines[i].blank:
            i += 1
            continue
        j = i
        while j + 1 < n and not lines[j + 1].blank:
            j += 1
        out.append((i, j))
        i = j + 1
    return out


def _letterhead_line(ln: Line) -> bool:
    """A line as letterheads print them: indented (centred or set right), short, not prose."""
    return (
        ln.indent >= 10
        and len(ln.text) <= 70
        and len(ln.text.split()) <= 8
        and (LETTERS2.search(ln.text) is not None)
    )


def _caps(t: str) -> bool:
    letters = [c for c in t if c.isalpha()]
    return len(letters) >= 3 and sum(c.isupper() for c in letters) >= 0.8 * len(letters)


def _short_unended(t: str) -> bool:
    """A short line that ends no sentence: a name or title under a letter's date line."""
    return len(t) <= 60 and len(t.split()) <= 8 and not ends_sentence(t)


def _table_caption(lines: list[Line], row: list[bool], a: int, b: int) -> str:
    """The table's caption: its first line when that line is a title (no numbers in columns).
    ``row``: ``is_table_row`` of every line (:func:`_row_flags`)."""
    for i in range(a, min(b, a + 3) + 1):
        raw = lines[i].raw
        if lines[i].blank or is_rule(raw) or row[i]:
            continue
        if (
            _caption_like(raw)
            and not header_like_cells(raw)
            and not PAREN_ANY.fullmatch(raw)
            and len(LETTERS3.findall(raw)) >= 2  # not a heading stub like "No. of"
        ):
            return lines[i].text
        break
    return ""
