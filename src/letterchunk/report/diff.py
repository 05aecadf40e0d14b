"""What changed between two runs over the same letters: ``letterchunk diff RUN_A RUN_B``.

:func:`diff_runs` compares two output folders (:func:`letterchunk.report.runs.read_run`), letter
by letter (a chunk file's stem), chunk by chunk:

* chunks are matched by ``chunk_id``.  A matched chunk whose ``content`` or ``source_span``
  differs is ``rebounded`` (the segmentation moved its boundary); one whose fields alone differ
  is ``changed``; one identical in both is counted as unchanged.
* a chunk whose id is in one run only is ``removed`` (in A) or ``added`` (in B), except that a
  removed and an added chunk with the same text at the same span are one chunk whose id
  ``moved`` (its fields are compared too).  An added or removed chunk lists, in ``overlaps``, the
  chunks of the other run at the same tier whose span overlaps its own (a split or a merge).
* per field (:func:`letterchunk.report.runs.chunk_fields`): a ``set`` field gives its members
  added and removed; a ``value`` field (content_type, section_title, ...) its two values, a
  flip; a ``text`` field (contextual_summary, table summaries) its two texts and how similar
  they are (difflib's ratio over words, 0..1).
* letters present in one run only, and letters whose cleaned text differs, are listed.
* a chunk id used by more than one chunk of a letter (a copied line, two chunks under one id:
  a file no letterchunk command writes) is listed in ``duplicate_ids`` with how many chunks
  carry it in each run; only its first chunk is matched as above, so the runs are identical
  only when both hold the same copies of it.

The result is a :class:`RunDiff`: :meth:`RunDiff.to_dict` is the ``--json`` output (keys below,
stable; ``"format"`` changes if they do) and :func:`render_text` the human one, with a summary
table per field.  The two runs' identities (``run.json``) stand side by side; they are context,
not part of the comparison: two runs are ``identical`` when their letters, cleaned texts and
chunks are, whatever made them.

JSON keys: ``format``, ``identical``, ``runs`` {``a``, ``b``: identity}, ``letters``
{``only_in_a``, ``only_in_b``, ``cleaned_changed``, ``compared``}, ``duplicate_ids``
[{``letter``, ``chunk_id``, ``in_a``, ``in_b``, ``same``}], ``counts`` {``chunks_a``,
``chunks_b``, ``unchanged``, ``changed``, ``rebounded``, ``moved``, ``added``, ``removed``},
``fields`` [{``field``, ``kind``, ``chunks``, ``added``, ``removed``, ``transitions``
[{``before``, ``after``, ``count``}], ``mean_similarity``}], ``chunks`` [{``letter``,
``chunk_id``, ``status``, ``id_in_a``, ``span_a``, ``span_b``, ``overlaps``, ``changes``
[{``field``, ``kind``, ``before``, ``after``, ``added``, ``removed``, ``similarity``}]}].
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from letterchunk.contract.jsontypes import JSONObject, JSONValue
from letterchunk.contract.schema import Chunk, Metadata
from letterchunk.report.runs import (
    FieldKind,
    FieldValue,
    RunFolder,
    RunIdentity,
    chunk_fields,
    field_text,
)

__all__ = [
    "ChunkDiff",
    "ChunkStatus",
    "DuplicateId",
    "FieldChange",
    "FieldSummary",
    "RunDiff",
    "compare_fields",
    "diff_runs",
    "identity_rows",
    "render_text",
    "similarity",
]

FORMAT = 2  # 2: duplicate_ids
ChunkStatus = Literal["changed", "rebounded", "moved", "added", "removed"]
STATUSES: tuple[ChunkStatus, ...] = ("changed", "rebounded", "moved", "added", "removed")
_WORD = re.compile(r"\w+|[^\w\s]")
_INDEX = re.compile(r"\[\d+\]")


def similarity(a: str, b: str) -> float:
    """How alike two texts are: difflib's ratio over their words, rounded to 3 places."""
    return round(
        difflib.SequenceMatcher(None, _WORD.findall(a), _WORD.findall(b), autojunk=False).ratio(),
        3,
    )


@dataclass(frozen=True)
class FieldChange:
    """One field of one chunk that differs: ``before`` in A, ``after`` in B (None: the field
    is absent there, e.g. a table only one run has); ``added``/``removed`` the members of a
    set field; ``similarity`` of a text field."""

    field: str
    kind: FieldKind
    before: JSONValue
    after: JSONValue
    added: tuple[JSONValue, ...] = ()
    removed: tuple[JSONValue, ...] = ()
    similarity: float | None = None

    def to_dict(self) -> JSONObject:
        return {
            "field": self.field,
            "kind": self.kind,
            "before": self.before,
            "after": self.after,
            "added": list(self.added),
            "removed": list(self.removed),
            "similarity": self.similarity,
        }


def compare_fields(a: dict[str, FieldValue], b: dict[str, FieldValue]) -> list[FieldChange]:
    """The fields that differ between two flattened chunks, in A's field order then B's."""
    changes: list[FieldChange] = []
    for name in dict.fromkeys([*a, *b]):
        fa, fb = a.get(name), b.get(name)
        before = fa.value if fa else None
        after = fb.value if fb else None
        if before == after:
            continue
        kind = (fa or fb).kind  # type: ignore[union-attr]  # one of them is set
        if kind == "set":
            old = before if isinstance(before, list) else []
            new = after if isinstance(after, list) else []
            changes.append(
                FieldChange(
                    name,
                    kind,
                    before,
                    after,
                    added=tuple(v for v in new if v not in old),
                    removed=tuple(v for v in old if v not in new),
                )
            )
        elif kind == "text" and isinstance(before, str) and isinstance(after, str):
            changes.append(
                FieldChange(name, kind, before, after, similarity=similarity(before, after))
            )
        else:
            changes.append(FieldChange(name, kind, before, after))
    return changes


@dataclass(frozen=True)
class ChunkDiff:
    """One chunk that is not the same in both runs.  ``chunk_id`` is its id in B (in A for a
    removed chunk); ``id_in_a`` its id in A when it ``moved``; spans are ``[start, end)``."""

    letter: str
    chunk_id: str
    status: ChunkStatus
    span_a: tuple[int, int] | None
    span_b: tuple[int, int] | None
    changes: tuple[FieldChange, ...] = ()
    id_in_a: str | None = None
    overlaps: tuple[str, ...] = ()

    def to_dict(self) -> JSONObject:
        return {
            "letter": self.letter,
            "chunk_id": self.chunk_id,
            "status": self.status,
            "id_in_a": self.id_in_a,
            "span_a": None if self.span_a is None else list(self.span_a),
            "span_b": None if self.span_b is None else list(self.span_b),
            "overlaps": list(self.overlaps),
            "changes": [c.to_dict() for c in self.changes],
        }


@dataclass(frozen=True)
class DuplicateId:
    """A chunk id that more than one chunk of a letter carries, in A or B: ``in_a``/``in_b``
    chunks carry it there; ``same`` when both runs hold the very same chunks under it."""

    letter: str
    chunk_id: str
    in_a: int
    in_b: int
    same: bool

    def to_dict(self) -> JSONObject:
        return {
            "letter": self.letter,
            "chunk_id": self.chunk_id,
            "in_a": self.in_a,
            "in_b": self.in_b,
            "same": self.same,
        }


@dataclass(frozen=True)
class FieldSummary:
    """One field over every compared chunk: in how many it changed, how many set members came
    and went, which value flips happened how often, and the mean similarity of rewritten
    texts.  A table's fields are summed over its index (``table_data[].summary``)."""

    field: str
    kind: FieldKind
    chunks: int
    added: int
    removed: int
    transitions: tuple[tuple[JSONValue, JSONValue, int], ...]
    mean_similarity: float | None

    def to_dict(self) -> JSONObject:
        return {
            "field": self.field,
            "kind": self.kind,
            "chunks": self.chunks,
            "added": self.added,
            "removed": self.removed,
            "transitions": [{"before": b, "after": a, "count": n} for b, a, n in self.transitions],
            "mean_similarity": self.mean_similarity,
        }


@dataclass(frozen=True)
class RunDiff:
    """Run A against run B (see the module docstring)."""

    a: RunIdentity
    b: RunIdentity
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    cleaned_changed: tuple[str, ...]
    compared: tuple[str, ...]  # letters in both runs
    chunks: tuple[ChunkDiff, ...]
    unchanged: int
    chunks_a: int
    chunks_b: int
    duplicates: tuple[DuplicateId, ...] = ()

    @property
    def identical(self) -> bool:
        return not (
            self.only_in_a
            or self.only_in_b
            or self.cleaned_changed
            or self.chunks
            or any(not d.same for d in self.duplicates)
        )

    def counts(self) -> dict[str, int]:
        by_status = Counter(c.status for c in self.chunks)
        return {
            "chunks_a": self.chunks_a,
            "chunks_b": self.chunks_b,
            "unchanged": self.unchanged,
            **{s: by_status.get(s, 0) for s in STATUSES},
        }

    def fields(self) -> list[FieldSummary]:
        """One :class:`FieldSummary` per field that changed somewhere, in the schema's order."""
        groups: dict[str, list[FieldChange]] = {}
        for chunk in self.chunks:
            for change in chunk.changes:
                groups.setdefault(_INDEX.sub("[]", change.field), []).append(change)
        out = []
        for name in sorted(groups, key=_schema_rank):
            changes = groups[name]
            flips = Counter(
                (c.before, c.after)
                for c in changes
                if c.kind == "value" and _scalar(c.before) and _scalar(c.after)
            )
            ratios = [c.similarity for c in changes if c.similarity is not None]
            out.append(
                FieldSummary(
                    field=name,
                    kind=changes[0].kind,
                    chunks=len(changes),
                    added=sum(len(c.added) for c in changes),
                    removed=sum(len(c.removed) for c in changes),
                    transitions=tuple(
                        (b, a, n) for (b, a), n in sorted(flips.items(), key=lambda i: -i[1])
                    ),
                    mean_similarity=round(sum(ratios) / len(ratios), 3) if ratios else None,
                )
            )
        return out

    def to_dict(self) -> JSONObject:
        return {
            "format": FORMAT,
            "identical": self.identical,
            "runs": {"a": self.a.to_dict(), "b": self.b.to_dict()},
            "letters": {
                "compared": list(self.compared),
                "only_in_a": list(self.only_in_a),
                "only_in_b": list(self.only_in_b),
                "cleaned_changed": list(self.cleaned_changed),
            },
            "duplicate_ids": [d.to_dict() for d in self.duplicates],
            "counts": dict(self.counts()),
            "fields": [f.to_dict() for f in self.fields()],
            "chunks": [c.to_dict() for c in self.chunks],
        }


_ORDER = {name: i for i, name in enumerate(Metadata.model_fields)}


def _schema_rank(name: str) -> tuple[int, str]:
    """Metadata's own field order; a nested field right after its parent's siblings."""
    return (_ORDER.get(re.split(r"[.\[]", name, maxsplit=1)[0], len(_ORDER)), name)


def _scalar(value: JSONValue) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _span(chunk: Chunk) -> tuple[int, int]:
    span = chunk.metadata.source_span
    return (span.start_char, span.end_char_exclusive)


def _overlapping(chunk: Chunk, others: list[Chunk]) -> tuple[str, ...]:
    start, end = _span(chunk)
    return tuple(
        o.chunk_id
        for o in others
        if o.metadata.chunk_tier == chunk.metadata.chunk_tier
        and _span(o)[0] < end
        and start < _span(o)[1]
    )


def _letter_diff(
    letter: str, a: tuple[Chunk, ...], b: tuple[Chunk, ...]
) -> tuple[list[ChunkDiff], int]:
    """The chunk diffs of one letter and its number of unchanged chunks (a duplicated id: its
    first chunk)."""
    in_a: dict[str, Chunk] = {}
    in_b: dict[str, Chunk] = {}
    for chunk in a:
        in_a.setdefault(chunk.chunk_id, chunk)
    for chunk in b:
        in_b.setdefault(chunk.chunk_id, chunk)
    out: list[ChunkDiff] = []
    unchanged = 0
    for cid, new in in_b.items():
        old = in_a.get(cid)
        if old is None:
            continue
        changes = tuple(compare_fields(chunk_fields(old), chunk_fields(new)))
        if old.content != new.content or _span(old) != _span(new):
            out.append(ChunkDiff(letter, cid, "rebounded", _span(old), _span(new), changes))
        elif changes:
            out.append(ChunkDiff(letter, cid, "changed", _span(old), _span(new), changes))
        else:
            unchanged += 1
    removed = [c for cid, c in in_a.items() if cid not in in_b]
    added = [c for cid, c in in_b.items() if cid not in in_a]
    # an id that moved: the same text at the same span under another id
    by_place = {(_span(c), c.content): c for c in removed}
    for new in list(added):
        old = by_place.pop((_span(new), new.content), None)
        if old is None:
            continue
        removed.remove(old)
        added.remove(new)
        changes = tuple(compare_fields(chunk_fields(old), chunk_fields(new)))
        out.append(
            ChunkDiff(letter, new.chunk_id, "moved", _span(old), _span(new), changes, old.chunk_id)
        )
    for old in removed:
        out.append(
            ChunkDiff(
                letter, old.chunk_id, "removed", _span(old), None, overlaps=_overlapping(old, added)
            )
        )
    for new in added:
        out.append(
            ChunkDiff(
                letter, new.chunk_id, "added", None, _span(new), overlaps=_overlapping(new, removed)
            )
        )
    return out, unchanged


def _duplicates(letter: str, a: tuple[Chunk, ...], b: tuple[Chunk, ...]) -> list[DuplicateId]:
    """The ids more than one chunk of the letter carries in A or in B."""
    count_a = Counter(c.chunk_id for c in a)
    count_b = Counter(c.chunk_id for c in b)
    out = []
    for cid in dict.fromkeys([*count_a, *count_b]):
        if count_a[cid] > 1 or count_b[cid] > 1:
            copies_a = [c for c in a if c.chunk_id == cid]
            copies_b = [c for c in b if c.chunk_id == cid]
            same = copies_a == copies_b
            out.append(DuplicateId(letter, cid, count_a[cid], count_b[cid], same))
    return out


def _reading_order(d: ChunkDiff) -> tuple:
    span = d.span_b or d.span_a or (0, 0)
    return (d.letter, span[0], -span[1], d.chunk_id)


def diff_runs(a: RunFolder, b: RunFolder) -> RunDiff:
    """Compare run ``a`` (before) with run ``b`` (after)."""
    compared = tuple(sorted(set(a.letters) & set(b.letters)))
    chunks: list[ChunkDiff] = []
    duplicates: list[DuplicateId] = []
    unchanged = 0
    for letter in compared:
        found, same = _letter_diff(letter, a.letters[letter], b.letters[letter])
        chunks += found
        unchanged += same
        duplicates += _duplicates(letter, a.letters[letter], b.letters[letter])
    chunks.sort(key=_reading_order)
    return RunDiff(
        a=a.identity,
        b=b.identity,
        only_in_a=tuple(sorted(set(a.letters) - set(b.letters))),
        only_in_b=tuple(sorted(set(b.letters) - set(a.letters))),
        cleaned_changed=tuple(k for k in compared if a.cleaned[k] != b.cleaned[k]),
        compared=compared,
        chunks=tuple(chunks),
        unchanged=unchanged,
        chunks_a=sum(len(a.letters[k]) for k in compared),
        chunks_b=sum(len(b.letters[k]) for k in compared),
        duplicates=tuple(duplicates),
    )


# --------------------------------------------------------------------------- text


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _plain(value: JSONValue) -> str:
    """A value for the terminal: control characters (escape sequences) shown, not sent."""
    text = "null" if value is None else field_text(value)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text).replace("\n", "\\n")


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [head, *rows]
    ]


def identity_rows(a: RunIdentity, b: RunIdentity) -> list[tuple[str, JSONValue, JSONValue]]:
    """Both runs' identity rows side by side, paired by name: a row one run has and the other
    lacks (a prompt file or vocabulary it did not record; every row of a folder without
    ``run.json``) is None, unknown, on the other side."""
    rows_a, rows_b = dict(a.rows()), dict(b.rows())
    return [(name, rows_a.get(name), rows_b.get(name)) for name in {**rows_a, **rows_b}]


def _identity_lines(d: RunDiff) -> list[str]:
    rows = []
    for name, va, vb in identity_rows(d.a, d.b):
        mark = "" if va == vb or name == "folder" else "*"
        short = [
            "unknown"
            if v is None
            else _plain(v)[:12]
            if name.endswith("sha256") or " " in name
            else _plain(v)
            for v in (va, vb)
        ]
        rows.append([f"{mark}{name}", *short])
    lines = _table(["run", "A (before)", "B (after)"], rows)
    for ident, label in ((d.a, "A"), (d.b, "B")):
        if ident.problem:
            lines.append(f"{label}: run.json not read ({_plain(ident.problem)})")
    return lines


def _field_lines(d: RunDiff) -> list[str]:
    rows = []
    for f in d.fields():
        notes = [f"{_plain(b)} -> {_plain(a)} x{n}" for b, a, n in f.transitions[:4]]
        if len(f.transitions) > 4:
            notes.append(f"... {len(f.transitions) - 4} more")
        if f.mean_similarity is not None:
            notes.append(f"mean similarity {f.mean_similarity:.2f}")
        rows.append(
            [
                f.field,
                f.kind,
                str(f.chunks),
                str(f.added) if f.kind == "set" else "",
                str(f.removed) if f.kind == "set" else "",
                "; ".join(notes),
            ]
        )
    if not rows:
        return ["no field changed"]
    return _table(["field", "kind", "chunks", "added", "removed", "changes"], rows)


def _change_lines(c: FieldChange) -> list[str]:
    if c.kind == "set":
        parts = [f"+{_plain(v)}" for v in c.added] + [f"-{_plain(v)}" for v in c.removed]
        return [f"  {c.field}: " + ", ".join(parts)]
    if c.kind == "text" and c.similarity is not None:
        return [
            f"  {c.field}: rewritten (similarity {c.similarity:.2f})",
            f"    - {_plain(c.before)}",
            f"    + {_plain(c.after)}",
        ]
    return [f"  {c.field}: {_plain(c.before)} -> {_plain(c.after)}"]


def _chunk_lines(c: ChunkDiff) -> list[str]:
    head = f"{c.chunk_id}  {c.status}"
    if c.status == "moved":
        head += f" (was {c.id_in_a})"
    if c.status in ("rebounded", "moved", "removed", "added"):
        spans = [
            f"A {list(c.span_a)}" if c.span_a else "",
            f"B {list(c.span_b)}" if c.span_b else "",
        ]
        head += "  chars " + " -> ".join(s for s in spans if s)
    if c.overlaps:
        head += f"  overlaps {', '.join(c.overlaps)}"
    lines = [head]
    for change in c.changes:
        lines += _change_lines(change)
    return lines


def _duplicate_lines(d: RunDiff) -> list[str]:
    return [
        f"{x.chunk_id}  duplicate id: {x.in_a} chunk(s) carry it in A, {x.in_b} in B"
        + ("" if x.same else ", not the same chunks")
        + "; only the first is compared; a chunk file holds one chunk per id: run "
        "letterchunk validate on it"
        for x in d.duplicates
    ]


def render_text(d: RunDiff) -> str:
    """The human report: both runs side by side (``*`` marks what differs), the letters, the
    chunk counts, one row per changed field, then every chunk that changed."""
    n = d.counts()
    lines = [f"letterchunk diff: A {_plain(d.a.folder)} -> B {_plain(d.b.folder)}", ""]
    lines += _identity_lines(d)
    lines += [
        "",
        f"letters: {len(d.compared)} in both"
        + (f"; only in A: {', '.join(d.only_in_a)}" if d.only_in_a else "")
        + (f"; only in B: {', '.join(d.only_in_b)}" if d.only_in_b else "")
        + (f"; cleaned text differs: {', '.join(d.cleaned_changed)}" if d.cleaned_changed else ""),
        f"chunks: {n['chunks_a']} in A, {n['chunks_b']} in B: {n['unchanged']} unchanged, "
        + ", ".join(f"{n[s]} {s}" for s in STATUSES),
        "",
    ]
    if d.duplicates:
        lines += [*_duplicate_lines(d), ""]
    lines += _field_lines(d)
    for chunk in d.chunks:
        lines += ["", *_chunk_lines(chunk)]
    lines += ["", "identical" if d.identical else "different"]
    return "\n".join(lines) + "\n"
