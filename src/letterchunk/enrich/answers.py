"""The response models the LLM answers, and their per-chunk narrowing by
:func:`response_model_for` to the choices the validator accepts (see :mod:`letterchunk.enrich`).

The models' field order, docstrings and constraints are the JSON schema sent with every request:
changing them changes request bodies (cache keys, cassettes)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Annotated, Any, Literal, TypedDict, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from letterchunk.contract.names import name_kind
from letterchunk.contract.schema import (
    UNTITLED,
    Chunk,
    Level,
    PrincipleCategory,
)
from letterchunk.contract.validate import (
    RELATED_YEAR_RANGE,
    section_reference_problem,
    years_in,
)
from letterchunk.enrich.candidates import (
    confession_sentences,
    name_candidates,
    sentence_choices,
    years_in_text,
)
from letterchunk.enrich.concept_candidates import concept_candidates
from letterchunk.enrich.context import PromptContext
from letterchunk.enrich.principle_candidates import principle_candidates

NarrativeType = Literal["narrative", "mistake_confession", "principle_statement"]

# Caps that keep the 1.5B model's answer short; the prompt states the same numbers.
MAX_THEMES, MAX_CONCEPTS, MAX_PRINCIPLES, MAX_EVIDENCE = 4, 3, 2, 2
MAX_COMPANIES, MAX_PEOPLE, MAX_METRICS = 4, 3, 3
MAX_RELATED_SECTIONS, MAX_RELATED_YEARS, MAX_COMPARISON_YEARS = 2, 2, 4
# candidates the follow-up questions judge one by one (enrich.judges): rule sentences,
# RULE_CHECK_SHARE of the chunk's sentences, within
# [MIN_RULE_CHECKS, MAX_RULE_CHECKS] (on the dev principles, bench/gold/principles_dev.json,
# 0.3 of a Tier-1 chunk's sentences, ~8.7 a chunk, held 62 of 84 where a fixed 7 held 57;
# each question costs ~2 s on two cores).  The answer chooses its concepts among the
# MAX_CHOICE_CONCEPTS best-ranked candidates (enrich.concept_candidates)
MAX_CHOICE_CONCEPTS = 6
RULE_CHECK_SHARE, MIN_RULE_CHECKS, MAX_RULE_CHECKS = 0.3, 3, 10
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
    # evidence first: the model picks the sentence, then states the rule it holds
    evidence: str = Field(description="one of the rule sentences, copied verbatim")
    statement: str = Field(min_length=1, max_length=MAX_STATEMENT_CHARS)
    category: PrincipleCategory


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
    # evidence before the label it implies
    content_type_evidence: list[str] = Field(max_length=MAX_EVIDENCE)
    content_type: NarrativeType
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


class AnswerFields(TypedDict, total=False):
    """The fields of an answer as :func:`letterchunk.enrich.apply.apply_enrichment` reads them
    (``dict(answer)``): every response model here, its per-chunk narrowing (a subclass with
    narrower enums) and a repair model holding a subset of its fields give these types."""

    section_title: str
    tables: list[EnrichedTable]
    contextual_summary: str
    themes: list[str]
    buffett_concepts: list[str]
    entities: EnrichedEntities
    principles: list[EnrichedPrinciple]
    content_type_evidence: list[str]
    content_type: NarrativeType
    has_financial_data: bool
    retrieval_priority: Level
    abstraction_level: Level
    comparison_years: list[int]
    future_outlook: bool
    related_sections_same_letter: list[str]
    related_years: list[int]


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


def concept_choices(chunk: Chunk, ctx: PromptContext) -> list[str]:
    """The candidate concepts the answer chooses among: the best-ranked
    :data:`MAX_CHOICE_CONCEPTS` (:func:`~letterchunk.enrich.concept_candidates.
    concept_candidates`)."""
    return concept_candidates(chunk.content, ctx, MAX_CHOICE_CONCEPTS)


def rule_checks(chunk: Chunk) -> list[str]:
    """The candidate rule sentences of ``chunk`` (narrative chunks only; a principle's evidence
    is one of them and the follow-up questions judge each): the sentences that most look like a
    general rule
    (:func:`~letterchunk.enrich.principle_candidates.principle_candidates`), a share of its
    sentences (see :data:`RULE_CHECK_SHARE`)."""
    if _is_table(chunk):
        return []
    n = len(sentence_choices(chunk.content))
    k = max(MIN_RULE_CHECKS, min(MAX_RULE_CHECKS, math.ceil(RULE_CHECK_SHARE * n)))
    return principle_candidates(chunk.content, k)


def response_model_for(chunk: Chunk, ctx: PromptContext) -> type[_Answer]:
    """The response model for ``chunk``, narrowed so the grammar only allows valid values.

    Named ``Enrichment`` / ``TableEnrichment`` (the name is part of the request).  Without
    ``grounded_choices`` (hosted tool calls, where the schema is part of the prompt and must be
    the same for every chunk to share the provider's prefix cache) the schema is the base
    model's, unchanged but for an untitled chunk's ``section_title`` and a table chunk's table
    count: per-chunk choices are named in the prompt and checked by the validator.
    """
    base: type[_Answer] = TableEnrichment if _is_table(chunk) else Enrichment
    narrowed: dict[str, tuple[Any, FieldInfo]] = {}
    if ctx.grounded_choices:
        narrowed.update(_grounded_fields(chunk, ctx))
    elif ctx.vocabulary:  # the whole vocabulary: the same for every chunk of the run
        narrowed["buffett_concepts"] = _choice_list(list(ctx.vocabulary), MAX_CONCEPTS)
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


def _grounded_fields(chunk: Chunk, ctx: PromptContext) -> dict[str, tuple[Any, FieldInfo]]:
    """The fields a grammar narrows to the chunk's own choices (see module docstring)."""
    narrowed: dict[str, tuple[Any, FieldInfo]] = {}
    # only the candidate concepts; none -> [] forced
    narrowed["buffett_concepts"] = _choice_list(concept_choices(chunk, ctx), MAX_CONCEPTS)
    titles = [
        t
        for t in ctx.section_titles
        if section_reference_problem(t, chunk.metadata.section_title, ctx.section_titles) is None
    ]
    narrowed["related_sections_same_letter"] = _choice_list(titles, MAX_RELATED_SECTIONS)
    found = years_in(chunk.content)  # rule year.comparison_not_found
    years = [y for y in years_in_text(chunk.content) if y != ctx.year and y in found]
    narrowed["comparison_years"] = _choice_list(years, MAX_COMPARISON_YEARS)
    narrowed["contextual_summary"] = (str, Field(pattern=SUMMARY_PATTERN))
    # typed by code (contract.names): a name offered under people is a person by evidence
    # the validator can check, one under companies an organisation; names of unknown kind
    # are not offered (the 1.5B model filed companies as people and people as companies)
    names = name_candidates(chunk.content)
    kinds = {name: name_kind(name, chunk.content) for name in names}
    entities = create_model(
        "EnrichedEntities",
        __base__=EnrichedEntities,
        companies=_choice_list([n for n in names if kinds[n] == "organisation"], MAX_COMPANIES),
        people=_choice_list([n for n in names if kinds[n] == "person"], MAX_PEOPLE),
    )
    narrowed["entities"] = (entities, Field())
    if _is_table(chunk):
        return narrowed
    rules = rule_checks(chunk)
    confessions = confession_sentences(chunk.content)
    sentences = sentence_choices(chunk.content)
    # confession sentences first: the evidence a confession tag must quote
    quotes = list(dict.fromkeys(confessions + sentences))
    # a principle's evidence is one of the judged rule sentences; the judgements decide which
    # principles stay (enrich.judges)
    if rules:
        principle = create_model(
            "EnrichedPrinciple",
            __base__=EnrichedPrinciple,
            evidence=(Literal[tuple(rules)], Field()),  # type: ignore[arg-type]
        )
        # a model class made at run time: mypy sees a variable, pydantic a type
        # at least one: left free, the small model answers [] everywhere
        narrowed["principles"] = (
            list[principle],  # type: ignore[valid-type]
            Field(min_length=1, max_length=MAX_PRINCIPLES),
        )
    else:
        narrowed["principles"] = (list[EnrichedPrinciple], Field(max_length=0))
    narrowed["content_type_evidence"] = _choice_list(quotes, MAX_EVIDENCE)
    types = [t for t in get_args(NarrativeType) if t != "mistake_confession" or confessions]
    narrowed["content_type"] = (Literal[tuple(types)], Field())
    return narrowed
