"""Property tests of the per-line features block detection and validation read.

The fast paths (lines built without a call per line, a numeric tail counted from the last few
words, the terminal-punctuation shortcut of ``ends_mid_sentence``, signature lines looked for
only near numeric dates) must give what the plain definitions give, on any text.
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from letterchunk.contract.predicates import ends_mid_sentence
from letterchunk.text import clean
from letterchunk.text.lines import Line, _numeric_tail, numeric_cell, split_lines

# words and gaps of the kinds tables and prose put at a line's end
WORDS = ["$", "£", "1,234", "(5)", "12%", "3.5x", "-", "—", "in", "1985", "Total", "7)", "*"]
GAPS = [" ", "  ", "\t", "   ", "\u00a0"]
line_text = st.lists(st.tuples(st.sampled_from(GAPS), st.sampled_from(WORDS)), max_size=12).map(
    lambda parts: "".join(g + w for g, w in parts)
)
any_text = st.text(alphabet=st.sampled_from(list(" \t\n.ab1$\u00a0\u2003")), max_size=80)


@given(st.one_of(any_text, st.lists(line_text, max_size=6).map("\n".join)))
def test_split_lines_gives_each_line_as_line_does(text):
    lines = split_lines(text)
    raws = text.split("\n")
    assert len(lines) == len(raws)
    for ln, raw in zip(lines, raws, strict=True):
        ref = Line(ln.start, raw)
        assert text[ln.start : ln.end] == raw
        assert [getattr(ln, k) for k in Line.__slots__] == [getattr(ref, k) for k in Line.__slots__]


def _values_ending(s: str) -> int:
    """The definition: values at the end of the line's words, a lone currency sign skipped."""
    if not s or s[-1] not in "0123456789)%*":
        return 0
    n = 0
    for tok in reversed(s.split()):
        if tok in ("$", "£", "€"):
            continue
        if not (numeric_cell(tok) and any(c.isdigit() for c in tok)):
            break
        n += 1
    return n


@given(line_text)
def test_numeric_tail_counts_every_value_ending_the_line(s):
    assert _numeric_tail(s) == _values_ending(s)
    assert _numeric_tail(s.strip()) == _values_ending(s.strip())


_TERMINAL = re.compile(r"[.!?:;\"'\u201d\u2019)\]*\-\u2014]\s*$")
prose = st.lists(
    st.sampled_from(["word", "the", "end.", "(1)", "x:", "y\u2014", "z)", "\n", "\n\n", " " * 8]),
    max_size=40,
).map(" ".join)


@given(prose)
def test_a_chunk_ending_in_terminal_punctuation_never_ends_mid_sentence(content):
    if _TERMINAL.search(content.rstrip()):
        assert not ends_mid_sentence(content)
    else:  # the other rules decide: a long last paragraph of prose lines ends mid-sentence
        last = content.rstrip().rsplit("\n\n", 1)[-1]
        rows = [x for x in last.split("\n") if x.strip()]
        prose_end = (
            rows
            and len(last.split()) >= 8
            and len(rows[-1].split()) >= 4
            and not any(len(x) - len(x.lstrip(" ")) >= 8 for x in rows)
            and not re.match(r"^\s*(?:\(\w{1,2}\)|\*+|\d{1,2}\)|\d{1,2}\s)", rows[-1])
        )
        assert ends_mid_sentence(content) == bool(prose_end)


def _numeric_date_near_signature(lines: list[str]) -> str | None:
    """The definition: every signature line in order, the numeric dates within three lines."""
    for i in [j for j, ln in enumerate(lines) if clean.is_signature(ln)]:
        for j in range(max(0, i - 3), min(len(lines), i + 4)):
            for m in clean._NUMERIC_IN_LINE.finditer(lines[j]):
                before, after = lines[j][: m.start()], lines[j][m.end() :]
                beside = (
                    not before.strip()
                    or re.search(r"\S\s{3,}$", before) is not None
                    or clean._NAME_LINE.match(before.rstrip()) is not None
                )
                if beside and (not after.strip() or re.match(r"\s{3,}", after)):
                    found, _ = clean.parse_date_line(m.group(0))
                    if found:
                        return found
    return None


SIGN_OFF = [
    "Warren E. Buffett",
    "Warren E. Buffett   1-30-61",
    "1-30-61",
    "2/11/59",
    "",
    "Chairman",
    "Cordially,",
    "prose 3-4-62 here",
    "       12/31/65",
    "x-1-2-63",
    "13/45/99",
    "Partner",
]


@given(st.lists(st.sampled_from(SIGN_OFF), max_size=16))
def test_numeric_signature_date_is_the_first_near_any_signature_line(lines):
    assert clean._numeric_signature_date(lines) == _numeric_date_near_signature(lines)
