"""Deterministic parsing of a table block's text into ``TableData`` parts.

Rules:

* Rule lines (``----``, ``====``), blank lines and footnotes (``Note``, ``*``, ``(1)`` at the
  start, after the last data row) are not rows.
* A *data row* is a line with a dot leader or with numeric cells (see
  :func:`~letterchunk.text.lines.is_table_row`).  Its label is the text before the leader / the
  first wide gap; its values are the remaining cells.  A text-only line directly before a data row
  whose label is empty or indented deeper is a wrapped label: the two are joined.
* A label may hold digit groups of its own (a date "(acquired 7/1/91)", a year, a range
  "1957 – 58", "Phillips 66", a footnote mark "(4)"), so figures set one space after the label
  text are split off only where the row lacks values: they fill the row to one value per
  column when the first of them stands under the first value column, else each must stand
  under an empty column left of the row's values (see :func:`_label_figures`).
* Value columns are found by clustering the right edges of value cells over all data rows
  (numbers are right-aligned); every value is placed in the column whose right edge is nearest.
* Column names come from the header lines above the first data row: each header fragment goes
  to the column whose span it overlaps most; fragments of one column are joined top-down.  The
  label column is named by header text left of the first value column, else ``"Item"``; a column
  without header text is named ``"Column N"``.
* Two tables side by side (a balance sheet: assets left, liabilities right) are split at the
  column where a text cell following a value cell starts in several rows; each half is parsed
  on its own and a row holds the left and right rows that end on the same line.
* The caption (first line, when it is a title) is the table name; the fallback name is given by
  the caller.
"""

from __future__ import annotations

import re
from bisect import bisect_left

from letterchunk.text.lines import LEADER, is_rule, is_table_row, numeric_cell

__all__ = ["parse_table"]

_GAP = re.compile(r"\S(?:.*?\S)?(?=\s{2,}|$)")
_FOOT = re.compile(
    r"^\s*(?:Notes?\s*[:.]|NOTES?\b|Footnotes?\b|\*|\(\d{1,2}\)\s|\([a-z]\)\s|†|Sources?:)"
)


_Cell = tuple[int, int, str]  # (start column, end column, text)
_Row = tuple[_Cell | None, list[_Cell]]  # (label cell or None, value cells)


def _segments(line: str) -> list[_Cell]:
    """Cells of a line as (start, end, text), split at runs of 2+ spaces and at dot leaders."""
    return [(m.start(), m.end(), m.group(0)) for m in _CELL_RUN.finditer(line)]


_CELL_RUN = re.compile(r"\S+(?: \S+)*")
_GAP2 = re.compile(r"\s\s+")  # \s{2,}, written so the engine skips to a space
_YEARLIKE = re.compile(r"^(?:(?:19|20)\d\d|\d{1,2}/\d{1,2}/\d{2,4})(?:[*†‡]+|\(\d\))?$")


def _split_row(line: str) -> _Row:
    """(label cell or None, value cells) of a row; cells carry their (start, end) columns.

    Dot leaders become spaces (positions kept), then the line splits at runs of 2+ spaces.
    The label is the first text cell; a leading number is the label only when a leader follows
    it or it is a year/date at the start of the line (a row key such as "1965 ......").
    """
    blanked = LEADER.sub(_blank, line) if "." in line or "…" in line else line
    # the cells of _segments, each stripped of spaces and dots (its columns kept), empty ones
    # dropped: one pass over the matches
    segs = [(m.start(), m.end(), t) for m in _CELL_RUN.finditer(blanked) if (t := m[0].strip(" ."))]
    if not segs:
        return None, []
    merged: list[_Cell] = []
    for a, b, t in segs:  # a lone currency sign belongs to the number after it
        if merged and merged[-1][2] in _CURRENCY and numeric_cell(t):
            merged[-1] = (merged[-1][0], b, f"{merged[-1][2]} {t}")
        else:
            merged.append((a, b, t))
    # _numbers_apart's cheap test inlined: most cells hold no space or start with no number
    segs = [
        cell
        for seg in merged
        for cell in (
            _numbers_apart(seg) if " " in seg[2] and seg[2][0] in _NUMBER_FIRST else (seg,)
        )
    ]
    first = segs[0]
    if len(segs) > 1 and LEADER.match(line[first[1] :].lstrip(" ")):
        return first, segs[1:]  # "1965 ......": the row key precedes the leader
    for idx, (a, b, t) in enumerate(segs):
        if not numeric_cell(t):
            return (a, b, t), segs[:idx] + segs[idx + 1 :]
    if _YEARLIKE.match(first[2]) and first[0] <= 8:
        return first, segs[1:]
    return None, segs


def _numbers_apart(seg: _Cell) -> list[_Cell]:
    """A cell of several numbers set with single spaces ("$61,665 $66,099 $59,100") as one
    cell per number (a "$" stays with its number); any other cell as it is."""
    a, _, t = seg
    if " " not in t or t[0] not in _NUMBER_FIRST:
        return [seg]
    out: list[_Cell] = []
    for m in _TOKEN.finditer(t):
        tok = m.group(0)
        if out and out[-1][2] in ("$", "£", "€"):
            out[-1] = (out[-1][0], a + m.end(), f"{out[-1][2]} {tok}")
        else:
            out.append((a + m.start(), a + m.end(), tok))
    if len(out) < 2 or not all(numeric_cell(x[2]) and any(c.isdigit() for c in x[2]) for x in out):
        return [seg]
    return out


_TOKEN = re.compile(r"\S+")
_CURRENCY = frozenset(("$", "£", "€"))
_NUMBER_FIRST = frozenset("0123456789$£€(-–—+.")


def _blank(m: re.Match[str]) -> str:
    return " " * len(m.group(0))


def _cluster(edges: list[int], tol: int = 4) -> list[int]:
    if not edges:
        return []
    edges = sorted(edges)
    groups: list[list[int]] = [[edges[0]]]
    for e in edges[1:]:
        if e - groups[-1][-1] <= tol:
            groups[-1].append(e)
        else:
            groups.append([e])
    return [max(g) for g in groups if len(g) >= max(1, len(edges) // 20)]


def parse_table(
    text: str, caption: str = "", row_flags: list[bool] | None = None
) -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)`` for the text of a table block (see the module docstring).

    ``row_flags``: ``is_table_row`` of each line of ``text`` when the caller has it already
    (block detection does: ``Block.meta["rows"]``); computed here otherwise.
    """
    lines = text.split("\n")
    if row_flags is not None and len(row_flags) == len(lines):
        is_row = list(row_flags)
    else:
        is_row = [is_table_row(ln) for ln in lines]
    cells = {i: _split_row(ln) for i, ln in enumerate(lines) if is_row[i]}
    split = _side_by_side(cells)
    if split is not None and all(
        len(ln) <= split or ln[split - 1] == " " or ln[split] == " "
        for i, ln in enumerate(lines)
        if is_row[i]
    ):  # no data row has a cell running across the column
        both = _side_by_side_parse(lines, caption, split, is_row)
        if both is not None:
            return both
    columns, rows, _ = _parse(lines, caption, is_row, cells)
    return columns, rows


def _parse(
    lines: list[str],
    caption: str,
    is_row: list[bool],
    cells: dict[int, _Row] | None = None,
) -> tuple[list[str], list[list[str]], list[int]]:
    """``(columns, rows, the line index each row ends on)``; ``cells``: ``_split_row`` of the
    data rows when the caller has them.

    The steps follow the module docstring: data rows (wrapped labels joined), value columns,
    values placed in them, names from the header lines, then leading rows of years taken as
    headings.
    """
    data_idx = [i for i, r in enumerate(is_row) if r]
    if not data_idx:
        text_columns, text_rows = _text_table(lines, caption)
        return text_columns, text_rows, []
    first_data, last_data = data_idx[0], data_idx[-1]
    parsed, ends = _data_rows(lines, is_row, cells, first_data, last_data)
    _join_bare_leaders(parsed, ends)
    edges = _value_columns(parsed)
    parsed = [_label_figures(row, edges) for row in parsed]
    rows, lefts = _place_values(parsed, edges)
    names, label_name = _header_names(lines[:first_data], caption, parsed, edges, lefts)
    names, label_name = _take_year_headings(rows, ends, names, label_name)
    columns = [label_name or "Item"] + [nm or f"Column {k + 1}" for k, nm in enumerate(names)]
    return columns, rows, ends


def _data_rows(
    lines: list[str],
    is_row: list[bool],
    cells: dict[int, _Row] | None,
    first_data: int,
    last_data: int,
) -> tuple[list[_Row], list[int]]:
    """The rows between the first and the last data row, and the line each ends on.

    Blank and rule lines end a row, footnotes are skipped; a text line that is not a data row
    but has a label is held and joined to the next line (a label wrapped over two lines).
    """
    parsed: list[_Row] = []
    ends: list[int] = []  # line index of each parsed row's last line
    pending: _Row | None = None
    for i in range(first_data, last_data + 1):
        ln = lines[i]
        if not ln.strip() or is_rule(ln):
            if pending:
                parsed.append(pending)
                ends.append(i - 1)
            pending = None
            continue
        if _FOOT.match(ln) and not is_row[i]:
            continue
        label, vals = cells[i] if cells is not None and i in cells else _split_row(ln)
        if pending is not None:
            # a wrapped row: the previous line held the start of the label (and maybe values)
            plabel, pvals = pending
            if plabel and label:
                label = (plabel[0], max(plabel[1], label[1]), f"{plabel[2]} {label[2]}")
            else:
                label = label or plabel
            vals = pvals + vals
            pending = None
        if is_row[i] or not label:
            parsed.append((label, vals))
            ends.append(i)
        else:
            pending = (label, vals)
    if pending:
        parsed.append(pending)
        ends.append(last_data)
    return parsed, ends


def _join_bare_leaders(parsed: list[_Row], ends: list[int]) -> None:
    """Join, in place, a label with a bare leader ("Revenues . . . . .") to its values alone
    on the next line."""
    k = 1
    while k < len(parsed):
        (plabel, pvals), (label, vals) = parsed[k - 1], parsed[k]
        if plabel and not pvals and not label and vals and ends[k - 1] == ends[k] - 1:
            parsed[k - 1 : k + 1] = [(plabel, vals)]
            ends[k - 1 : k + 1] = [ends[k]]
        else:
            k += 1


def _value_columns(parsed: list[_Row]) -> list[int]:
    """The right edge of each value column, left to right."""
    counts = [len(vals) for _, vals in parsed if vals]
    widest = max(counts, default=0)
    if len(counts) >= 3 and counts.count(widest) * 5 >= len(counts) * 3:
        # most rows hold the same number of values and none holds more: those rows define the
        # columns (each column's right edge: the median over them), however ragged the setting
        full = [vals for _, vals in parsed if len(vals) == widest]
        edges = [sorted(v[k][1] for v in full)[len(full) // 2] for k in range(widest)]
        for k in range(1, widest):
            edges[k] = max(edges[k], edges[k - 1] + 1)
        return edges
    return _cluster([e for _, vals in parsed for _, e, _ in vals])


_ALIGN = 4  # how far (in columns) a figure's right edge may stray from its column's
_RANGE_DASH = frozenset(("-", "–", "—", "to", "through"))


def _label_figures(row: _Row, edges: list[int]) -> _Row:
    """The row with the figures that ended its label cell moved to its values.

    A label cell is split from the values at a gap of two spaces, so a figure set one space
    after the label ("H. H. Brown (acquired 7/1/91) 13,616   ---") ends the label.  The
    label's trailing figures are its last numeric tokens (a currency sign goes with the number
    after it), but not a year or date ("1st half 1964") nor the end of a range ("1957 – 58"):
    those are the label's own.  Some label text always stays.  With ``n`` cells missing from
    the row (columns less values), the figures taken are

    * the last ``n``, when there are that many and the first of them ends under the first
      value column: the row then holds one value per column (figures set with single spaces,
      "Total $200,549 $147,878 $191,293", however ragged);
    * else, right to left, each figure that ends under an empty column left of the row's
      values and of the figures already taken.

    Digit groups elsewhere in the label, or that stand under no empty column (a name such as
    "Phillips 66" in a row whose columns are full), stay in the label.
    """
    label, vals = row
    missing = len(edges) - len(vals)
    if label is None or missing <= 0:
        return row
    a, _, text = label
    tokens = [(a + m.start(), a + m.end(), m.group(0)) for m in _TOKEN.finditer(text)]
    figures: list[_Cell] = []  # right to left
    while len(tokens) > 1 and _label_figure(tokens[-1][2]) and tokens[-2][2] not in _RANGE_DASH:
        s, e, t = tokens.pop()
        if len(tokens) > 1 and tokens[-1][2] in ("$", "£", "€"):
            s, t = tokens[-1][0], f"{tokens.pop()[2]} {t}"
        figures.append((s, e, t))
    if not figures:
        return row
    if len(figures) >= missing and abs(figures[missing - 1][1] - edges[0]) <= _ALIGN:
        taken = figures[:missing]
    else:
        taken = []
        limit = min((_column_of(edges, e) for _, e, _ in vals), default=len(edges))
        for s, e, t in figures:
            k = _column_of(edges, e)
            if k >= limit or abs(e - edges[k]) > _ALIGN:
                break
            taken.append((s, e, t))
            limit = k
    if not taken:
        return row
    rest_end = taken[-1][0]
    rest = text[: rest_end - a].strip(" .")  # as every label cell is (a short leader "..")
    if not rest:
        return row
    return (a, a + len(rest), rest), taken[::-1] + vals


def _label_figure(token: str) -> bool:
    """A token that can be a figure set after a label: a number that is not a year or date."""
    return numeric_cell(token) and any(c.isdigit() for c in token) and not _YEARLIKE.match(token)


def _column_of(edges: list[int], e: int) -> int:
    """The column whose right edge is nearest to ``e`` (the left one on a tie)."""
    ncols = len(edges)
    k = bisect_left(edges, e)
    if k == ncols:
        return ncols - 1
    if k > 0 and e - edges[k - 1] < edges[k] - e:
        return k - 1
    return k


def _place_values(parsed: list[_Row], edges: list[int]) -> tuple[list[list[str]], list[int]]:
    """``(rows, the left edge of each column)``: each row is its label and one cell per column.

    A row with one value per column takes them left to right, however the line was set; in
    other rows each value goes to the column whose right edge is nearest (values that land in
    one column are joined).  The left edges, needed to place header text, are the leftmost
    start of any value placed in the column.
    """
    ncols = len(edges)
    rows: list[list[str]] = []
    lefts = list(edges)
    for label, vals in parsed:
        row_cells = [""] * ncols
        if ncols and len(vals) == ncols:
            row_cells = [t for _, _, t in vals]
            for k, (s, _, _) in enumerate(vals):
                lefts[k] = min(lefts[k], s)
        else:
            for s, e, t in vals:
                if not ncols:
                    break
                k = _column_of(edges, e)
                row_cells[k] = f"{row_cells[k]} {t}" if row_cells[k] else t
                lefts[k] = min(lefts[k], s)
        rows.append([label[2] if label else ""] + row_cells)
    return rows, lefts


def _header_names(
    head: list[str], caption: str, parsed: list[_Row], edges: list[int], lefts: list[int]
) -> tuple[list[str], str]:
    """``(a name per value column, the label column's name)`` from the header lines ``head``
    above the first data row (rules, blanks and the caption skipped).

    A fragment over the labels (overlapping them more than any column) names the label column;
    one that spans the middles of several columns names each of them; any other names the
    column :func:`_header_column` picks.  Fragments are joined top-down.
    """
    ncols = len(edges)
    names = [""] * ncols
    label_name = ""
    if ncols == 0:
        return names, label_name
    label_cells = [lab for lab, _ in parsed if lab]
    label_hi = max((lab[1] for lab in label_cells), default=-1)
    label_lo = min((lab[0] for lab in label_cells), default=10**6)
    for ln in head:
        if not ln.strip() or is_rule(ln) or (caption and ln.strip() == caption):
            continue
        for s, e, t in _segments(ln):
            if (
                label_cells
                and s < label_hi
                and e > label_lo
                and not any(
                    min(e, edges[k] + 1) - max(s, lefts[k] - 2)
                    > min(label_hi, e) - max(label_lo, s)
                    for k in range(ncols)
                )
            ):
                label_name = f"{label_name} {t}".strip()
                continue
            # a heading over several columns ("Pre-Tax Earnings" over "1985  1984") names each
            spanned = [k for k in range(ncols) if s <= (lefts[k] + edges[k]) / 2 <= e]
            if len(spanned) >= 2:
                for k in spanned:
                    names[k] = f"{names[k]} {t}".strip()
                continue
            best = _header_column(s, e, edges, lefts)
            if best is not None:
                names[best] = f"{names[best]} {t}".strip()
    return names, label_name


def _header_column(s: int, e: int, edges: list[int], lefts: list[int]) -> int | None:
    """The column a header fragment spanning ``s..e`` names, or None to drop it.

    A column spans from 2 left of its left edge to 1 right of its right edge.  The column the
    fragment overlaps most names it; when the best it does is touch one (overlap 0), the
    column whose middle is nearest to the fragment's; when it is clear of every column (all
    overlaps negative), none.
    """
    ncols = len(edges)
    best, best_ov = None, -1
    for k in range(ncols):
        ov = min(e, edges[k] + 1) - max(s, lefts[k] - 2)
        if ov > best_ov:
            best, best_ov = k, ov
    if best is None:
        return None
    if best_ov <= 0:
        best = min(range(ncols), key=lambda c: abs((lefts[c] + edges[c]) / 2 - (s + e) / 2))
    return best


def _take_year_headings(
    rows: list[list[str]], ends: list[int], names: list[str], label_name: str
) -> tuple[list[str], str]:
    """Leading rows of years/dates only ("2016  2015") are column headings: removed (in place)
    from ``rows`` and ``ends`` and added to the column names; a label on such a row names the
    label column ("Insurance Operations  2013  2012").  One row is always kept: a table that
    is nothing but headings still has a row."""
    while (
        len(rows) > 1
        and sum(bool(c) for c in rows[0][1:]) >= 2
        and all(not c or _YEARLIKE.match(c) for c in rows[0][1:])
    ):
        head = rows.pop(0)
        ends.pop(0)
        if _YEARLIKE.match(head[0]) and len(head) > 1 and not head[1]:
            head = ["", head[0], *head[2:]]  # the first year sat left of its column
        names = [f"{nm} {h}".strip() for nm, h in zip(names, head[1:], strict=False)]
        label_name = label_name or head[0]
    return names, label_name


def _side_by_side(cells: dict[int, _Row]) -> int | None:
    """The column where a second table starts beside the first (a balance sheet: assets on
    the left, liabilities on the right), or None; ``cells``: ``_split_row`` of each data row.

    Found from the data rows: a text cell that follows a value cell and is followed by one in
    the same row starts a second label.  Those starts must line up (within 4 columns) in at
    least 3 rows and a quarter of the data rows, and the labels must differ (not one phrase
    repeated down a column).  The caller checks that no data row has a cell across it.
    """
    starts: list[int] = []
    labels: list[str] = []
    for _, vals in cells.values():
        seen_value = False
        for k, (a, _, t) in enumerate(vals):
            if numeric_cell(t):
                seen_value = True
            elif seen_value:
                if any(numeric_cell(x[2]) for x in vals[k + 1 :]):  # a label with its value
                    starts.append(a)
                    labels.append(t.lower())
                break
    rows = len(cells)
    if len(starts) < 3 or len(starts) * 4 < rows:
        return None
    if len(set(labels)) * 5 < len(labels) * 4:
        return None  # the same words again and again ("less than zero"): a column of text
    starts.sort()
    best: list[int] = []
    group = [starts[0]]
    for x in starts[1:]:
        group = group + [x] if x - group[-1] <= 4 else [x]
        if len(group) > len(best):
            best = group
    if len(best) < 3 or len(best) * 4 < rows:
        return None
    return best[0]


def _half_rows(half: list[str], is_row: list[bool]) -> list[bool]:
    """Rows of one half: its own table rows, and the half of a full row that holds a value
    (a totals line "$48,799 ... $48,799" is a row only as a whole)."""
    return [
        is_table_row(h) or (full and any(numeric_cell(t) for _, _, t in _split_row(h)[1]))
        for h, full in zip(half, is_row, strict=False)
    ]


def _side_by_side_parse(
    lines: list[str], caption: str, at: int, is_row: list[bool]
) -> tuple[list[str], list[list[str]]] | None:
    """Each half parsed on its own; rows that end on the same line share a row."""
    kept = [("" if caption and ln.strip() == caption else ln) for ln in lines]
    left = [ln[:at].rstrip() for ln in kept]
    right = [(" " * at + ln[at:]) if len(ln) > at else "" for ln in kept]
    lcols, lrows, lends = _parse(left, "", _half_rows(left, is_row))
    rcols, rrows, rends = _parse(right, "", _half_rows(right, is_row))
    if not lrows or not rrows:
        return None
    by_line: dict[int, list[str]] = {}
    for end, row in zip(lends, lrows, strict=False):
        by_line[end] = row + [""] * len(rcols)
    for end, row in zip(rends, rrows, strict=False):
        by_line.setdefault(end, [""] * len(lcols))[len(lcols) :] = row
    columns = [
        f"Column {k}" if re.fullmatch(r"Column \d+", name) else name
        for k, name in enumerate(lcols + rcols)
    ]
    return columns, [by_line[k] for k in sorted(by_line)]


def _text_table(lines: list[str], caption: str) -> tuple[list[str], list[list[str]]]:
    """A table of words laid out in columns under a rule line (no numeric rows)."""
    rules = [i for i, ln in enumerate(lines) if is_rule(ln)]
    body_from = rules[0] + 1 if rules else 0
    head = [ln for ln in lines[: rules[0]] if ln.strip() and ln.strip() != caption] if rules else []
    columns = [c for c in _GAP2.split(head[-1].strip()) if c] if head else []
    rows = [
        [c for c in _GAP2.split(ln.strip()) if c]
        for ln in lines[body_from:]
        if ln.strip() and not is_rule(ln) and not _FOOT.match(ln)
    ]
    width = max([len(columns)] + [len(r) for r in rows]) if rows or columns else 1
    columns = columns + [f"Column {k + 1}" for k in range(len(columns), width)]
    rows = [r + [""] * (width - len(r)) for r in rows]
    return columns or ["Item"], rows
