"""The review queue: every decision an analyst can take on an enriched output folder.

:func:`build_queue` reads a folder's chunk files (``X.jsonl``), their evidence sidecars
(``X.evidence.jsonl``: the judges' probabilities), their repair reports (``X.report.jsonl``)
and ``reviews.jsonl``, and lists one :class:`Item` for

* each confession paragraph the judge was asked about (``confession``; the paragraph's
  self-critical sentence is the quote), threshold ``PARAGRAPH_THRESHOLD``;
* each candidate rule sentence the judge rated (``rule``): every one in
  ``judgements.rule_p_yes``, not only those kept as principles, threshold
  ``PRINCIPLE_THRESHOLD``;
* each chunk's concepts (``concepts``: the answer's ``buffett_concepts``);
* each chunk whose latest run repaired it or ended failed (``chunk``, target ``repaired`` or
  ``halted``); the chunks with a validator warning (target ``warning``) come from
  :func:`warning_items`, which is slow (the validator reads every file), so the page server
  computes them after it starts.

The thresholds are those in force for the folder: ``run.json``'s, else the built-in ones
(:mod:`letterchunk.review.thresholds`).  Items with a probability come first, most uncertain first:
by the distance ``|p - threshold|``, not by the distance from 0.5.  The repaired, halted and
warned chunks follow, then the concepts (neither has a probability).

Each item knows where its quote sits in the chunk's content (``start``/``end``, found
whitespace-insensitively as ``report.html`` finds evidence), and its status is read from the
review records: the latest decision on its anchor that no undo cancelled.
"""

from __future__ import annotations

import bisect
import logging
import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate
from pathlib import Path
from typing import Any, Literal

from letterchunk.contract.jsontypes import JSONObject, JSONValue
from letterchunk.contract.validate import validate_path
from letterchunk.contract.vocabulary import concepts_for
from letterchunk.io import read_json_objects
from letterchunk.layout import (
    CHUNKS_SUFFIX,
    EVIDENCE_SUFFIX,
    REPORT_SUFFIX,
    chunk_stem,
    is_chunk_file,
)
from letterchunk.review.folder import read_run, run_identity_of
from letterchunk.review.records import AnchorKey, ReviewRecord, text_sha256
from letterchunk.review.thresholds import BUILT_IN, thresholds_of_run

__all__ = [
    "Chunk",
    "FlatText",
    "Item",
    "Kind",
    "Queue",
    "Status",
    "Thresholds",
    "build_queue",
    "chunk_files",
    "item_status",
    "queue_of",
    "quote_span",
    "read_thresholds",
    "statuses",
    "vocabulary_of",
    "warning_items",
    "warning_notes",
]

log = logging.getLogger(__name__)

Kind = Literal["confession", "rule", "concepts", "chunk"]
KINDS: tuple[Kind, ...] = ("confession", "rule", "chunk", "concepts")
Status = Literal["open", "accepted", "rejected", "edited", "skipped"]
# whitespace that is not a single plain space: a run of two or more, or a newline or tab
# alone (written as one whitespace character, then more or none if it was not a space: twice
# as fast as the two alternatives ``\s{2,}|[^\S ]``); captured, so a split keeps the runs
_RUNS = re.compile(r"(\s(?:\s+|(?<! )))")
_STATUS = {"accept": "accepted", "reject": "rejected", "edit": "edited", "skip": "skipped"}
# chunk outcomes of a repair report that ask for a look: the chunk was changed, or is not
# enriched at all (the run went on past it or stopped at it)
_FLAGS = {"repaired": "repaired", "failed": "halted", "needs-llm": "halted"}


@dataclass(frozen=True)
class Thresholds:
    """The judges' thresholds in force for a folder."""

    confession: float = BUILT_IN.confession_paragraph
    rule: float = BUILT_IN.rule_sentence


@dataclass(frozen=True)
class Chunk:
    """One chunk as the page shows it: content and the model's editable values."""

    letter: str  # the chunk file's stem
    chunk_id: str
    content: str
    sha256: str  # the anchor: sha256 of the content
    summary: str | None
    concepts: tuple[str, ...]
    # (statement, evidence quote or None) per principle, in the chunk's order
    principles: tuple[tuple[str, str | None], ...]

    @property
    def anchor(self) -> str:
        return f"{self.letter}/{self.chunk_id}#{self.sha256}"


@dataclass(frozen=True)
class Item:
    """One decision to take: about ``field``/``target`` of chunk number ``chunk``."""

    kind: Kind
    chunk: int  # index into Queue.chunks
    target: str | None  # the judged sentence (confession, rule) or the flag (chunk)
    quote: str | None  # the evidence highlighted in the chunk
    start: int | None  # the quote's offsets in the chunk's content (None: not found)
    end: int | None
    model_value: JSONValue
    p: float | None
    threshold: float | None
    note: str | None = None  # what the repair report or validator says (chunk items)

    @cached_property  # asked twice an item (sorting, then the page's row): computed once
    def uncertainty(self) -> float | None:
        if self.p is None or self.threshold is None:
            return None
        return round(abs(self.p - self.threshold), 4)

    def sort_key(self) -> tuple[int, float]:
        unc = self.uncertainty
        if unc is not None:
            return (0, unc)
        return (1, 0.0) if self.kind == "chunk" else (2, 0.0)


@dataclass
class Queue:
    """The items of a folder, most uncertain first, with the chunks they point into."""

    folder: Path
    chunks: list[Chunk]
    items: list[Item]
    thresholds: Thresholds
    run: dict[str, str]  # {"model", "prompts_sha256"} of run.json's identity, when known
    vocabulary: list[str]
    letters: list[str] = field(default_factory=list)

    def key(self, item: Item) -> AnchorKey:
        return (self.chunks[item.chunk].anchor, item.kind, item.target)


class FlatText:
    """A text with every whitespace run read as one space, mapped back to the text's offsets:
    each quote is then found with ``str.find`` (one pass to build per chunk) instead of a
    pattern compiled per quote, which cost seconds over a corpus's 15,000 quotes."""

    def __init__(self, content: str) -> None:
        # only the runs that are not one plain space change: the rest is copied as it is.
        # Built with split, map and accumulate (no Python loop per run: a corpus has 10^5)
        parts = _RUNS.split(content)  # piece, run, piece, ..., piece: one regex pass
        pieces, runs = parts[0::2], parts[1::2]
        self.flat = " ".join(pieces)
        before = accumulate(map(len, pieces[:-1]))  # piece characters before each run
        # where each run's one space sits in the flat text
        self.run_at: list[int] = list(map(operator.add, before, range(len(runs))))
        # content offset - flat offset after each run
        grown = accumulate(map(len, runs))
        self.shift: list[int] = list(map(operator.sub, grown, range(1, len(runs) + 1)))

    def _offset(self, flat: int) -> int:
        """The content offset of the flat text's character ``flat`` (not a run's space)."""
        run = bisect.bisect_right(self.run_at, flat) - 1
        return flat + (self.shift[run] if run >= 0 else 0)

    def span(self, quote: str | None) -> tuple[int | None, int | None]:
        words = (quote or "").split()
        if not words:
            return None, None
        joined = " ".join(words)
        found = self.flat.find(joined)
        if found < 0:
            return None, None
        last = found + len(joined) - 1  # a word's last character, never a space
        return self._offset(found), self._offset(last) + 1


def quote_span(content: str, quote: str | None) -> tuple[int | None, int | None]:
    """Where ``quote`` sits in ``content``, whitespace-insensitively; (None, None) if absent."""
    return FlatText(content).span(quote)


def read_thresholds(folder: Path) -> tuple[Thresholds, dict[str, str]]:
    """The thresholds in force and the run identity (model, prompts hash) of ``run.json``."""
    run = read_run(folder)
    found = thresholds_of_run(run)
    thresholds = Thresholds(confession=found.confession_paragraph, rule=found.rule_sentence)
    return thresholds, {k: v for k, v in run_identity_of(run).items() if v}


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def chunk_files(folder: Path) -> list[Path]:
    """The folder's chunk files (``X.jsonl``), sorted."""
    return sorted(p for p in folder.glob(f"*{CHUNKS_SUFFIX}") if is_chunk_file(p))


def _p(value: JSONValue) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _chunk(letter: str, row: JSONObject) -> Chunk:
    meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    content = str(row.get("content") or "")
    concepts = meta.get("buffett_concepts")
    principles = meta.get("principles")
    summary = meta.get("contextual_summary")
    return Chunk(
        letter=letter,
        chunk_id=str(row.get("chunk_id")),
        content=content,
        sha256=text_sha256(content),
        summary=summary if isinstance(summary, str) else None,
        concepts=tuple(str(c) for c in concepts) if isinstance(concepts, list) else (),
        principles=tuple(
            (str(p.get("statement", "")), None) for p in principles if isinstance(p, dict)
        )
        if isinstance(principles, list)
        else (),
    )


def _with_evidence(chunk: Chunk, evidence: JSONObject | None) -> Chunk:
    quotes = evidence.get("principle_evidence") if evidence else None
    if not isinstance(quotes, list):
        return chunk
    principles = tuple(
        (statement, str(quotes[i]) if i < len(quotes) else None)
        for i, (statement, _) in enumerate(chunk.principles)
    )
    return Chunk(**{**chunk.__dict__, "principles": principles})


def _judged(index: int, chunk: Chunk, evidence: JSONObject, t: Thresholds) -> list[Item]:
    judgements = evidence.get("judgements")
    if not isinstance(judgements, dict):
        return []
    items: list[Item] = []
    flat = FlatText(chunk.content)
    asked = (("confession", "confession_paragraphs", t.confession), ("rule", "rule_p_yes", t.rule))
    for kind, key, threshold in asked:
        rows = judgements.get(key)
        for row in rows if isinstance(rows, list) else []:
            if not isinstance(row, dict) or not isinstance(row.get("sentence"), str):
                continue
            sentence, p = str(row["sentence"]), _p(row.get("p_yes"))
            start, end = flat.span(sentence)
            items.append(
                Item(
                    kind="confession" if kind == "confession" else "rule",
                    chunk=index,
                    target=sentence,
                    quote=sentence,
                    start=start,
                    end=end,
                    model_value=None if p is None else p >= threshold,
                    p=p,
                    threshold=threshold,
                )
            )
    return items


def _flag(index: int, runs: list[JSONObject]) -> Item | None:
    outcome = runs[-1].get("outcome") if runs else None
    flag = _FLAGS.get(str(outcome))
    if flag is None:
        return None
    notes = []
    for rec in runs:
        found = rec.get("violations")
        for v in found if isinstance(found, list) else []:
            if isinstance(v, dict):
                notes.append(f"{v.get('code', '?')}: {v.get('message', '')}".strip())
    error = runs[-1].get("error")
    if isinstance(error, str) and error:
        notes.append(error)
    note = "; ".join(dict.fromkeys(notes)) or None
    return Item("chunk", index, flag, None, None, None, outcome, None, None, note)


def _read(path: Path) -> list[JSONObject]:
    """The JSON objects of a JSONL file (unusable lines left out, as report.html does)."""
    return read_json_objects(path, lenient=True)[0] if path.is_file() else []


def _latest_run(records: list[JSONObject]) -> dict[str, list[JSONObject]]:
    """``chunk_id -> the records of the run that wrote last about it``, by attempt."""
    runs: dict[str, dict[object, list[JSONObject]]] = {}
    for rec in records:
        by_run = runs.setdefault(str(rec.get("chunk_id")), {})
        by_run.setdefault(rec.get("run_id"), []).append(rec)
    out: dict[str, list[JSONObject]] = {}
    for chunk_id, by_run in runs.items():
        latest = list(by_run.values())[-1]
        out[chunk_id] = sorted(latest, key=lambda r: _p(r.get("attempt")) or 0.0)
    return out


def _letter(folder: Path, path: Path, index0: int, t: Thresholds) -> tuple[list[Chunk], list[Item]]:
    letter = chunk_stem(path)
    rows = _read(path)
    evidence = {str(r.get("chunk_id")): r for r in _read(folder / f"{letter}{EVIDENCE_SUFFIX}")}
    runs = _latest_run(_read(folder / f"{letter}{REPORT_SUFFIX}"))
    chunks: list[Chunk] = []
    items: list[Item] = []
    for row in rows:
        chunk = _chunk(letter, row)
        ev = evidence.get(chunk.chunk_id)
        chunk = _with_evidence(chunk, ev)
        index = index0 + len(chunks)
        chunks.append(chunk)
        if ev is not None:
            items += _judged(index, chunk, ev, t)
        chunk_runs = runs.get(chunk.chunk_id)
        flagged = _flag(index, chunk_runs) if chunk_runs else None
        if flagged is not None:
            items.append(flagged)
        if "buffett_concepts" in _object(row.get("metadata")):
            items.append(
                Item("concepts", index, None, None, None, None, list(chunk.concepts), None, None)
            )
    return chunks, items


def build_queue(folder: str | Path) -> Queue:
    """The queue of ``folder`` (validator warnings excepted: :func:`warning_items`)."""
    folder = Path(folder)
    thresholds, run = read_thresholds(folder)
    return queue_of(folder, thresholds, run)


def queue_of(folder: Path, thresholds: Thresholds, run: dict[str, str]) -> Queue:
    """:func:`build_queue` with the thresholds and run identity already read."""
    chunks: list[Chunk] = []
    items: list[Item] = []
    letters = []
    for path in chunk_files(folder):
        got_chunks, got_items = _letter(folder, path, len(chunks), thresholds)
        chunks += got_chunks
        items += got_items
        letters.append(chunk_stem(path))
    items.sort(key=Item.sort_key)
    return Queue(folder, chunks, items, thresholds, run, vocabulary_of(letters), letters)


def vocabulary_of(letters: Iterable[str]) -> list[str]:
    """The concept names an edit of ``letters``' chunks may choose from, sorted."""
    vocabulary: set[str] = set()
    for letter in letters:
        vocabulary |= concepts_for(int(letter) if letter.isdigit() else letter)
    return sorted(vocabulary)


def warning_notes(folder: str | Path, letters: Iterable[str]) -> dict[str, list[str]]:
    """``"letter/chunk_id" -> ["code: message", ...]`` for each chunk of ``letters`` in
    ``folder`` the validator warns about now (stage ``enriched``).  Slow: every file is
    validated; plain data in and out, so it can run in another process."""
    notes: dict[str, list[str]] = {}
    for letter in letters:
        for v in validate_path(Path(folder) / f"{letter}{CHUNKS_SUFFIX}", stage="enriched"):
            if v.severity == "warning" and v.chunk_id:
                notes.setdefault(f"{letter}/{v.chunk_id}", []).append(f"{v.code}: {v.message}")
    return notes


def warning_items(queue: Queue, notes: dict[str, list[str]] | None = None) -> list[Item]:
    """One ``chunk`` item (target ``warning``) per chunk the validator warns about now
    (``notes``: :func:`warning_notes` of the queue's folder, computed here when not given)."""
    if notes is None:
        notes = warning_notes(queue.folder, queue.letters)
    index = {f"{c.letter}/{c.chunk_id}": i for i, c in enumerate(queue.chunks)}
    found = sorted((index[key], "; ".join(text)) for key, text in notes.items() if key in index)
    return [
        Item("chunk", at, "warning", None, None, None, "warning", None, None, note)
        for at, note in found
    ]


def item_status(records: Iterable[ReviewRecord]) -> tuple[Status, ReviewRecord | None]:
    """The status of one item from its records (file order): the latest record no undo
    cancelled (a skip counts here, unlike in ``effective_reviews``), and that record."""
    records = list(records)
    cancelled: set[str] = set()
    for r in reversed(records):
        if r.decision == "undo" and r.id not in cancelled and r.undoes:
            cancelled.add(r.undoes)
    for r in reversed(records):
        if r.decision != "undo" and r.id not in cancelled:
            return _STATUS[r.decision], r  # type: ignore[return-value]
    return "open", None


def statuses(records: Iterable[ReviewRecord]) -> dict[AnchorKey, tuple[Status, ReviewRecord]]:
    """:func:`item_status` of every item some record is about (open ones left out).

    An undo may name a record of another item: it is grouped with the record it cancels."""
    key_of: dict[str, AnchorKey | None] = {}
    grouped: dict[AnchorKey, list[ReviewRecord]] = {}
    for r in records:
        key = key_of.get(r.undoes or "") if r.decision == "undo" else r.key
        key_of[r.id] = key
        if key is not None:
            grouped.setdefault(key, []).append(r)
    out: dict[AnchorKey, tuple[Status, ReviewRecord]] = {}
    for key, found in grouped.items():
        status, record = item_status(found)
        if record is not None:
            out[key] = (status, record)
    return out
