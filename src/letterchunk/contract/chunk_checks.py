"""The rules one chunk answers alone about its form: ids, dates, source file, counts and
span, titles, content type and tables, links, exceptions and notes, sizes and boundaries; then
the rules on its model-filled fields (:mod:`letterchunk.contract.semantic_checks`)."""

from __future__ import annotations

import datetime as _dt

from letterchunk.contract.predicates import (
    count_lines,
    ends_mid_sentence,
    has_prose,
    has_text,
    parse_id,
    shows_text,
)
from letterchunk.contract.rules import (
    PROMPT_RESERVE_TOKENS,
    T1_MAX_TOKENS,
    T1_MIN_TOKENS,
    T2_MIN_TOKENS,
)
from letterchunk.contract.schema import UNTITLED, Chunk
from letterchunk.contract.semantic_checks import check_semantics
from letterchunk.contract.violations import Add, CheckContext, Violation, violation
from letterchunk.layout import cleaned_name, is_compilation_source, stem_year

__all__ = ["check_chunk"]


def check_chunk(chunk: Chunk, stage: str, ctx: CheckContext, ntokens: int) -> list[Violation]:
    """Every rule one chunk can answer alone, in a fixed order; ``ntokens`` is its token count."""
    out: list[Violation] = []
    cid = chunk.chunk_id

    def add(code: str, message: str, fld: str | None = None) -> None:
        out.append(violation(code, message, chunk_id=cid, field=fld))

    _ids(chunk, add)
    _dates(chunk, add)
    _source_file(chunk, add)
    _counts_and_span(chunk, ctx, ntokens, add)
    _titles(chunk, stage, add)
    _content_type_and_tables(chunk, stage, add)
    _links(chunk, add)
    _exception_and_notes(chunk, add)
    _sizes_and_boundaries(chunk, ctx, ntokens, add)
    _table_context(chunk, add)
    out.extend(check_semantics(chunk, stage, ctx))
    return out


def _ids(chunk: Chunk, add: Add) -> None:
    """Rules id.pattern, id.tier_mismatch, id.year_mismatch."""
    cid = chunk.chunk_id
    md = chunk.metadata
    tier = md.chunk_tier
    parsed = parse_id(cid)
    if parsed is None:
        add("id.pattern", f"chunk_id {cid!r} must look like YYYY-S<n>-T<1|2|3>-<nnn>", "chunk_id")
    else:
        year, _section, id_tier, _seq = parsed
        if id_tier != tier:
            add(
                "id.tier_mismatch",
                f"chunk_id says T{id_tier} but metadata.chunk_tier is {tier}; make them equal",
                "metadata.chunk_tier",
            )
        if year != md.letter_year:
            add(
                "id.year_mismatch",
                f"chunk_id starts with {year} but letter_year is {md.letter_year}",
                "metadata.letter_year",
            )


def _dates(chunk: Chunk, add: Add) -> None:
    """Rules date.unknown, date.invalid, date.year_mismatch, year.primary_mismatch."""
    md = chunk.metadata
    if md.letter_date == "0000-00-00":
        if not md.boundary_note:
            add(
                "date.unknown",
                "letter_date is 0000-00-00 (unknown): add a boundary_note saying "
                "the date could not be found",
                "metadata.boundary_note",
            )
    else:
        try:
            date = _dt.date.fromisoformat(md.letter_date)
        except ValueError:
            add(
                "date.invalid",
                f"letter_date {md.letter_date!r} is not a real date; use YYYY-MM-DD "
                "or 0000-00-00 with a boundary_note",
                "metadata.letter_date",
            )
        else:
            if date.year not in (md.letter_year, md.letter_year + 1):
                add(
                    "date.year_mismatch",
                    f"letter_date {md.letter_date} is not in {md.letter_year} "
                    f"or {md.letter_year + 1}; check the signature date",
                    "metadata.letter_date",
                )
    if md.temporal_references.primary_year != md.letter_year:
        add(
            "year.primary_mismatch",
            f"primary_year {md.temporal_references.primary_year} differs "
            f"from letter_year {md.letter_year}",
            "metadata.temporal_references.primary_year",
        )


def _source_file(chunk: Chunk, add: Add) -> None:
    """Rules source.file_name, source.file_convention: ``YYYY_cleaned.txt``, or for a
    compilation's letter ``YYYY-Lk_cleaned.txt`` (:mod:`letterchunk.layout`)."""
    md = chunk.metadata
    src = md.source_file
    if not src or "/" in src or "\\" in src or src in (".", ".."):
        add(
            "source.file_name",
            f"source_file {src!r} must be the bare name of the cleaned file "
            "beside the JSONL, e.g. 1977_cleaned.txt",
            "metadata.source_file",
        )
    elif src != cleaned_name(md.letter_year) and not (
        is_compilation_source(src) and stem_year(src) == md.letter_year
    ):
        add(
            "source.file_convention",
            f"source_file {src!r} is not {cleaned_name(md.letter_year)}",
            "metadata.source_file",
        )


def _counts_and_span(chunk: Chunk, ctx: CheckContext, ntokens: int, add: Add) -> None:
    """Rules content.empty, count.*, span.* (the span against the cleaned text when known)."""
    md = chunk.metadata
    content = chunk.content
    if not has_text(content) or not shows_text(content):  # blanks, ASCII or Unicode, alike
        add("content.empty", "content is empty; a chunk must hold text of the letter", "content")
    if md.char_count != len(content):
        add(
            "count.chars",
            f"char_count is {md.char_count}, len(content) is {len(content)}",
            "metadata.char_count",
        )
    if md.token_count != ntokens:
        add(
            "count.tokens",
            f"token_count is {md.token_count}, o200k_base counts {ntokens}",
            "metadata.token_count",
        )
    start, end = md.source_span.start_char, md.source_span.end_char_exclusive
    span_ok = False
    if start == 0 and end == 0:
        if md.boundary_note:
            add(
                "span.unavailable",
                "source_span is 0/0: offsets unavailable",
                "metadata.source_span",
            )
        else:
            add(
                "span.order",
                "source_span is 0/0 without a boundary_note; give the real offsets "
                "into the cleaned text",
                "metadata.source_span",
            )
    elif not 0 <= start < end:
        add(
            "span.order",
            f"source_span [{start}, {end}) must satisfy 0 <= start_char < end_char_exclusive",
            "metadata.source_span",
        )
    elif end - start != len(content):
        add(
            "span.length",
            f"source_span covers {end - start} chars but content has {len(content)}",
            "metadata.source_span",
        )
    else:
        span_ok = True
    if span_ok and ctx.cleaned is not None:
        if end > len(ctx.cleaned):
            add(
                "span.out_of_range",
                f"source_span ends at {end} but the cleaned text has {len(ctx.cleaned)} chars",
                "metadata.source_span.end_char_exclusive",
            )
        elif not ctx.cleaned.startswith(content, start):  # end - start == len(content)
            add(
                "span.content_mismatch",
                f"cleaned_text[{start}:{end}] is not the chunk content; "
                "recompute the span from the cleaned file",
                "metadata.source_span",
            )


def _titles(chunk: Chunk, stage: str, add: Add) -> None:
    """Rules title.empty, title.untitled, hierarchy.empty."""
    md = chunk.metadata
    if not md.section_title.strip():
        add(
            "title.empty",
            "section_title is empty; give the section's header or a short title",
            "metadata.section_title",
        )
    elif stage == "enriched" and md.section_title == UNTITLED:
        add(
            "title.untitled",
            f"section_title is still {UNTITLED!r}; give the section a short title",
            "metadata.section_title",
        )
    if not md.section_hierarchy or any(not h.strip() for h in md.section_hierarchy):
        add(
            "hierarchy.empty",
            "section_hierarchy needs a non-blank path such as ['Letter Body']",
            "metadata.section_hierarchy",
        )


def _content_type_and_tables(chunk: Chunk, stage: str, add: Add) -> None:
    """Rules content_type.*, table.* on the table data."""
    md = chunk.metadata
    tier = md.chunk_tier
    ctype = md.content_type
    if tier in (1, 2) and ctype == "financial_table":
        add(
            "content_type.table_outside_t3",
            f"a Tier-{tier} chunk cannot be financial_table; use "
            "narrative, mistake_confession or principle_statement",
            "metadata.content_type",
        )
    if tier == 3 and ctype != "financial_table":
        add(
            "content_type.t3_not_table",
            f"Tier-3 chunks are financial_table, not {ctype}",
            "metadata.content_type",
        )
    tables = md.table_data
    if ctype == "financial_table" and not (md.has_table and tables):
        add(
            "table.financial_without_table",
            "content_type financial_table needs has_table=true and at least one table_data entry",
            "metadata.table_data",
        )
    if md.has_table != bool(tables):
        add(
            "table.has_table_mismatch",
            f"has_table is {str(md.has_table).lower()} but table_data "
            f"has {len(tables)} entries; set has_table = len(table_data) > 0",
            "metadata.has_table",
        )
    for i, table in enumerate(tables):
        where = f"metadata.table_data.{i}"
        if table.row_count != len(table.rows):
            add(
                "table.row_count",
                f"row_count is {table.row_count}, rows has {len(table.rows)}",
                f"{where}.row_count",
            )
        if not table.columns or not table.rows:
            add("table.empty", "a table needs columns and at least one row", where)
        elif any(len(row) != len(table.columns) for row in table.rows):
            bad = next(j for j, row in enumerate(table.rows) if len(row) != len(table.columns))
            add(
                "table.row_width",
                f"row {bad} has {len(table.rows[bad])} cells for {len(table.columns)} columns",
                f"{where}.rows.{bad}",
            )
        if stage == "enriched" and tier == 3:
            if not table.table_name.strip():
                add(
                    "table.name_missing",
                    "give the table a name (its caption or what it shows)",
                    f"{where}.table_name",
                )
            if not table.summary.strip():
                add(
                    "table.summary_missing",
                    "give the table a 1-2 sentence summary",
                    f"{where}.summary",
                )


def _links(chunk: Chunk, add: Add) -> None:
    """Link rules one chunk can answer alone (link.t1_parent, link.self, ...)."""
    cid = chunk.chunk_id
    md = chunk.metadata
    tier = md.chunk_tier
    parent = md.parent_chunk_id
    if tier == 1 and parent is not None:
        add("link.t1_parent", "Tier-1 chunks have parent_chunk_id null", "metadata.parent_chunk_id")
    if tier == 2 and parent is None:
        add(
            "link.parent_required",
            "a Tier-2 chunk must name its Tier-1 parent",
            "metadata.parent_chunk_id",
        )
    if tier != 1 and md.child_chunk_ids:
        add(
            "link.leaf_children",
            "only Tier-1 chunks list child_chunk_ids",
            "metadata.child_chunk_ids",
        )
    if parent == cid or cid in md.child_chunk_ids:
        add("link.self", "a chunk cannot be its own parent or child", "metadata.parent_chunk_id")
    for fld, ids in (
        ("metadata.parent_chunk_id", [parent] if parent else []),
        ("metadata.child_chunk_ids", md.child_chunk_ids),
    ):
        for other in ids:
            p = parse_id(other)
            if p is None or p[0] != md.letter_year:
                add(
                    "link.id_format", f"{other!r} is not a chunk id of letter {md.letter_year}", fld
                )
    if len(set(md.child_chunk_ids)) != len(md.child_chunk_ids):
        add("link.duplicate_child", "child_chunk_ids lists an id twice", "metadata.child_chunk_ids")


def _exception_and_notes(chunk: Chunk, add: Add) -> None:
    """Rules exception.reason_missing, exception.priority, exception.reason_without_flag,
    note.blank."""
    md = chunk.metadata
    if md.standalone_exception:
        if not (md.exception_reason or "").strip():
            add(
                "exception.reason_missing",
                "standalone_exception=true needs a one-sentence exception_reason",
                "metadata.exception_reason",
            )
        if md.retrieval_priority != "high":
            add(
                "exception.priority",
                "standalone_exception=true requires retrieval_priority 'high'",
                "metadata.retrieval_priority",
            )
    elif md.exception_reason is not None and md.exception_reason.strip():
        add(
            "exception.reason_without_flag",
            "exception_reason is set but standalone_exception is false; clear one or set the other",
            "metadata.exception_reason",
        )
    for fld in ("boundary_note", "exception_reason"):
        value = getattr(md, fld)
        if value is not None and not value.strip():
            add("note.blank", f"{fld} is an empty string; use null", f"metadata.{fld}")


def _sizes_and_boundaries(chunk: Chunk, ctx: CheckContext, ntokens: int, add: Add) -> None:
    """Rules size.*, exception.unneeded, boundary.mid_sentence, boundary.header_only."""
    md = chunk.metadata
    content = chunk.content
    tier = md.chunk_tier
    limit = ctx.max_tokens
    if ntokens > limit:
        add(
            "size.context",
            f"chunk has {ntokens:,} tokens, more than a model with a "
            f"{limit + PROMPT_RESERVE_TOKENS:,}-token context can be asked about ({limit:,}); "
            "the letter cannot be enriched as is: split it into paragraphs and sections "
            "(blank lines, headers), or set LETTERCHUNK_CONTEXT_TOKENS for a larger model",
            "content",
        )
    minimum = {1: T1_MIN_TOKENS, 2: T2_MIN_TOKENS}.get(tier)
    if minimum is not None:
        if ntokens < minimum and not md.standalone_exception and tier == 1 and ctx.single_t1:
            add(
                "size.t1_whole_letter",
                f"the letter is one Tier-1 chunk of {ntokens} tokens "
                f"(< {minimum}); there is no neighbour to merge it with",
                "content",
            )
        elif ntokens < minimum and not md.standalone_exception:
            add(
                f"size.t{tier}_min",
                f"Tier-{tier} chunk has {ntokens} tokens (< {minimum}) without "
                "standalone_exception; merge it with a neighbour",
                "content",
            )
        elif ntokens >= minimum and md.standalone_exception:
            add(
                "exception.unneeded",
                f"chunk has {ntokens} tokens (>= {minimum}); standalone_exception is not needed",
                "metadata.standalone_exception",
            )
        if tier == 1 and ntokens > T1_MAX_TOKENS:
            add(
                "size.t1_max",
                f"Tier-1 chunk has {ntokens} tokens (> {T1_MAX_TOKENS}); split the "
                "section at a paragraph boundary",
                "content",
            )
        if has_text(content) and ends_mid_sentence(content):
            add(
                "boundary.mid_sentence",
                "the chunk's last paragraph does not end a sentence",
                "content",
            )
        nonblank = count_lines(content, stop=3)
        # a header, or a header and one line, is short: one or two long lines (an unwrapped
        # paragraph, or the sentence-split part of a letter written on one line) are prose
        short = ntokens < T2_MIN_TOKENS
        if 0 < nonblank <= 2 and short and not (tier == 1 and ctx.single_t1):
            # a single Tier-1 chunk of a whole letter is size.t1_whole_letter's case
            add(
                "boundary.header_only",
                f"the chunk is {nonblank} line(s) of text; a header or "
                "'header + one line' is never a chunk: merge it with the text it introduces",
                "content",
            )


def _table_context(chunk: Chunk, add: Add) -> None:
    """Rules table.no_context, table.financial_flag."""
    md = chunk.metadata
    content = chunk.content
    tier = md.chunk_tier
    ctype = md.content_type
    if tier == 3 and has_text(content) and not has_prose(content):
        add(
            "table.no_context",
            "no lead-in or interpretation sentence around the table; keep "
            "them in the same chunk as the table",
            "content",
        )
    if ctype == "financial_table" and not md.has_financial_data:
        add(
            "table.financial_flag",
            "a financial_table chunk has financial data; set has_financial_data=true",
            "metadata.has_financial_data",
        )
