"""Enrichment: the one LLM call per chunk that fills the semantic metadata fields.

The LLM answers a small response model (:class:`Enrichment` for Tier-1/2 narrative chunks,
:class:`TableEnrichment` for Tier-3 table chunks) that holds *only* fields needing judgement plus
verbatim evidence.  Everything mechanical — ids, spans, counts, tiers, parent/child links, table
columns/rows, ``primary_year`` — stays as the segmenter computed it; :func:`apply_enrichment`
copies the answer into a new :class:`~letterchunk.contract.schema.Chunk` and touches nothing else.

Per chunk the model is narrowed by :func:`response_model_for` so that the server's JSON-schema
grammar (llama-server turns ``response_format`` into a grammar) already rules out answers the
validator would reject: ``buffett_concepts`` is an enum over the concepts *cued* in the chunk
(see below), entity names an enum over the proper names written in the chunk, evidence quotes
an enum over its sentences (these three only with ``PromptContext.grounded_choices``),
``related_sections_same_letter`` an enum over the letter's own section titles,
``comparison_years`` an enum over the years written in the chunk, list lengths are capped, and
``section_title`` is only asked for when the segmenter could not find one
(:data:`letterchunk.text.segment.UNTITLED`).  Every candidate list passes the validator's own
predicate (``validate.entity_found``, ``quote_problem``, ``years_in``,
``section_reference_problem``, ``concept_known``) before it becomes an enum, so nothing the
grammar offers can be rejected; ``related_years`` carries the validator's year range, and under
a grammar ``contextual_summary`` a pattern of at most three sentences (:data:`SUMMARY_PATTERN`).

Cues, computed by code (a 1.5B model left to itself tagged almost every chunk with the first
three concepts of the alphabetical vocabulary, and never tagged a confession):

* **Concepts** — ``schemas/buffett_concepts.json`` maps each concept to textual cues
  (:func:`~letterchunk.contract.vocabulary.load_cues`; the concept's own name always counts as
  a cue).  A
  cue matches case-insensitively at the start of a word ("repurchas" matches "repurchased").
  :func:`cued_concepts` orders the cued concepts by number of cue hits (ties: vocabulary order).
  With a grammar (``grounded_choices``) the model may choose *only* among them, and must answer
  ``[]`` when none is cued; without one (hosted tool calls) the enum keeps the whole vocabulary
  and the prompt names the cued concepts first as suggestions.
* **Confessions** — :func:`confession_sentences` picks the chunk's sentences that hold a
  self-critical cue (:data:`CONFESSION_CUES`: "mistake"/"mistaken(ly)", "error", "erred",
  "wrong", "blunder", "regret", "misjudg…", "miscalculat…", "should (not) have",
  "shouldn't have", "failed to", "embarrass…").  Bare "I was"/"we were" are left out on
  purpose: they open far more reports than admissions, and an admission in the letters nearly
  always carries one of the words above; so are "foolish"/"dumb", which Buffett mostly uses to
  state a principle ("we think it foolish to…").  With a grammar, ``content_type`` may be
  ``mistake_confession`` only when such a sentence exists, and ``content_type_evidence`` lists
  those sentences first.  The user prompt names them as "possible confession sentences".

Evidence is not a canonical key; :func:`evidence_record` turns it into one line of the
``YYYY.evidence.jsonl`` sidecar::

    {"chunk_id": ..., "content_type_evidence": [...], "principle_evidence": [...]}

:data:`FIELDS` maps each response field to the canonical metadata path it fills (the repair loop
uses it to re-ask only the fields behind a violation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from letterchunk.contract.schema import (
    Chunk,
    CrossReferences,
    Entities,
    Level,
    Principle,
    PrincipleCategory,
    TableData,
    TemporalReferences,
)
from letterchunk.contract.validate import (
    RELATED_YEAR_RANGE,
    concept_known,
    entity_found,
    entity_text,
    normalise_ws,
    quote_problem,
    section_reference_problem,
    years_in,
)
from letterchunk.llm import prompts

__all__ = [
    "UNTITLED",
    "NarrativeType",
    "PromptContext",
    "EnrichedEntities",
    "EnrichedPrinciple",
    "EnrichedTable",
    "Enrichment",
    "TableEnrichment",
    "FIELDS",
    "EVIDENCE_FIELDS",
    "response_model_for",
    "build_messages",
    "apply_enrichment",
    "evidence_record",
    "years_in_text",
    "name_candidates",
    "sentence_choices",
    "complete_sentences",
    "cued_concepts",
    "confession_sentences",
    "CONFESSION_CUES",
    "load_vocabulary",
    "SUMMARY_PATTERN",
    "without_choices",
]

try:  # the segmenter owns the constant; keep a fallback so this module imports alone
    from letterchunk.text.segment import UNTITLED
except ImportError:  # pragma: no cover
    UNTITLED = "Untitled section"

NarrativeType = Literal["narrative", "mistake_confession", "principle_statement"]

# Caps that keep the 1.5B model's answer short; the prompt states the same numbers.
MAX_THEMES, MAX_CONCEPTS, MAX_PRINCIPLES, MAX_EVIDENCE = 4, 3, 2, 2
MAX_COMPANIES, MAX_PEOPLE, MAX_METRICS = 4, 3, 3
MAX_RELATED_SECTIONS, MAX_RELATED_YEARS, MAX_COMPARISON_YEARS = 2, 2, 4
# String caps (llama.cpp turns maxLength into the grammar, so a string that starts repeating
# itself, seen at temperature 0 on a holdings table, is closed instead of running to max_tokens)
MAX_NAME_CHARS, MAX_STATEMENT_CHARS, MAX_SUMMARY_CHARS, MAX_CONTEXT_CHARS = 80, 240, 320, 480
MAX_SUMMARY_SENTENCE = 400  # characters of one summary sentence under a grammar (see below)

# contextual_summary under a grammar: at most three sentences (rule summary.sentences), not
# blank (summary.missing).  llama.cpp compiles ``pattern`` into the grammar but then ignores
# maxLength (the two do not combine), so the pattern bounds the length itself: each sentence
# holds at most MAX_SUMMARY_SENTENCE units.  The bound is generous on purpose: the grammar ends
# a sentence by force when it is reached, and at 160 units live runs of the embedded model had
# summaries cut mid-word ("the impact on the 197. 8 financial results").
# The validator ends a sentence at [.!?]+ and closing quotes followed by whitespace; here such
# an end may only be followed by one space and the next of at most three sentences, and inside
# a sentence [.!?] must be followed by a non-space (1.5, U.S., "e.g.,").  That is stricter than
# the validator (an abbreviation ends a sentence here), never looser.  The pattern is matched on
# the raw JSON text by the grammar and on the decoded string by pydantic: JSON's '"' and '\',
# control characters and whitespace other than ' ' are left out so the two read the same
# characters (a summary uses curly quotes).
# Only the syntax llama.cpp's converter reads: ^...$, [...] classes, groups, | and {m,n}.
_NOT_TEXT = r'"\\\x00-\x1f\x7f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000'
_CLOSERS = r"'\u2019\u201d)\]"
_WORD_CHAR = rf"[^.!? {_NOT_TEXT}]"  # first character: not blank, not an end mark
_PLAIN = rf"[^.!?{_NOT_TEXT}]"
_MARK = rf"[.!?]{{1,3}}[{_CLOSERS}]{{0,2}}"
_SENTENCE = rf"({_PLAIN}|{_MARK}[^.!? {_CLOSERS}{_NOT_TEXT}]){{0,{MAX_SUMMARY_SENTENCE}}}"
SUMMARY_PATTERN = (
    rf"^{_WORD_CHAR}{_SENTENCE}({_MARK}( {_SENTENCE}({_MARK}( {_SENTENCE}({_MARK})?)?)?)?)?$"
)
RelatedYear = Annotated[int, Field(ge=RELATED_YEAR_RANGE[0], le=RELATED_YEAR_RANGE[1])]


class _Answer(BaseModel):
    """Response models accept JSON from an LLM: no extra keys, no silent defaults."""

    model_config = ConfigDict(extra="forbid")


class EnrichedEntities(_Answer):
    companies: list[str] = Field(max_length=MAX_COMPANIES)
    people: list[str] = Field(max_length=MAX_PEOPLE)
    metrics: list[str] = Field(max_length=MAX_METRICS)


class EnrichedPrinciple(_Answer):
    statement: str = Field(min_length=1, max_length=MAX_STATEMENT_CHARS)
    category: PrincipleCategory
    evidence: str = Field(description="one sentence copied verbatim")


class EnrichedTable(_Answer):
    table_name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    summary: str = Field(min_length=1, max_length=MAX_SUMMARY_CHARS)


class Enrichment(_Answer):
    # the docstring is the schema's description, sent to the model: changing it changes requests
    """Answer for a Tier-1 or Tier-2 (narrative) chunk; fields in the order the model writes them."""  # noqa: E501

    contextual_summary: str = Field(max_length=MAX_CONTEXT_CHARS)
    themes: list[str] = Field(min_length=1, max_length=MAX_THEMES)
    buffett_concepts: list[str] = Field(max_length=MAX_CONCEPTS)
    entities: EnrichedEntities
    principles: list[EnrichedPrinciple] = Field(max_length=MAX_PRINCIPLES)
    content_type: NarrativeType
    content_type_evidence: list[str] = Field(max_length=MAX_EVIDENCE)
    has_financial_data: bool
    retrieval_priority: Level
    abstraction_level: Level
    comparison_years: list[int] = Field(max_length=MAX_COMPARISON_YEARS)
    future_outlook: bool
    related_sections_same_letter: list[str] = Field(max_length=MAX_RELATED_SECTIONS)
    related_years: list[RelatedYear] = Field(max_length=MAX_RELATED_YEARS)


class TableEnrichment(_Answer):
    """Answer for a Tier-3 (table) chunk; content_type is always financial_table (set by code)."""

    tables: list[EnrichedTable]
    contextual_summary: str = Field(max_length=MAX_CONTEXT_CHARS)
    themes: list[str] = Field(min_length=1, max_length=MAX_THEMES)
    buffett_concepts: list[str] = Field(max_length=MAX_CONCEPTS)
    entities: EnrichedEntities
    has_financial_data: bool
    retrieval_priority: Level
    abstraction_level: Level
    comparison_years: list[int] = Field(max_length=MAX_COMPARISON_YEARS)
    future_outlook: bool
    related_sections_same_letter: list[str] = Field(max_length=MAX_RELATED_SECTIONS)
    related_years: list[RelatedYear] = Field(max_length=MAX_RELATED_YEARS)


# response field -> the validator field path(s) it fills: a metadata path, or a key of the
# evidence sidecar (``content_type_evidence``, ``principle_evidence``)
FIELDS: dict[str, str | tuple[str, ...]] = {
    "section_title": ("section_title", "section_hierarchy"),
    "tables": "table_data",
    "contextual_summary": "contextual_summary",
    "themes": "themes",
    "buffett_concepts": "buffett_concepts",
    "entities": "entities",
    "principles": ("principles", "principle_evidence"),
    "content_type": "content_type",
    "content_type_evidence": "content_type_evidence",
    "has_financial_data": "has_financial_data",
    "retrieval_priority": "retrieval_priority",
    "abstraction_level": "abstraction_level",
    "comparison_years": "temporal_references.comparison_years",
    "future_outlook": "temporal_references.future_outlook",
    "related_sections_same_letter": "cross_references.related_sections_same_letter",
    "related_years": "cross_references.related_years",
}
# sidecar key -> response field that carries it
EVIDENCE_FIELDS: dict[str, str] = {
    "content_type_evidence": "content_type_evidence",
    "principle_evidence": "principles",
}


# --------------------------------------------------------------------------------------------
# Prompt context


@dataclass(frozen=True)
class PromptContext:
    """What the prompt needs about the whole letter; build one per letter."""

    year: int
    section_titles: tuple[str, ...]
    vocabulary: tuple[str, ...]
    # entity names and evidence quotes as enums of the chunk's own names/sentences: right for a
    # grammar-constrained server (JSON_SCHEMA mode); off for hosted tool calls, where the enum
    # would repeat the chunk in the request and double its prompt tokens
    grounded_choices: bool = True
    # concept -> its textual cues, for the concepts of ``vocabulary`` (see module docstring)
    cues: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def for_letter(
        cls,
        year: int,
        section_titles: list[str],
        vocabulary: frozenset[str] | None = None,
        *,
        grounded_choices: bool = True,
        cues: Mapping[str, Sequence[str]] | None = None,
    ) -> PromptContext:
        vocab = load_vocabulary() if vocabulary is None else vocabulary
        titles = tuple(dict.fromkeys(t for t in section_titles if t and t != UNTITLED))
        if cues is None:
            from letterchunk.contract.vocabulary import load_cues

            cues = load_cues()
        # sorted: a frozenset's iteration order changes with PYTHONHASHSEED, and the prompt
        # bytes must not (cache keys, cassettes)
        ordered = tuple(sorted(vocab))
        return cls(
            year=year,
            section_titles=titles,
            vocabulary=ordered,
            grounded_choices=grounded_choices,
            cues=tuple((c, tuple(cues.get(c, ()))) for c in ordered),
        )


def load_vocabulary() -> frozenset[str]:
    """The controlled ``buffett_concepts`` vocabulary (``vocabulary.load_concepts``)."""
    from letterchunk.contract.vocabulary import load_concepts

    return load_concepts()


_YEAR = re.compile(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)")


def years_in_text(text: str) -> list[int]:
    """Distinct four-digit years (1800-2099) written in ``text``, ascending."""
    return sorted({int(y) for y in _YEAR.findall(text)})


_WS = re.compile(r"\s+")
_NOT_NAMES = frozenset(
    """
a about after all also although among an and any are as at because before besides both but by
dear despite during each either even every except few for from further given he her here his
however i if in including instead into it its last let many meanwhile more moreover most much my
neither nevertheless next no nor not now of on once one only or other others our overall over
perhaps since so some such than that the their then there these they this those though three
through thus to today two under unless until upon we what when whenever where whether which
while who why will with within without yet you your
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday
""".split()
)
_CONNECTORS = frozenset({"of", "and", "&", "de", "du", "la", "van", "von"})
_CONTINUE_AFTER_DOT = re.compile(r"^(?:Mr|Mrs|Ms|Dr|Jr|Sr|St|[A-Z]|(?:[A-Z]\.)+[A-Z])\.$")
_ENDS_NAME = re.compile(r"[,;:!?)\]\"\u201d]$|\.$")
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?= [\"'\u201c\u2018(]?[A-Z0-9])")
MAX_NAME_CHOICES, MAX_QUOTE_CHOICES, MIN_QUOTE_WORDS = 60, 150, 5


def name_candidates(text: str) -> list[str]:
    """Proper-name candidates written in ``text`` (first occurrence order, deduplicated).

    Runs of capitalised words inside one paragraph and one sentence ("of", "and", "&" allowed
    inside a run); leading function words ("The", "Our") and a possessive "'s" are dropped, and
    a lone sentence-initial word is not a name unless it is capitalised mid-sentence elsewhere.
    The entity lists are chosen from these, so every entity is grounded in the chunk.
    """
    runs: list[tuple[list[str], bool]] = []  # (words, began a sentence)
    mid_caps: set[str] = set()
    for para in re.split(r"\n\s*\n", text):
        run: list[str] = []
        run_at_start = False
        sentence_start = True
        for raw in para.split():
            word = _name_word(raw)
            if not word:
                continue
            if run and raw[:1] in _OPENERS:  # "Energy (“BHE”)": a bracket starts a new name
                runs.append((run, run_at_start))
                run = []
            capital = word[:1].isupper()
            if capital and not sentence_start:
                mid_caps.add(word.rstrip(".").lower())
            if capital or (run and word in _CONNECTORS):
                if not run:
                    run_at_start = sentence_start
                run.append(word)
            elif run:
                runs.append((run, run_at_start))
                run = []
            ends = bool(_ENDS_NAME.search(raw)) and not _CONTINUE_AFTER_DOT.match(raw.rstrip(",;:"))
            if run and ends:
                runs.append((run, run_at_start))
                run = []
            sentence_start = bool(re.search(r"[.!?:][\"'\u201d\u2019)]*$", raw)) and not (
                _CONTINUE_AFTER_DOT.match(raw)
            )
        if run:
            runs.append((run, run_at_start))
    out: dict[str, None] = {}
    for words, at_start in runs:
        words = list(words)
        while words and (words[0].rstrip(".").lower() in _NOT_NAMES or words[0] in _CONNECTORS):
            words.pop(0)
            at_start = False
        while words and (words[-1] in _CONNECTORS or words[-1].lower() in _NOT_NAMES):
            words.pop()
        if not words:
            continue
        name = re.sub(r"['\u2019]s$", "", " ".join(words)).rstrip(".'\u2019-")
        if len(name) < 2 or name.lower() in _NOT_NAMES:
            continue
        if " " not in name and at_start and name.lower() not in mid_caps:
            continue
        out.setdefault(name, None)
        if " and " in name:  # "New Bedford and Manchester" also names each part
            for part in name.split(" and "):
                if len(part) > 1 and part.lower() not in _NOT_NAMES:
                    out.setdefault(part, None)
    # only names the validator finds in the text (rule entity.not_found), by its own test
    folded = entity_text(text)
    return [name for name in out if entity_found(name, folded)][:MAX_NAME_CHOICES]


_WORD_PUNCT = "\"'\u201c\u201d\u2018([,;:!?)]"
_OPENERS = frozenset("(\"'\u201c\u2018[")


def _name_word(raw: str) -> str:
    """``raw`` without surrounding punctuation; a final '.' is kept (it may end a sentence),
    and punctuation before it goes: ``(“BHE”).`` -> ``BHE.``."""
    word = raw.strip(_WORD_PUNCT)
    core = word.rstrip(".")
    if core != word and core.rstrip(_WORD_PUNCT) != core:
        word = core.rstrip(_WORD_PUNCT) + "."
    return word


def sentence_choices(text: str) -> list[str]:
    """The chunk's sentences (whitespace collapsed) of at least MIN_QUOTE_WORDS words.

    Evidence quotes are chosen from these, so each is verbatim chunk text by construction.
    """
    flat = normalise_ws(text)
    out: dict[str, None] = {}
    start = 0
    for match in _SENTENCE_END.finditer(flat):
        piece = flat[start : match.end()].strip()
        start = match.end()
        if len(piece.split()) >= MIN_QUOTE_WORDS:
            out.setdefault(piece, None)
    tail = flat[start:].strip()
    if len(tail.split()) >= MIN_QUOTE_WORDS:
        out.setdefault(tail, None)
    # only quotes the validator accepts (rules evidence.too_short / evidence.not_found)
    return [q for q in out if quote_problem(q, flat) is None][:MAX_QUOTE_CHOICES]


def _cue_pattern(cue: str) -> re.Pattern[str]:
    """A cue matches case-insensitively at a word start; its inner spaces match any whitespace."""
    body = r"\s+".join(re.escape(part) for part in cue.split())
    return re.compile(r"(?<!\w)" + body, re.IGNORECASE)


def cued_concepts(text: str, ctx: PromptContext) -> list[str]:
    """Concepts of ``ctx.vocabulary`` whose cues (or own name) occur in ``text``.

    Ordered by number of cue hits, most first; ties keep vocabulary order.
    """
    cues = dict(ctx.cues)
    hits: list[tuple[int, int, str]] = []
    for index, concept in enumerate(ctx.vocabulary):
        patterns = dict.fromkeys((concept, *cues.get(concept, ())))
        count = sum(len(_cue_pattern(c).findall(text)) for c in patterns)
        if count and concept_known(concept, ctx.vocabulary):  # rule concept.unknown
            hits.append((-count, index, concept))
    return [concept for _, _, concept in sorted(hits)]


# self-critical cues (see module docstring); each matches at a word start, case-insensitively
CONFESSION_CUES: tuple[str, ...] = (
    r"mistake",
    r"errors?\b",
    r"erred\b",
    r"wrong",
    r"blunder",
    r"regret",
    r"misjudg",
    r"miscalculat",
    r"should(?: not|n['\u2019]t)? have\b",
    r"failed to\b",
    r"embarrass",
)
_CONFESSION = re.compile(r"(?<!\w)(?:" + "|".join(CONFESSION_CUES) + ")", re.IGNORECASE)


def confession_sentences(text: str) -> list[str]:
    """The chunk's :func:`sentence_choices` that hold a self-critical cue, in text order."""
    return [s for s in sentence_choices(text) if _CONFESSION.search(s)]


def _choice_list(values: list, cap: int) -> tuple[Any, FieldInfo]:
    """``list[Literal[values]]`` capped at ``cap`` items; an always-empty list when no values."""
    if not values:
        return (list[str], Field(max_length=0))
    # a Literal of values known only at run time: no static type can name it
    return (list[Literal[tuple(values)]], Field(max_length=cap))  # type: ignore[misc]


def without_choices(
    annotation: Any, info: FieldInfo, banned: Iterable[object]
) -> tuple[Any, FieldInfo] | None:
    """``(annotation, info)`` with every value of ``banned`` taken out of its enums.

    Walks ``Literal`` enums, lists and nested response models (an entity name banned in
    ``people`` leaves ``companies`` too: the validator's check is the same).  A list whose item
    enum runs empty becomes an always-empty list; ``None`` means no valid value is left for a
    required field (an enum, or a model with such a field).  Fields without an enum are kept.
    """
    banned = frozenset(banned)
    if not banned:
        return annotation, info
    new = _without(annotation, banned)
    if new is _EMPTY_LIST:
        return list[str], Field(max_length=0)
    return None if new is None else (new, info)


_EMPTY_LIST = object()


def _without(annotation: Any, banned: frozenset) -> Any:
    origin = get_origin(annotation)
    if origin is Literal:
        keep = tuple(v for v in get_args(annotation) if v not in banned)
        return Literal[keep] if keep else None
    if origin is list:
        (item,) = get_args(annotation)
        new = _without(item, banned)
        return _EMPTY_LIST if new is None else list[new]  # type: ignore[valid-type]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        fields: dict[str, Any] = {}
        for name, info in annotation.model_fields.items():
            narrowed = without_choices(info.annotation, info, banned)
            if narrowed is None:
                return None
            fields[name] = narrowed
        return create_model(annotation.__name__, __base__=annotation, **fields)
    return annotation


def _is_table(chunk: Chunk) -> bool:
    return chunk.metadata.chunk_tier == 3


def response_model_for(chunk: Chunk, ctx: PromptContext) -> type[_Answer]:
    """The response model for ``chunk``, narrowed so the grammar only allows valid values.

    Named ``Enrichment`` / ``TableEnrichment`` (the name is part of the request).
    """
    base: type[_Answer] = TableEnrichment if _is_table(chunk) else Enrichment
    narrowed: dict[str, tuple[Any, FieldInfo]] = {}
    if ctx.grounded_choices:  # only the cued concepts; none cued -> [] forced
        narrowed["buffett_concepts"] = _choice_list(cued_concepts(chunk.content, ctx), MAX_CONCEPTS)
    elif ctx.vocabulary:
        narrowed["buffett_concepts"] = _choice_list(list(ctx.vocabulary), MAX_CONCEPTS)
    titles = [
        t
        for t in ctx.section_titles
        if section_reference_problem(t, chunk.metadata.section_title, ctx.section_titles) is None
    ]
    narrowed["related_sections_same_letter"] = _choice_list(titles, MAX_RELATED_SECTIONS)
    found = years_in(chunk.content)  # rule year.comparison_not_found
    years = [y for y in years_in_text(chunk.content) if y != ctx.year and y in found]
    narrowed["comparison_years"] = _choice_list(years, MAX_COMPARISON_YEARS)
    if ctx.grounded_choices:
        narrowed["contextual_summary"] = (str, Field(pattern=SUMMARY_PATTERN))
        names = name_candidates(chunk.content)
        entities = create_model(
            "EnrichedEntities",
            __base__=EnrichedEntities,
            companies=_choice_list(names, MAX_COMPANIES),
            people=_choice_list(names, MAX_PEOPLE),
        )
        narrowed["entities"] = (entities, Field())
        if not _is_table(chunk):
            confessions = confession_sentences(chunk.content)
            # confession sentences first: the evidence a confession tag must quote
            quotes = list(dict.fromkeys(confessions + sentence_choices(chunk.content)))
            quote: Any = Literal[tuple(quotes)] if quotes else str
            principle = create_model(
                "EnrichedPrinciple", __base__=EnrichedPrinciple, evidence=(quote, Field())
            )
            # a model class made at run time: mypy sees a variable, pydantic a type
            principles = list[principle]  # type: ignore[valid-type]
            narrowed["principles"] = (principles, Field(max_length=MAX_PRINCIPLES))
            narrowed["content_type_evidence"] = _choice_list(quotes, MAX_EVIDENCE)
            types = [t for t in get_args(NarrativeType) if t != "mistake_confession" or confessions]
            narrowed["content_type"] = (Literal[tuple(types)], Field())
    if _is_table(chunk):
        n = len(chunk.metadata.table_data)
        narrowed["tables"] = (list[EnrichedTable], Field(min_length=n, max_length=n))

    fields: dict[str, tuple[Any, FieldInfo]] = {}
    if chunk.metadata.section_title == UNTITLED:
        fields["section_title"] = (str, Field(min_length=1, max_length=MAX_NAME_CHARS))
    for name, info in base.model_fields.items():  # keep the base model's order
        fields[name] = narrowed.get(name, (info.annotation, info))
    # a subclass of the base (isinstance holds), but every field redefined in the wanted order
    return create_model(base.__name__, __base__=base, **fields)  # type: ignore[call-overload]


# --------------------------------------------------------------------------------------------
# Messages


def _kind(chunk: Chunk) -> str:
    tier = chunk.metadata.chunk_tier
    if tier == 3:
        n = len(chunk.metadata.table_data)
        return f"table chunk with {n} table(s) (answer tables; no content_type, no principles)"
    what = "section" if tier == 1 else "paragraph"
    ask = "; also give section_title" if chunk.metadata.section_title == UNTITLED else ""
    return f"narrative {what} chunk{ask}"


def build_messages(chunk: Chunk, ctx: PromptContext) -> list[dict]:
    """The chat messages for one chunk: fixed instructions first, the chunk text last."""
    system = prompts.render(
        "enrich_system",
        concepts="\n".join(f"  {c}" for c in ctx.vocabulary),
        categories=", ".join(get_args(PrincipleCategory)),
    )
    titles = "\n".join(f"- {t}" for t in ctx.section_titles) or "- (none)"
    user = prompts.render(
        "enrich_user",
        year=ctx.year,
        section_titles=titles,
        kind=_kind(chunk),
        # never show the placeholder: the model copied it back as the title
        section_title=(
            "(untitled: answer section_title with a new title)"
            if chunk.metadata.section_title == UNTITLED
            else chunk.metadata.section_title
        ),
        hints=_hints(chunk, ctx),
        content=chunk.content,
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


MAX_HINT_SENTENCES = 3


def _hints(chunk: Chunk, ctx: PromptContext) -> str:
    """The chunk-specific cue lines of the user prompt (concepts; confession sentences)."""
    concepts = cued_concepts(chunk.content, ctx)
    if ctx.grounded_choices:
        lines = [
            "Concepts cued in this chunk (buffett_concepts: choose 0-3 only from these): "
            + ", ".join(concepts)
            if concepts
            else "Concepts cued in this chunk: none (buffett_concepts: [])"
        ]
    else:
        lines = [
            "Suggested concepts (cued in this chunk, most first): " + ", ".join(concepts)
            if concepts
            else "Suggested concepts: none cued in this chunk"
        ]
    if not _is_table(chunk):
        confessions = confession_sentences(chunk.content)
        if confessions:
            lines.append(
                "Possible confession sentences (if one admits a mistake of Buffett's or "
                "Berkshire's, answer mistake_confession and quote it):"
            )
            lines += [f"- {s}" for s in confessions[:MAX_HINT_SENTENCES]]
        else:
            lines.append("Possible confession sentences: none (not a mistake_confession)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Applying an answer


def _unique(items) -> list:
    """Items in first-seen order without repeats."""
    return list(dict.fromkeys(items))


def apply_enrichment(chunk: Chunk, e: BaseModel) -> Chunk:
    """A new chunk with the answer's semantic fields; mechanical fields are left untouched.

    ``e`` may be any response model built by :func:`response_model_for` (or a repair model that
    holds a subset of its fields): only the fields present are applied.
    """
    answer = dict(e)
    meta = chunk.metadata
    update: dict[str, object] = {}
    for name in (
        "contextual_summary",
        "themes",
        "buffett_concepts",
        "has_financial_data",
        "retrieval_priority",
        "abstraction_level",
    ):
        if name in answer:
            value = answer[name]
            update[name] = list(value) if isinstance(value, list) else value
    if "contextual_summary" in answer:
        update["contextual_summary"] = complete_sentences(str(answer["contextual_summary"]))
    for name in ("themes", "buffett_concepts"):  # a grammar cannot forbid repeated items
        if name in answer:
            update[name] = _unique(answer[name])
    if "entities" in answer:
        ent = answer["entities"]
        update["entities"] = Entities(
            companies=_unique(ent.companies),
            people=_unique(ent.people),
            metrics=_unique(ent.metrics),
        )
    if "principles" in answer:
        update["principles"] = [
            Principle(statement=p.statement, category=p.category) for p in answer["principles"]
        ]
    if "content_type" in answer and meta.chunk_tier != 3:
        update["content_type"] = answer["content_type"]
    if "comparison_years" in answer or "future_outlook" in answer:
        tr = meta.temporal_references
        update["temporal_references"] = TemporalReferences(
            primary_year=tr.primary_year,
            comparison_years=_unique(
                int(y) for y in answer.get("comparison_years", tr.comparison_years)
            ),
            future_outlook=bool(answer.get("future_outlook", tr.future_outlook)),
        )
    if "related_sections_same_letter" in answer or "related_years" in answer:
        cr = meta.cross_references
        update["cross_references"] = CrossReferences(
            related_sections_same_letter=_unique(
                answer.get("related_sections_same_letter", cr.related_sections_same_letter)
            ),
            related_years=_unique(int(y) for y in answer.get("related_years", cr.related_years)),
        )
    if "section_title" in answer and meta.section_title == UNTITLED:
        title = str(answer["section_title"]).strip()
        if title:
            update["section_title"] = title
            update["section_hierarchy"] = [
                title if h == UNTITLED else h for h in meta.section_hierarchy
            ]
    if "tables" in answer and meta.chunk_tier == 3:
        tables = answer["tables"]
        update["table_data"] = [
            TableData(
                table_name=t.table_name.strip() or old.table_name,
                summary=t.summary.strip(),
                columns=list(old.columns),
                rows=[list(r) for r in old.rows],
                row_count=old.row_count,
            )
            for old, t in zip(meta.table_data, tables, strict=False)
        ] + [old for old in meta.table_data[len(tables) :]]
    new_meta = meta.model_copy(update=update)
    # re-validate so an answer can never smuggle a wrong type into a canonical chunk
    return Chunk.model_validate(
        {
            "chunk_id": chunk.chunk_id,
            "content": chunk.content,
            "metadata": new_meta.model_dump(mode="python"),
        },
    )


_ENDS_SENTENCE = re.compile(r"[.!?][\"'\u201d\u2019)\]]*$")


def complete_sentences(text: str) -> str:
    """``text`` without an unfinished last sentence (when an earlier sentence is complete).

    The grammar closes a string at its ``maxLength``: a summary cut there ends mid-sentence
    ("... and its 1977,"), and the fragment counts as one more sentence for the validator, so
    the re-ask (temperature 0) wrote the same cut summary again.
    """
    flat = text.strip()
    if _ENDS_SENTENCE.search(flat):
        return flat
    ends = list(_SENTENCE_END.finditer(flat))
    return flat[: ends[-1].end()] if ends else flat


def evidence_record(chunk_id: str, e: BaseModel) -> dict:
    """One line of the evidence sidecar for ``chunk_id`` (see module docstring).

    Evidence for a ``narrative`` tag is dropped: only a confession or principle tag needs it
    (the small model tends to quote the whole chunk whatever the tag).
    """
    answer = dict(e)
    tagged = answer.get("content_type", "narrative") in (
        "mistake_confession",
        "principle_statement",
    )
    return {
        "chunk_id": chunk_id,
        "content_type_evidence": [
            str(s) for s in answer.get("content_type_evidence", []) if tagged
        ],
        "principle_evidence": [str(p.evidence) for p in answer.get("principles", [])],
    }
