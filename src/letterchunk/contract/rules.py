"""The rule table: every rule code with its severity, kind, description and what repairs it.

One row per rule, in the order ``letterchunk validate --list-rules`` prints them.  A row joins
what the validator, the repair loop and the report each need to know about a code:

- ``severity``  ``error`` fails validation; ``warning`` is reported and passes;
- ``kind``      what can fix it:

  - ``input``      the file or line is unusable as chunk JSONL; nothing to repair in a chunk;
  - ``mechanical`` code can fix it without an LLM (counts, flags, defaults, links, canonical
    case);
  - ``semantic``   needs the LLM (summaries, titles, concepts, grounding of
    entities/evidence/years), and every ``response.*`` rule: only the model can answer again;
  - ``corpus``     a cross-chunk/segmentation problem (sizes, tiling, overlaps, sequences): fix
    by re-segmenting the letter;

- ``fixer``     the name of the code fixer in ``letterchunk.repair`` (its ``FIXERS``) that
  recomputes the value the rule checks; None when no fixer does;
- ``fields``    the response fields the repair loop re-asks *together* for this rule (a tag and
  the quote behind it); empty means the fields follow from the violation's own field path;
- ``drops``     for a rule that rejects one value the model chose for a list: what code removes
  when the re-asks are spent and only such rules still fail (the value also leaves the field's
  choices in every later re-ask); None for every other rule;
- ``origin``    ``validator`` for the rules :mod:`letterchunk.contract.validate` checks;
  ``response`` for an answer the re-ask loop could not use at all (no value came back).

Names are strings so that this module imports neither repair nor enrich; tests/test_rules.py
checks that every fixer and field named here exists there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from letterchunk.settings import DEFAULT_CONTEXT_TOKENS as _DEFAULT_CONTEXT_TOKENS
from letterchunk.settings import Settings

__all__ = [
    "Severity",
    "RuleKind",
    "Origin",
    "Rule",
    "RULES",
    "T1_MIN_TOKENS",
    "T2_MIN_TOKENS",
    "T1_MAX_TOKENS",
    "EVIDENCE_TYPES",
    "EVIDENCE_MIN_WORDS",
    "RELATED_YEAR_RANGE",
    "DEFAULT_CONTEXT_TOKENS",
    "PROMPT_RESERVE_TOKENS",
    "max_chunk_tokens",
    "VALIDATOR_RULES",
    "FATAL_CODES",
    "DROPPABLE",
    "COUPLED",
    "rule_kind",
]

Severity = Literal["error", "warning"]
RuleKind = Literal["input", "mechanical", "semantic", "corpus"]
Origin = Literal["validator", "response"]


@dataclass(frozen=True)
class Rule:
    """One row of :data:`RULES` (see the module docstring for each column)."""

    code: str
    severity: Severity
    kind: RuleKind
    description: str
    fixer: str | None = None
    fields: tuple[str, ...] = ()
    drops: str | None = None
    origin: Origin = "validator"


# -- the numbers the rules name ------------------------------------------------------------------
T1_MIN_TOKENS = 250
T2_MIN_TOKENS = 120
T1_MAX_TOKENS = 2000
#: content types that need the verbatim sentence(s) behind them (rule evidence.missing)
EVIDENCE_TYPES = ("mistake_confession", "principle_statement")
EVIDENCE_MIN_WORDS = 4
#: the years a ``related_years`` entry may name (rule xref.year_range); the response schema
#: states the same bounds as ``minimum``/``maximum``
RELATED_YEAR_RANGE = (1950, 2100)
# the context assumed when LETTERCHUNK_CONTEXT_TOKENS is unset: the embedded server's (see the
# docstring of letterchunk.settings for why validate does not follow the shell's API variables)
DEFAULT_CONTEXT_TOKENS = _DEFAULT_CONTEXT_TOKENS
PROMPT_RESERVE_TOKENS = 2560  # instructions + section list (~1,200) + the answer (max_tokens 1,024)


def max_chunk_tokens() -> int:
    """Largest chunk a model can be asked about (rule size.context):
    ``LETTERCHUNK_CONTEXT_TOKENS`` (read at call time) or :data:`DEFAULT_CONTEXT_TOKENS`, less
    :data:`PROMPT_RESERVE_TOKENS` (:meth:`letterchunk.settings.Settings.validation_context`)."""
    context = Settings.from_env().validation_context()
    return max(context - PROMPT_RESERVE_TOKENS, 1)


# -- the table ----------------------------------------------------------------------------------
E: Severity = "error"
W: Severity = "warning"

# fmt: off
_TABLE: tuple[Rule, ...] = (
    # -- the file / line itself ----------------------------------------------------------------
    Rule("input.missing_path", E, "input", "a path given to validate does not exist"),
    Rule("input.no_jsonl", E, "input", "a folder holds no chunk *.jsonl file"),
    Rule("input.unreadable", E, "input", "a file cannot be read, or is binary / not UTF-8 text"),
    Rule("input.empty", E, "input", "a chunk file is empty"),
    Rule("input.not_jsonl", E, "input", "no line of the file is a JSON object: it is not a chunk JSONL file"),
    Rule("json.malformed", E, "input", "a line is not valid JSON"),
    Rule("json.not_object", E, "input", "a line is JSON but not an object"),
    Rule("json.blank_line", W, "mechanical", "a blank line inside a JSONL file"),
    Rule("source.cleaned_missing", E, "input", "the cleaned text named by metadata.source_file is not beside the JSONL"),
    Rule("source.cleaned_unreadable", E, "input", "the cleaned text file cannot be read as UTF-8"),
    Rule("evidence.malformed", E, "input", "a line of the evidence sidecar is not a valid evidence record"),
    # -- exact keys and types (§0, §3.2, §6 canonical conformance) ---------------------------------
    Rule("schema.missing_key", E, "mechanical", "a key of the canonical schema is absent (use its default)"),
    Rule("schema.extra_key", E, "mechanical", "a key that is not in the canonical schema is present"),
    Rule("schema.type", E, "semantic", "a value has the wrong type (no coercion: \"1\" is not 1, dict is not list)"),
    Rule("schema.enum", E, "semantic", "a value is not one of the allowed values of its field"),
    Rule("schema.key_order", W, "mechanical", "keys are not in the canonical schema's order"),
    Rule("id.pattern", E, "mechanical", "chunk_id does not match ^\\d{4}-S\\d+-T[123]-\\d{3}$"),
    Rule("date.format", E, "mechanical", "letter_date is not YYYY-MM-DD"),
    # -- one chunk --------------------------------------------------------------------------------
    Rule("id.tier_mismatch", E, "mechanical", "the tier in chunk_id differs from metadata.chunk_tier", fixer="tier"),
    Rule("id.year_mismatch", E, "mechanical", "the year in chunk_id differs from metadata.letter_year"),
    Rule("date.invalid", E, "mechanical", "letter_date is not a real calendar date"),
    Rule("date.unknown", E, "mechanical", "letter_date is 0000-00-00 without a boundary_note saying why", fixer="notes"),
    Rule("date.year_mismatch", W, "mechanical", "letter_date is not in letter_year or the year after"),
    Rule("year.primary_mismatch", W, "mechanical", "temporal_references.primary_year differs from letter_year", fixer="primary_year"),
    Rule("source.file_name", E, "mechanical", "source_file is not a bare file name (no folders, no ..)"),
    Rule("source.file_convention", W, "mechanical", "source_file is not YYYY_cleaned.txt"),
    Rule(
        "content.empty",
        E,
        "corpus",
        "content is empty, or blanks only (white space, zero-width spaces, byte-order marks)",
    ),
    Rule("count.chars", E, "mechanical", "char_count differs from len(content)", fixer="counts"),
    Rule("count.tokens", E, "mechanical", "token_count differs from the o200k_base token count of content", fixer="counts"),
    Rule("span.order", E, "mechanical", "source_span is not 0 <= start_char < end_char_exclusive", fixer="span"),
    Rule("span.unavailable", W, "mechanical", "source_span is 0/0 (allowed only when unavailable and noted)", fixer="span"),
    Rule("span.length", E, "mechanical", "end_char_exclusive - start_char differs from len(content)", fixer="span"),
    Rule("span.out_of_range", E, "mechanical", "source_span ends past the end of the cleaned text", fixer="span"),
    Rule("span.content_mismatch", E, "mechanical", "cleaned_text[start_char:end_char_exclusive] differs from content", fixer="span"),
    Rule("title.empty", E, "semantic", "section_title is empty"),
    Rule("title.untitled", E, "semantic", "section_title is still the segmenter's placeholder at stage enriched"),
    Rule("hierarchy.empty", W, "mechanical", "section_hierarchy is empty or has a blank entry", fixer="lists"),
    Rule("content_type.table_outside_t3", E, "semantic", "a Tier-1/2 chunk has content_type financial_table"),
    Rule("content_type.t3_not_table", E, "mechanical", "a Tier-3 chunk does not have content_type financial_table", fixer="tables"),
    Rule("table.financial_without_table", E, "mechanical", "content_type financial_table without has_table=true and table_data"),
    Rule("table.has_table_mismatch", E, "mechanical", "has_table differs from len(table_data) > 0", fixer="tables"),
    Rule("table.row_count", E, "mechanical", "table_data[i].row_count differs from len(rows)", fixer="tables"),
    Rule("table.empty", E, "mechanical", "a table has no columns or no rows"),
    Rule("table.row_width", W, "mechanical", "a table row has a different number of cells than columns"),
    Rule("table.name_missing", E, "semantic", "a Tier-3 table_name is empty at stage enriched"),
    Rule("table.summary_missing", E, "semantic", "a Tier-3 table summary is empty at stage enriched"),
    Rule("link.t1_parent", E, "mechanical", "a Tier-1 chunk has a parent_chunk_id", fixer="links"),
    Rule("link.parent_required", E, "mechanical", "a Tier-2 chunk has no parent_chunk_id (every Tier-2 chunk must have one)"),
    Rule("link.leaf_children", E, "mechanical", "a Tier-2/3 chunk lists child_chunk_ids", fixer="links"),
    Rule("link.self", E, "mechanical", "a chunk names itself as parent or child", fixer="links"),
    Rule("link.id_format", E, "mechanical", "a parent/child id is not a chunk id of the same letter"),
    Rule("link.duplicate_child", W, "mechanical", "child_chunk_ids repeats an id", fixer="links"),
    Rule("exception.reason_missing", E, "semantic", "standalone_exception=true without an exception_reason"),
    Rule("exception.reason_without_flag", W, "mechanical", "exception_reason set while standalone_exception=false"),
    Rule("exception.priority", E, "mechanical", "standalone_exception=true requires retrieval_priority high", fixer="exception"),
    Rule("exception.unneeded", W, "mechanical", "standalone_exception=true on a chunk that meets its tier minimum"),
    Rule("note.blank", W, "mechanical", "boundary_note / exception_reason is an empty string instead of null", fixer="notes"),
    Rule("size.t1_min", E, "corpus", "Tier-1 chunk under 250 tokens without standalone_exception"),
    Rule("size.t1_whole_letter", W, "corpus", "the whole letter is one Tier-1 chunk under 250 tokens (nothing to merge with)"),
    Rule("size.t2_min", E, "corpus", "Tier-2 chunk under 120 tokens without standalone_exception"),
    Rule("size.t1_max", W, "corpus", "Tier-1 chunk over the 2000-token target"),
    Rule("size.context", E, "corpus", "a chunk too large for the model's context (LETTERCHUNK_CONTEXT_TOKENS, default 8192, less 2560 for instructions and answer): it cannot be enriched as is"),
    Rule("boundary.mid_sentence", W, "corpus", "a Tier-1/2 chunk ends mid-sentence"),
    Rule("boundary.header_only", E, "corpus", "a Tier-1/2 chunk is a header alone or a header + one line"),
    Rule("table.no_context", W, "corpus", "a Tier-3 chunk has no prose lead-in or interpretation around its table"),
    Rule("table.financial_flag", W, "mechanical", "a financial_table chunk has has_financial_data=false", fixer="tables"),
    # -- semantic fields (checked whenever filled; required at stage enriched) ---------------------
    Rule("summary.missing", E, "semantic", "contextual_summary is empty at stage enriched"),
    Rule("summary.sentences", E, "semantic", "contextual_summary is not 1-3 sentences"),
    Rule("themes.missing", W, "semantic", "themes is empty at stage enriched"),
    Rule("concept.unknown", E, "semantic", "a buffett_concept is not in the controlled vocabulary", drops="the concept from buffett_concepts"),
    Rule("concept.case", E, "mechanical", "a buffett_concept differs from the vocabulary only in case, spaces, '-' or '_'", fixer="concepts"),
    Rule("list.duplicate", W, "mechanical", "a list field repeats an entry", fixer="lists"),
    Rule("entity.not_found", E, "semantic", "an entity (company/person) is not found in the chunk content", drops="the entity name from entities.companies / entities.people"),
    Rule("entity.person_in_companies", E, "mechanical", "a name under entities.companies is typed a person (contract.names: given name, title, ...)", fixer="entities"),
    Rule("entity.organisation_in_people", E, "mechanical", "a name under entities.people is typed an organisation or a place (contract.names: legal form, organisation word, place name, ...)", fixer="entities"),
    Rule("principle.empty", E, "semantic", "a principle statement is empty", drops="the principle and its quote"),
    Rule("year.comparison_not_found", E, "semantic", "a comparison_year does not appear in the chunk content", drops="the year from temporal_references.comparison_years"),
    Rule("xref.year_range", E, "semantic", "a related_year is not a plausible letter year", drops="the year from cross_references.related_years"),
    Rule("xref.unknown_section", E, "semantic", "related_sections_same_letter names a section this letter does not have", drops="the title from cross_references.related_sections_same_letter"),
    Rule("xref.self_section", E, "semantic", "related_sections_same_letter names the chunk's own section", drops="the title from cross_references.related_sections_same_letter"),
    Rule("evidence.missing", E, "semantic", "mistake_confession/principle_statement without verbatim evidence", fields=("content_type", "content_type_evidence")),
    Rule("evidence.not_found", E, "semantic", "a content_type evidence quote is not found verbatim in content", drops="the quote from the content_type_evidence sidecar list"),
    Rule("evidence.principle_missing", E, "semantic", "a principle has no evidence quote", fields=("principles",)),
    Rule("evidence.too_short", E, "semantic", "an evidence quote is under 4 words (too short to ground anything)", drops="the quote (a principle's quote takes its principle along)"),
    Rule("evidence.principle_not_found", E, "semantic", "a principle's evidence quote is not found verbatim in content", drops="the principle and its quote"),
    Rule("injection.obeyed", E, "semantic", "a free-text field copies an instruction-like sentence of the letter text its prompt shows (the chunk, its section title, the letter's section titles) or the value it demands (letter text is data, never instructions)"),
    Rule("injection.repeated_value", E, "semantic", "one value fills 3 or more different fields (summary, themes, entities, principles, tables), unless it is a label of the chunk's own lines or table that fills no summary or principle and no instruction-like sentence is in sight"),
    Rule("injection.ungrounded_summary", E, "semantic", "a contextual_summary or table summary shares no content word with its chunk's text"),
    Rule("injection.duplicate_summary", W, "semantic", "two chunks of one letter with different text have the same contextual_summary"),
    # -- one letter (corpus rules) ----------------------------------------------------------------
    Rule("corpus.duplicate_id", E, "corpus", "two chunks share a chunk_id"),
    Rule("corpus.no_t1", E, "corpus", "a letter has no Tier-1 chunk"),
    Rule("corpus.overlap", E, "corpus", "Tier-1 chunks (or same-tier siblings) overlap"),
    Rule("corpus.tiling_gap", E, "corpus", "non-whitespace text of the cleaned letter is in no Tier-1 chunk"),
    Rule("boundary.list_split", W, "corpus", "a numbered list continues from one Tier-1 chunk into the next"),
    Rule("corpus.order", W, "mechanical", "chunks are not in reading order (start_char, tier, chunk_id)"),
    Rule("letter.inconsistent", E, "mechanical", "chunks of one letter disagree on letter_year / letter_date / source_file"),
    Rule("letter.incomplete", E, "semantic", "at stage enriched, some chunks are still as segmented (a halted, skipped or stopped run): rerun enrich"),
    Rule("id.sequence", E, "corpus", "section indices / sequences are not 1, 2, 3... in reading order"),
    Rule("id.section_mismatch", E, "corpus", "a child's section index differs from its parent's"),
    Rule("link.parent_missing", E, "corpus", "parent_chunk_id names no chunk of the letter"),
    Rule("link.parent_tier", E, "corpus", "parent_chunk_id names a chunk that is not Tier-1"),
    Rule("link.child_missing", E, "corpus", "child_chunk_ids names no chunk of the letter"),
    Rule("link.child_asymmetry", E, "mechanical", "parent and child do not list each other"),
    Rule("link.nesting", E, "corpus", "a child's source_span is not inside its parent's"),
    Rule("evidence.orphan", W, "mechanical", "an evidence record names no chunk of the letter"),
    # -- an answer the re-ask loop could not use at all (no value came back) ---------------------
    Rule("response.truncated", E, "semantic", "the answer was cut off by the token limit (finish_reason=length)", origin="response"),
    Rule("response.refused", E, "semantic", "the model refused to answer", origin="response"),
    Rule("response.malformed", E, "semantic", "the answer is not valid JSON", origin="response"),
    Rule("response.schema", E, "semantic", "the answer does not match the response schema", origin="response"),
)
# fmt: on

#: code -> rule, in table order.
RULES: dict[str, Rule] = {rule.code: rule for rule in _TABLE}

#: The rules the validator checks (``validate --list-rules`` prints these).
VALIDATOR_RULES: dict[str, Rule] = {c: r for c, r in RULES.items() if r.origin == "validator"}

#: Codes that make the input unusable as a whole (the CLI exits 2 on them).
FATAL_CODES = frozenset(
    {"input.missing_path", "input.no_jsonl", "input.unreadable", "input.empty", "input.not_jsonl"}
)

#: code -> what code removes when the re-asks are spent (the rules with ``drops``).
DROPPABLE: dict[str, str] = {c: r.drops for c, r in RULES.items() if r.drops is not None}

#: code -> the response fields re-asked together (the rules with ``fields``).
COUPLED: dict[str, tuple[str, ...]] = {c: r.fields for c, r in RULES.items() if r.fields}


def rule_kind(code: str) -> RuleKind:
    """``kind`` of a rule code; a code outside :data:`RULES` is semantic (only the model can
    say what it means)."""
    rule = RULES.get(code)
    return rule.kind if rule is not None else "semantic"
