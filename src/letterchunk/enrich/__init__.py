"""Stage 2, enrichment: the one structured LLM call per chunk that fills the semantic metadata
fields, and the one-token yes/no follow-ups that correct its confession and principle tags.

Modules: :mod:`~letterchunk.enrich.context` (what the prompt needs about the letter),
:mod:`~letterchunk.enrich.candidates` (names, sentences, years, cued concepts and confession
sentences computed from the chunk), :mod:`~letterchunk.enrich.answers` (the response models and
their per-chunk narrowing), :mod:`~letterchunk.enrich.messages` (the chat messages),
:mod:`~letterchunk.enrich.apply` (an answer applied to a chunk, and its evidence record) and
:mod:`~letterchunk.enrich.judges` (the follow-up questions and what their answers change).

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
  self-critical cue (:data:`CONFESSION_CUES`: "mistake", "error", "wrong", "blunder", "regret",
  "misjudg…", "should (not) have", "cost us", "overpaid", "paid too much", "foolish", "dumb",
  "alas", "unfortunately", …), first-person ones first.  The cues are broad on purpose: they
  only propose evidence.  With a grammar, ``content_type`` may be ``mistake_confession`` only
  when such a sentence exists, and ``content_type_evidence`` lists those sentences first; the
  user prompt names them as "possible confession sentences".  Whether the chunk *is* a
  confession is then the model's yes-probability to focused questions about a chunk that has
  paragraphs holding a self-critical sentence about the writer or Berkshire and about each such
  paragraph (:func:`confession_paragraphs`, :mod:`~letterchunk.enrich.judges`), which overrides
  the structured answer's tag.
* **Principles** — :func:`principle_sentences` picks sentences with a general-statement cue
  (:data:`PRINCIPLE_CUES`: "we believe", "should", "never", "always", "the best", "investors",
  …).  They come first among the principle evidence choices, and when there is one the grammar
  asks for at least one principle (the model chooses which); the judges then drop a principle
  whose sentence the model does not rate a general rule.
* **Entities** — each name candidate is typed by :func:`letterchunk.contract.names.name_kind`;
  ``people`` offers only names typed person, ``companies`` only names typed organisation (the
  validator's rules ``entity.person_in_companies`` / ``entity.organisation_in_people``).

Field order puts evidence before the label it implies (a principle's ``evidence`` before its
``statement``; ``content_type_evidence`` before ``content_type``).  Evidence sentences come from
:func:`letterchunk.text.sentences.sentences`, which does not split at "Mr.", "U.S." or "Inc.".

Evidence is not a canonical key; :func:`evidence_record` turns it into one line of the
``YYYY.evidence.jsonl`` sidecar::

    {"chunk_id": ..., "content_type_evidence": [...], "principle_evidence": [...]}

:data:`FIELDS` maps each response field to the canonical metadata path it fills (the repair loop
uses it to re-ask only the fields behind a violation).
"""

from letterchunk.enrich.answers import (
    EVIDENCE_FIELDS,
    FIELDS,
    SUMMARY_PATTERN,
    EnrichedEntities,
    EnrichedPrinciple,
    EnrichedTable,
    Enrichment,
    NarrativeType,
    TableEnrichment,
    response_model_for,
    without_choices,
)
from letterchunk.enrich.apply import apply_enrichment, complete_sentences, evidence_record
from letterchunk.enrich.candidates import (
    CONFESSION_CUES,
    PRINCIPLE_CUES,
    confession_paragraphs,
    confession_sentences,
    cued_concepts,
    name_candidates,
    principle_sentences,
    sentence_choices,
    years_in_text,
)
from letterchunk.enrich.context import PromptContext, load_vocabulary
from letterchunk.enrich.judges import Verdicts, apply_verdicts, ask_judges
from letterchunk.enrich.messages import build_messages

__all__ = [
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
    "confession_paragraphs",
    "confession_sentences",
    "CONFESSION_CUES",
    "PRINCIPLE_CUES",
    "principle_sentences",
    "load_vocabulary",
    "SUMMARY_PATTERN",
    "without_choices",
    "Verdicts",
    "ask_judges",
    "apply_verdicts",
]
