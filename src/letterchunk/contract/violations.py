"""What a check reports: :class:`Violation`, the :class:`ValidationReport` of a run over files,
and the :class:`LetterContext` a letter is checked against (resolved once per letter into a
:class:`CheckContext`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Literal, NotRequired, Protocol, TypedDict

from letterchunk.contract.jsontypes import JSONValue
from letterchunk.contract.predicates import concept_key, value_key
from letterchunk.contract.rules import (
    FATAL_CODES,
    RULES,
    RuleKind,
    Severity,
    max_chunk_tokens,
    rule_kind,
)
from letterchunk.contract.schema import Chunk
from letterchunk.contract.vocabulary import load_concepts

__all__ = [
    "Stage",
    "STAGES",
    "EvidenceRecord",
    "Judgements",
    "ParagraphJudgement",
    "ReviewMark",
    "Violation",
    "LetterContext",
    "ValidationReport",
    "CheckContext",
    "Add",
    "check_stage",
    "violation",
    "placed",
]

Stage = Literal["segmented", "enriched"]

STAGES: tuple[str, ...] = ("segmented", "enriched")


class ParagraphJudgement(TypedDict):
    """One self-critical paragraph put to the confession judge: the sentence a tag would quote
    and the paragraph's yes-probability (None: the server gave none)."""

    sentence: str
    p_yes: float | None


class Judgements(TypedDict):
    """The follow-up judges' yes-probabilities for one chunk, rounded to four places
    (:meth:`letterchunk.enrich.judges.Verdicts.to_dict`)."""

    confession_paragraphs: list[ParagraphJudgement]
    principle_p_yes: list[float | None]  # one per principle, in order
    rule_p_yes: list[ParagraphJudgement]  # per candidate rule sentence


class ReviewMark(TypedDict):
    """An analyst's decision applied to a chunk (``letterchunk.review.apply``): it won over the
    model's value, ``by`` is always ``"review"``; ``anchor`` says whether the review was made on
    this chunk (``anchored``) or found it again after a re-segmentation (``re-anchored``)."""

    id: str
    field: str
    target: str | None
    decision: str
    model_value: JSONValue
    value: JSONValue
    reviewer: str
    time: str
    anchor: str
    by: str


class EvidenceRecord(TypedDict):
    """One line of the evidence sidecar ``YYYY.evidence.jsonl``, written as JSON in this key
    order (see :func:`letterchunk.contract.files.read_evidence`).

    ``content_type_evidence`` quotes the sentences a confession or principle tag rests on;
    ``principle_evidence`` quotes one sentence per principle, in order.  letterchunk always
    writes both; a sidecar another tool wrote may leave either out (read as empty).
    ``judgements`` is there when the follow-up judges were asked (a judging client, a Tier-1/2
    chunk); ``reviews`` when analysts' decisions were applied to the chunk.
    """

    chunk_id: str
    content_type_evidence: NotRequired[list[str]]
    principle_evidence: NotRequired[list[str]]
    judgements: NotRequired[Judgements]
    reviews: NotRequired[list[ReviewMark]]


@dataclass(frozen=True)
class Violation:
    """One broken rule.  ``field`` is a dotted path (``metadata.table_data.0.row_count``)."""

    code: str
    severity: Severity
    message: str
    chunk_id: str | None = None
    field: str | None = None
    file: str | None = None
    line: int | None = None

    @property
    def kind(self) -> RuleKind:
        """The rule's kind (:func:`letterchunk.contract.rules.rule_kind`)."""
        return rule_kind(self.code)

    def to_dict(self) -> dict[str, str | int | None]:
        return {**asdict(self), "kind": self.kind}

    def __str__(self) -> str:
        where = f"{self.file or '-'}:{self.line if self.line is not None else '-'}"
        return (
            f"{where} {self.chunk_id or '-'} {self.field or '-'} "
            f"{self.severity} {self.code} {self.message}"
        )


@dataclass
class LetterContext:
    """What the letter-level rules need besides the chunks (all optional).

    ``section_titles`` empty -> derived from the Tier-1 chunks; ``vocabulary`` None -> the
    shipped vocabulary; ``evidence`` is ``chunk_id -> evidence record`` (see
    :func:`letterchunk.contract.files.read_evidence`); None means no evidence was recorded.
    """

    cleaned_text: str | None = None
    section_titles: list[str] = field(default_factory=list)
    vocabulary: frozenset[str] | None = None
    evidence: dict[str, EvidenceRecord] | None = None


@dataclass
class ValidationReport:
    """Result of :func:`letterchunk.contract.validate.validate_paths`: files read, chunks
    parsed, violations in file order."""

    files: list[str] = field(default_factory=list)
    chunks: int = 0
    violations: list[Violation] = field(default_factory=list)

    @property
    def errors(self) -> list[Violation]:
        return [v for v in self.violations if v.severity == "error"]

    @property
    def warnings(self) -> list[Violation]:
        return [v for v in self.violations if v.severity == "warning"]

    @property
    def fatal(self) -> list[Violation]:
        return [v for v in self.violations if v.code in FATAL_CODES]


class CheckContext:
    """LetterContext resolved once per letter (vocabulary loaded, titles as a set)."""

    def __init__(self, context: LetterContext | None, chunks: Sequence[Chunk] = ()) -> None:
        context = context or LetterContext()
        self.cleaned = context.cleaned_text
        vocab = context.vocabulary
        if vocab is None:
            vocab = load_concepts()
        self.vocab = vocab
        self.vocab_folded = (
            _folded(vocab) if isinstance(vocab, frozenset) else {concept_key(c): c for c in vocab}
        )
        titles = list(context.section_titles)
        if not titles:
            titles = [c.metadata.section_title for c in chunks if c.metadata.chunk_tier == 1]
        self.titles = set(titles)
        self.evidence = context.evidence
        # a letter that is one Tier-1 chunk has no neighbour to merge a short chunk with
        self.single_t1 = sum(c.metadata.chunk_tier == 1 for c in chunks) == 1
        # rule size.context's limit, read from the environment once per letter, not per chunk
        self.max_tokens = max_chunk_tokens()
        # summary (as value_key folds it) -> {chunk_id: content} of the letter's chunks that
        # carry it (rule injection.duplicate_summary); empty when one chunk is checked alone
        self.summaries: dict[str, dict[str, str]] = {}
        for c in chunks:
            key = value_key(c.metadata.contextual_summary)
            if key:
                self.summaries.setdefault(key, {})[c.chunk_id] = c.content


@lru_cache(maxsize=4)
def _folded(vocab: frozenset[str]) -> dict[str, str]:
    """Folded concept -> concept, built once per vocabulary (every letter checks against the
    same one); callers only read it."""
    return {concept_key(c): c for c in vocab}


class Add(Protocol):
    """Records one violation of the chunk being checked: ``add(code, message, field)``."""

    def __call__(self, code: str, message: str, fld: str | None = None, /) -> None: ...


def check_stage(stage: str) -> None:
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, not {stage!r}")


def violation(
    code: str,
    message: str,
    *,
    chunk_id: str | None = None,
    field: str | None = None,
    file: str | None = None,
    line: int | None = None,
) -> Violation:
    """A violation of rule ``code`` with the rule's severity."""
    return Violation(code, RULES[code].severity, message, chunk_id, field, file, line)


def placed(v: Violation, *, file: str | None, line: int | None) -> Violation:
    """``v`` with ``file`` and ``line`` filled in where it has none."""
    return dataclasses.replace(
        v,
        file=v.file if v.file is not None else file,
        line=v.line if v.line is not None else line,
    )
