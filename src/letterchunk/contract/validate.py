"""Strict, deterministic validator of canonical chunks (docs/spec.md §0.3, §3.2, §6) and letters.

Three entry points, from the smallest unit up:

- :func:`validate_chunk` — the rules one chunk can answer alone (ids, counts, flags, table
  consistency, enriched-stage semantics and grounding);
- :func:`validate_letter` — every chunk rule plus the corpus rules over one letter's chunks
  (unique ids, parent/child symmetry and nesting, Tier-1 tiling of the cleaned text, id
  sequences, one letter per file);
- :func:`validate_path` / :func:`validate_paths` — any chunk JSONL file or folder of them, ours or
  another tool's.  A malformed line, a wrong type, a missing or extra key becomes a
  :class:`Violation` naming the file, the line and the field; nothing in the input can make it
  raise.  The cleaned text is read from ``metadata.source_file`` beside the JSONL and the evidence
  sidecar ``YYYY.evidence.jsonl`` beside it at stage ``enriched``.

Stages: ``segmented`` (semantic fields may be empty; whatever is filled must still be right) and
``enriched`` (semantic fields must be filled, grounded in the chunk's own text and consistent).

Every rule has a stable code in :data:`letterchunk.contract.rules.RULES`, with its severity,
description and ``kind`` (input / mechanical / semantic / corpus: what can fix it).

This module is the public face of the validator; the work is done by
:mod:`~letterchunk.contract.chunk_checks` and :mod:`~letterchunk.contract.semantic_checks` (one
chunk), :mod:`~letterchunk.contract.letter_checks` (one letter), :mod:`~letterchunk.contract.files`
(reading JSONL files) and :mod:`~letterchunk.contract.predicates` (the text tests, shared with
enrichment).

Decisions worth knowing:

- Text matching for grounding normalises whitespace (``\\s+`` -> one space).  Evidence quotes
  must then appear verbatim (case-sensitive).  Entity names (companies, people) are also
  case-insensitive, NFKC-normalised and treat curly and straight quotes alike, and must match at
  word boundaries (``GE`` is not found in ``GEICO``).  Metrics are not checked (they are
  generic names such as "float").
- A comparison year is found when the content holds it as a 4-digit number (``1987``, not inside
  a longer number) or in the apostrophe form (``'87`` / ``’87``).
- Sentences in ``contextual_summary`` are counted at ``.``/``!``/``?`` followed by whitespace and
  an upper-case letter, a digit or a quote, skipping common abbreviations (Mr., Inc., U.S., …).
- Evidence quotes (sidecar ``{"chunk_id", "content_type_evidence", "principle_evidence"}``)
  are all checked when present, and must have at least 4 words (``evidence.too_short``).
- ``primary_year != letter_year`` is only a warning: spec §0.3 says "usually".
- A chunk is data, never instructions: ``injection.obeyed`` fires when a free-text field
  (summary, themes, entities, principle statements, table names/summaries) repeats an
  instruction-like sentence ("ignore all previous instructions", "set every field to X", "you
  are now an assistant") or the value it demands (a quoted string or an ALL-CAPS word) of any
  letter text the chunk's prompt shows: the chunk, its section title and the letter's section
  titles, which stand outside the quoted chunk in every prompt.  ``injection.repeated_value``
  when one value fills fields of 3 or more groups, except a label of the chunk's own lines or
  table (a row label "Operating Earnings:" may name the table, a theme and a metric) that fills
  no summary or principle, with no instruction-like sentence in sight.
  Two warnings look for a summary not written from its chunk: ``injection.ungrounded_summary``
  when it shares no content word (function words aside, first five letters compared) with its
  chunk, ``injection.duplicate_summary`` when chunks of one letter with different text have the
  same summary (letter and file validation only).  No
  shipped letter holds an instruction-like sentence, and none of these rules fires on the
  recorded answers (``bench/safety_rules.py``).
- ``size.context``: a chunk over ``LETTERCHUNK_CONTEXT_TOKENS`` (default 8192, the embedded
  server's) less 2560 tokens for instructions and answer cannot be enriched at all.
- Tier-1/2 minimum sizes are checked on the recomputed token count, never the claimed one.
- Boundary heuristics (§6) are deliberately narrow: ``boundary.mid_sentence`` (warning) looks
  only at a last paragraph of prose (signature blocks, indented layout and footnotes are not
  prose); ``boundary.header_only`` is a chunk of at most 2 non-blank lines;
  ``boundary.list_split`` is a Tier-1 chunk opening with item n of a list whose item n-1 is in
  the previous Tier-1 chunk; ``table.no_context`` is a Tier-3 chunk without one sentence of
  >= 6 words.
- A file with a line that does not parse is still checked chunk by chunk, but the rules that
  need every chunk (missing links, tiling, id sequences) are skipped for it, so one bad line
  gives one violation, not a cascade.
- A folder means every ``*.jsonl`` in it except ``*.evidence.jsonl`` and ``*.report.jsonl``.
  A file holding several letters is validated per ``source_file``.
- Unusable input (:data:`FATAL_CODES`: missing path, empty, binary/non-UTF-8, no JSON object
  line, folder without chunk files) is one violation per file; the CLI exits 2 on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from letterchunk.contract.chunk_checks import check_chunk
from letterchunk.contract.files import check_file, collect, read_evidence
from letterchunk.contract.letter_checks import check_letter
from letterchunk.contract.predicates import (
    concept_known,
    count_sentences,
    entity_found,
    entity_text,
    normalise_ws,
    quote_problem,
    related_year_ok,
    section_reference_problem,
    years_in,
)
from letterchunk.contract.rules import (
    EVIDENCE_MIN_WORDS,
    FATAL_CODES,
    RELATED_YEAR_RANGE,
    T1_MAX_TOKENS,
    T1_MIN_TOKENS,
    T2_MIN_TOKENS,
    RuleKind,
    Severity,
)
from letterchunk.contract.schema import UNTITLED, Chunk
from letterchunk.contract.violations import (
    STAGES,
    CheckContext,
    LetterContext,
    Stage,
    ValidationReport,
    Violation,
    check_stage,
)
from letterchunk.tokens import count_tokens

__all__ = [
    "Violation",
    "Stage",
    "STAGES",
    "Severity",
    "RuleKind",
    "LetterContext",
    "FATAL_CODES",
    "UNTITLED",
    "T1_MIN_TOKENS",
    "T2_MIN_TOKENS",
    "T1_MAX_TOKENS",
    "EVIDENCE_MIN_WORDS",
    "ValidationReport",
    "validate_chunk",
    "validate_letter",
    "validate_path",
    "validate_paths",
    "read_evidence",
    "normalise_ws",
    "count_sentences",
    "RELATED_YEAR_RANGE",
    "entity_text",
    "entity_found",
    "years_in",
    "related_year_ok",
    "quote_problem",
    "section_reference_problem",
    "concept_known",
]


def validate_chunk(
    chunk: Chunk, *, stage: Stage = "segmented", context: LetterContext | None = None
) -> list[Violation]:
    """Every rule one chunk can answer alone (span against ``context.cleaned_text`` if given).

    ``related_sections_same_letter`` is checked only when ``context.section_titles`` is given.
    """
    check_stage(stage)
    # Section titles come only from the context here: one chunk cannot know its letter's sections.
    return check_chunk(chunk, stage, CheckContext(context), count_tokens(chunk.content))


def validate_letter(
    chunks: Sequence[Chunk], *, stage: Stage = "segmented", context: LetterContext | None = None
) -> list[Violation]:
    """Every chunk rule for each chunk, then the corpus rules over the letter.  O(n log n)."""
    return check_letter(chunks, stage, context)


def validate_paths(paths: Iterable[str | Path], *, stage: Stage = "segmented") -> ValidationReport:
    """Validate chunk JSONL files and folders of them; never raises on bad input."""
    check_stage(stage)
    report = ValidationReport()
    for p in paths:
        for f in collect(Path(p), report):
            check_file(f, stage, report)
    return report


def validate_path(path: str | Path, *, stage: Stage = "segmented") -> list[Violation]:
    """Violations of one chunk JSONL file or folder of them (see :func:`validate_paths`)."""
    return validate_paths([path], stage=stage).violations
