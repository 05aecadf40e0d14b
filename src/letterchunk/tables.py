"""Deterministic parsing of a table block's text into ``TableData`` parts.

Rules:

* Rule lines (``----``, ``====``), blank lines and footnotes (``Note``, ``*``, ``(1)`` at the
  start, after the last data row) are not rows.
* A *data row* is a line with a dot leader or with numeric cells (see
  :func:`letterchunk.blocks.is_table_row`).  Its label is the text before the leader / the first
  wide gap; its values are the remaining cells.  A text-only line directly before a data row
  whose label is empty or indented deeper is a wrapped label: the two are joined.
* Value columns are found by clustering the right edges of value cells over all data rows
  (numbers are right-aligned); every value is placed in the column whose right edge is nearest.
* Column names come from the header lines above the first data row: each header fragment goes
  to the column whose span it overlaps most; fragments of one column are joined top-down.  The
  label column is named by header text left of the first value column, else ``"Item"``; a column
  without header text is named ``"Column N"``.
* The caption (first line, when it is a title) is the table name; the fallback name is given by
  the caller.
"""

from __future__ import annotations

import re

from .blocks import _LEADER, _is_rule, is_table_row, numeric_cell

__all__ = ["parse_table"]

_GAP = re.compile(r"\S(?:.*?\S)?(?=\s{2,}|$)")
_FOOT = re.compile(r"^\s*(?:Notes?\b|Footnotes?\b|\*|\(\d{1,2}\)\s|\([a-z]\)\s|†|Source:)")


def _segments(line: str) -> list[tuple[int, int, str]]:
    """Cells of a line as (start, end, text), split at runs of 2+ spaces and at dot leaders."""
    out = []
    for m in re.finditer(r"\S+(?: \S+)*", line):
        out.append((m.start(), m.end(), m.group(0)))
    return out


def _split_row(line: str) -> tuple[str, list[tuple[int, int, str]]]:
    """(label, value cells with positions) of a data row."""
    leaders = list(_LEADER.finditer(line))
    if leaders:
        lead = leaders[0]
        label = line[: lead.start()].strip()
        rest_off = leaders[-1].end()
        vals = [(s + rest_off, e + rest_off, t) for s, e, t in _segments(line[rest_off:])]
        # a leader between the label and a text value ("... profit") may leave label pieces
        return label, vals
    segs = _segments(line)
    if not segs:
        return "", []
    first = segs[0]
    if numeric_cell(first[2]) and len(segs) > 1 and not re.match(r"^(19|20)\d\d$", first[2]):
        # leading numeric cell (e.g. a share count) followed by a text label: keep as values
        text_idx = [i for i, s in enumerate(segs) if not numeric_cell(s[2])]
        if text_idx:
            label = " ".join(segs[i][2] for i in text_idx)
            vals = [s for i, s in enumerate(segs) if i not in text_idx]
            return label, vals
        return "", segs
    return first[2], segs[1:]


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


def parse_table(text: str, caption: str = "") -> tuple[list[str], list[list[str]]]:
    """``(columns, rows)`` for the text of a table block (see the module docstring)."""
    lines = text.split("\n")
    # the block text starts at the first non-space character: restore its line's indentation
    data_idx = [i for i, ln in enumerate(lines) if is_table_row(ln)]
    if not data_idx:
        return ["Item"], []
    first_data, last_data = data_idx[0], data_idx[-1]
    parsed: list[tuple[str, list[tuple[int, int, str]]]] = []
    pending_label = ""
    for i in range(first_data, last_data + 1):
        ln = lines[i]
        if not ln.strip() or _is_rule(ln):
            pending_label = ""
            continue
        if is_table_row(ln):
            label, vals = _split_row(ln)
            if pending_label:
                label = f"{pending_label} {label}".strip()
                pending_label = ""
            parsed.append((label, vals))
        elif _FOOT.match(ln) and i > first_data:
            continue
        else:
            segs = _segments(ln)
            if segs and not any(numeric_cell(s[2]) for s in segs):
                pending_label = f"{pending_label} {' '.join(s[2] for s in segs)}".strip()
            elif segs:
                label, vals = _split_row(ln)
                parsed.append((label, vals))
    edges = _cluster([e for _, vals in parsed for _, e, _ in vals])
    ncols = len(edges)
    rows: list[list[str]] = []
    for label, vals in parsed:
        cells = [""] * ncols
        for s, e, t in vals:
            if not edges:
                break
            k = min(range(ncols), key=lambda c: abs(edges[c] - e))
            cells[k] = f"{cells[k]} {t}".strip() if cells[k] else t
        rows.append([label] + cells)
    # column names from header lines above the first data row
    lefts = [
        min((s for _, vals in parsed for s, e, _ in vals if min(range(ncols), key=lambda c: abs(edges[c] - e)) == k), default=edges[k])
        for k in range(ncols)
    ]
    names = [""] * ncols
    label_name = ""
    for i in range(0, first_data):
        ln = lines[i]
        if not ln.strip() or _is_rule(ln) or (caption and ln.strip() == caption):
            continue
        for s, e, t in _segments(ln):
            if ncols == 0:
                break
            if e <= lefts[0] - 1 and s < lefts[0]:
                label_name = f"{label_name} {t}".strip()
                continue
            best, best_ov = None, -1
            for k in range(ncols):
                lo = lefts[k] - 2
                hi = edges[k] + 1
                ov = min(e, hi) - max(s, lo)
                if ov > best_ov:
                    best, best_ov = k, ov
            if best is None:
                continue
            if best_ov <= 0:
                best = min(range(ncols), key=lambda c: abs((lefts[c] + edges[c]) / 2 - (s + e) / 2))
            names[best] = f"{names[best]} {t}".strip()
    columns = [label_name or "Item"] + [nm or f"Column {k + 1}" for k, nm in enumerate(names)]
    return columns, rows
