"""Section headers start Tier-1 chunks: a short-section merge never puts one mid-chunk.

The property, over every shipped letter and over variants generated from them (a short stub
section inserted before a header, a page-number line put before a header): every section header
(a header line, or a table caption that opens a section) is the first thing of a Tier-1 chunk,
except

* a header directly under another header (the stack opens one section and starts its chunk);
* where micro-content (a section under the Tier-2 minimum, which may never stand alone) had no
  merge but one over a header; the chunk's boundary note records that merge.

A short section that no merge can join without burying a header stands alone as a standalone
exception: flagged, with a reason and high retrieval priority, and never micro-content.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from letterchunk.contract.schema import Chunk
from letterchunk.text.blocks import Block, detect_blocks
from letterchunk.text.clean import CleanedLetter, clean_text, load_letter
from letterchunk.text.lines import headerish
from letterchunk.text.segment import T1_MIN, T2_MIN, segment_letter
from test_corpus import LETTERS, check_invariants
from test_segment import letter as make_letter
from test_segment import prose

SETTINGS = settings(
    max_examples=int(__import__("os").environ.get("LC_HYPOTHESIS_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
_MERGE_NOTE = re.compile(r"Short .*? \((\d+) tokens\) merged (?:forward|backward)")
STUB_TITLES = ["Other Matters", "Shareholder Matters", "Insurance Results", "A Note on Taxes"]


def _is_header(b: Block) -> bool:
    return b.kind == "header" or (b.kind == "table" and bool(b.meta.get("detached_caption")))


def _t1(chunks: list[Chunk]) -> list[Chunk]:
    return [c for c in chunks if c.metadata.chunk_tier == 1]


def _holder(chunks: list[Chunk], at: int) -> Chunk:
    return next(
        c
        for c in _t1(chunks)
        if c.metadata.source_span.start_char <= at < c.metadata.source_span.end_char_exclusive
    )


def buried_headers(text: str, chunks: list[Chunk]) -> list[str]:
    """Headers mid-chunk that neither a header stack nor a recorded micro merge explains."""
    blocks = detect_blocks(text)
    starts = {c.metadata.source_span.start_char for c in _t1(chunks)}
    bad = []
    for i, b in enumerate(blocks):
        if not _is_header(b) or b.start in starts:
            continue
        chunk = _holder(chunks, b.start)
        before = [x for x in blocks[:i] if x.start >= chunk.metadata.source_span.start_char]
        if all(_is_header(x) for x in before):
            continue  # under a parent header that starts the chunk
        micro = [int(n) for n in _MERGE_NOTE.findall(chunk.metadata.boundary_note or "")]
        if any(n < T2_MIN for n in micro):
            continue
        bad.append(f"{chunk.chunk_id}: {text[b.start : b.end][:50]!r}")
    return bad


def exception_faults(chunks: list[Chunk]) -> list[str]:
    """Anti-orphan gate with its exception: a Tier-1 chunk under the minimum is a flagged
    standalone exception (reason, high priority) of at least the Tier-2 minimum, or the
    whole letter."""
    t1 = _t1(chunks)
    bad = []
    for c in t1:
        m = c.metadata
        if m.token_count >= T1_MIN:
            if m.standalone_exception:
                bad.append(f"{c.chunk_id}: flagged but not short")
        elif len(t1) > 1 and not (
            m.standalone_exception
            and m.exception_reason
            and m.retrieval_priority == "high"
            and m.token_count >= T2_MIN
        ):
            bad.append(f"{c.chunk_id}: short ({m.token_count}) without a valid exception")
    return bad


def _segmented(letter: CleanedLetter) -> list[Chunk]:
    chunks = segment_letter(letter)
    assert check_invariants(letter.text, letter.year, chunks) == []
    return chunks


def _variant(letter: CleanedLetter, text: str) -> CleanedLetter:
    return CleanedLetter(letter.year, letter.date, letter.date_note, letter.source_path, text)


def _headers_at_starts(letter: CleanedLetter) -> tuple[list[Chunk], list[Block]]:
    chunks = _segmented(letter)
    starts = {c.metadata.source_span.start_char for c in _t1(chunks)}
    return chunks, [b for b in detect_blocks(letter.text) if _is_header(b) and b.start in starts]


# ------------------------------------------------------------------------ shipped letters


def test_no_shipped_letter_buries_a_header():
    for path in LETTERS:
        letter = load_letter(path)
        chunks = _segmented(letter)
        assert buried_headers(letter.text, chunks) == [], path.name
        assert exception_faults(chunks) == [], path.name


# ------------------------------------------------------------------------ generated variants


# a shipped letter, one of its headers, a seed for generated prose
WHICH = st.integers(0, len(LETTERS) - 1)
WHERE = SEED = st.integers(0, 10_000)


def _before_a_header(which: int, where: int, inserted: str) -> tuple[str, int, list[Chunk]]:
    """Shipped letter ``which`` with ``inserted`` put before one of its headers (``where``
    picks which): the new text, where the insertion starts, and its chunks."""
    base = load_letter(LETTERS[which])
    _, heads = _headers_at_starts(base)
    at = heads[where % len(heads)].start
    text = base.text[:at] + inserted + base.text[at:]
    return text, at, _segmented(_variant(base, text))


@SETTINGS
@given(
    which=WHICH,
    where=WHERE,
    sentences=st.integers(1, 14),
    title=st.sampled_from(STUB_TITLES),
    seed=SEED,
)
def test_a_short_stub_before_a_header_buries_no_header(which, where, sentences, title, seed):
    stub = f"{title}\n\n{prose(sentences, seed)}\n\n"
    text, at, chunks = _before_a_header(which, where, stub)
    # the stub's header is a header (else the variant tests nothing)
    assert [b.kind for b in detect_blocks(text) if b.start == at] == ["header"]
    assert buried_headers(text, chunks) == []
    assert exception_faults(chunks) == []


@SETTINGS
@given(
    which=WHICH,
    where=WHERE,
    sentences=st.integers(1, 8),
    seed=SEED,
    separator=st.sampled_from(["", "* * * * * * * *\n\n"]),
)
def test_a_short_untitled_passage_before_a_header_buries_no_header(
    which, where, sentences, seed, separator
):
    passage = separator + prose(sentences, seed) + "\n\n"  # a separator opens its own section
    text, _, chunks = _before_a_header(which, where, passage)
    assert buried_headers(text, chunks) == []
    assert exception_faults(chunks) == []


@SETTINGS
@given(
    which=WHICH,
    where=WHERE,
    page=st.integers(1, 99),
    form=st.sampled_from(
        ["{n}", "- {n} -", "                                        {n}", "Page {n}"]
    ),
    brk=st.sampled_from(["", "\f\n", "[[PAGE_BREAK]]\n"]),
)
def test_a_page_number_before_a_header_keeps_it_at_a_chunk_start(which, where, page, form, brk):
    base = load_letter(LETTERS[which])
    _, heads = _headers_at_starts(base)
    h = heads[where % len(heads)]
    title = base.text[h.start : h.end]
    line = form.format(n=page)
    text = clean_text(base.text[: h.start] + f"{line}\n{brk}\n" + base.text[h.start :])
    letter = _variant(base, text)
    chunks = _segmented(letter)
    assert buried_headers(text, chunks) == []
    starts = {c.metadata.source_span.start_char for c in _t1(chunks)}
    assert any(b.start in starts for b in detect_blocks(text) if text[b.start : b.end] == title)


@given(
    indent=st.sampled_from(["", "  ", "                    "]),
    word=st.sampled_from(["Page", "PAGE", "page"]),
    n=st.integers(1, 9999),
    of=st.one_of(st.none(), st.integers(1, 9999)),
    dash=st.sampled_from(["", "-", "– ", "— "]),
)
def test_a_page_marker_is_never_a_header(indent, word, n, of, dash):
    mark = f"{word} {n}" + (f" of {of}" if of is not None else "")
    closing = dash.strip() and f" {dash.strip()}"
    assert not headerish(f"{indent}{dash}{mark}{closing}")


# ------------------------------------------------------------------------ the rule itself


def _sections(*sizes: int, opening: int = 0) -> str:
    """A letter of headed sections with ``sizes`` sentences each (and an untitled opening)."""
    parts = [prose(opening, 99)] if opening else []
    for k, n in enumerate(sizes):
        parts += [f"Section Number {k + 1}", prose(n, k)]
    return "\n\n".join(parts) + "\n"


def test_a_short_section_between_headers_stands_alone():
    letter = make_letter(_sections(30, 8, 30))  # 8 sentences: under T1_MIN, over T2_MIN
    chunks = _segmented(letter)
    t1 = _t1(chunks)
    assert [c.metadata.section_title for c in t1] == [f"Section Number {k}" for k in (1, 2, 3)]
    short = t1[1].metadata
    assert T2_MIN <= short.token_count < T1_MIN
    assert short.standalone_exception and short.exception_reason
    assert short.retrieval_priority == "high"
    assert "kept as its own chunk" in (short.boundary_note or "")
    assert not t1[0].metadata.standalone_exception and not t1[2].metadata.standalone_exception


def test_micro_content_still_merges():
    letter = make_letter(_sections(30, 2, 30))  # header + two sentences: micro-content
    t1 = _t1(_segmented(letter))
    assert len(t1) == 2 and not any(c.metadata.standalone_exception for c in t1)
    assert "merged" in (t1[1].metadata.boundary_note or "")


def test_a_short_opening_before_a_header_stands_alone():
    letter = make_letter(_sections(30, 30, opening=8))
    t1 = _t1(_segmented(letter))
    assert t1[0].metadata.standalone_exception
    assert [c.metadata.section_title for c in t1[1:]] == ["Section Number 1", "Section Number 2"]


def test_a_short_untitled_passage_merges_backward_not_over_the_header():
    # an asterisk separator opens an untitled section of three sentences before a header
    passage = f"\n\n* * * * *\n\n{prose(3, 7)}\n\nSection Number 2"
    text = _sections(30, 30).replace("\n\nSection Number 2", passage)
    t1 = _t1(_segmented(make_letter(text)))
    assert [c.metadata.section_title for c in t1] == ["Section Number 1", "Section Number 2"]
    assert "merged backward" in (t1[0].metadata.boundary_note or "")
