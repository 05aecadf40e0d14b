"""Property tests: random and adversarial text into the cleaner and the segmenter.

Nothing may crash, the cleaner only removes whole lines / trailing spaces / control characters
(every line it keeps is a line of the input, in order), and every invariant of the chunks holds.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from letterchunk.contract.validate import LetterContext, validate_letter
from letterchunk.text.clean import CleanedLetter, clean_text, extract_date, extract_year
from letterchunk.text.segment import segment_letter
from test_corpus import check_invariants

SETTINGS = settings(
    max_examples=int(__import__("os").environ.get("LC_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# lines of the kinds that trip a rule-based segmenter (TRAPS.md), to be shuffled together
LINE_KINDS = [
    "",
    "",
    "     The textile business again had a very poor year in 1977. We",
    "have mistakenly predicted better results in each of the last two",
    "years, and we expect difficulty in matching our 1977 rate:",
    "Insurance Underwriting",
    "INSURANCE OPERATIONS",
    "Acquisition Criteria:",
    "* * * * * * * * * * * *",
    "*   *   *",
    "************",
    "                                                        23",
    "- 4 -",
    "1965 ...........................        23.8        49.5     10.0",
    "Revenues . . . . . . . . . . . .   $61,665 $66,099 $59,100",
    "Government Employees Insurance",
    "   Company Convertible Preferred ........   19,417     33,033",
    "                                         --------   --------",
    " 2008          -16.5%           -22.3%           -37.0%",
    "              Fund of          Fund of          S&P",
    "* Excludes capital gains or losses",
    "(1) Including interest and dividends from investments.",
    "           Over a ten-year period commencing on January 1, 2008, the S&P",
    "   •   Our managers run their businesses as owners would.",
    "   o   Our preference would be to reach this goal directly.",
    "Š   Last year I told you that BNSF would earn more.",
    "To the Shareholders of Berkshire Hathaway Inc.:",
    "BERKSHIRE HATHAWAY INC.",
    "February 25, 2017      Warren E. Buffett",
    "                                  Chairman of the Board",
    "March 14,1978",
    "Appendix",
    "[[PAGE_BREAK]]",
    "\f",
    "31› per share, 1⁄ 2 of the “float”",
    "\tTabbed\tline\twith\ttabs",
    "   ",
]

structured = st.lists(st.sampled_from(LINE_KINDS), min_size=0, max_size=120).map(
    lambda ls: "\n".join(ls) + "\n"
)
noise = st.text(
    alphabet=st.sampled_from(
        list("abcXYZ019 .,:;*-•o$%()\n\r\t\f\x00“”’›…") + ["\u00a0", "\ufeff"]
    ),
    max_size=600,
)
mixed = st.lists(st.one_of(structured, noise), min_size=1, max_size=4).map("".join)


def _kept_lines_are_input_lines(raw: str, cleaned: str) -> bool:
    norm = raw.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n")
    norm = re.sub(r"(?i)\[\[PAGE_BREAK\]\]", "\n", norm)  # page-break markers are line breaks
    norm = "".join(ch for ch in norm if ch in "\t\n" or (ord(ch) >= 32 and ord(ch) != 127))
    src = [ln.rstrip(" \t") for ln in norm.split("\n")]
    i = 0
    for ln in cleaned.split("\n")[:-1]:
        while i < len(src) and src[i] != ln:
            i += 1
        if i == len(src):
            return False
        i += 1
    return True


@SETTINGS
@given(st.one_of(structured, noise, mixed))
def test_cleaner_only_removes(raw):
    out = clean_text(raw)
    assert "\r" not in out and "\f" not in out and "\x00" not in out
    assert out == "" or out.endswith("\n")
    assert all(ln == ln.rstrip(" \t") for ln in out.split("\n"))
    assert _kept_lines_are_input_lines(raw, out)
    extract_date(out)
    extract_year("letter.txt", out)


@SETTINGS
@given(st.one_of(structured, noise, mixed), st.booleans())
def test_segmenter_invariants_hold_on_any_text(raw, tier2):
    text = clean_text(raw)
    letter = CleanedLetter(year=1999, date="2000-03-01", date_note=None, source_path="x", text=text)
    chunks = segment_letter(letter, tier2=tier2)
    if not text.strip():
        assert chunks == []
        return
    assert check_invariants(text, 1999, chunks) == []
    again = segment_letter(letter, tier2=tier2)
    assert [c.model_dump() for c in again] == [c.model_dump() for c in chunks]


# --------------------------------------------------------------------------------------------
# the span counter: exact on any text, not only on letters

SPAN_TEXT = st.lists(
    st.sampled_from(
        list("ab Z9.,$-'\n\t")
        + ["  ", "   ", "\n\n", "’", "“", "—", "é", "e\u0301", "中文", "🙂", "\r"]
    ),
    max_size=200,
).map("".join)


@SETTINGS
@given(SPAN_TEXT, st.data())
def test_span_counter_is_exact_on_any_text(text, data):
    from letterchunk.tokens import SpanCounter, count_tokens

    counter = SpanCounter(text)
    for _ in range(20):
        a = data.draw(st.integers(0, len(text)))
        b = data.draw(st.integers(a, len(text)))
        assert counter.count(a, b) == count_tokens(text[a:b]), (a, b)
    assert counter.count(0, len(text)) == count_tokens(text)


# --------------------------------------------------------------------------------------------
# real letters, cut and damaged: the segmenter's chunks pass the validator

_LETTERS = sorted((Path(__file__).resolve().parents[1] / "corpus" / "letters").glob("*.txt"))


@st.composite
def damaged_excerpts(draw) -> str:
    """A run of lines from a shipped letter with lines deleted, repeated, unindented, indented
    or blank lines inserted: the kinds of damage a different extraction does."""
    lines = draw(st.sampled_from(_LETTERS)).read_text(encoding="utf-8").split("\n")
    a = draw(st.integers(0, len(lines) - 1))
    part = lines[a : a + draw(st.integers(1, 200))]
    for _ in range(draw(st.integers(0, 8))):
        i = draw(st.integers(0, len(part) - 1)) if part else 0
        op = draw(st.sampled_from(["delete", "repeat", "strip", "blank", "indent"]))
        if not part:
            break
        if op == "delete":
            del part[i]
        elif op == "repeat":
            part.insert(i, part[draw(st.integers(0, len(part) - 1))])
        elif op == "strip":
            part[i] = part[i].strip()
        elif op == "blank":
            part.insert(i, "")
        else:
            part[i] = " " * draw(st.integers(1, 40)) + part[i]
    return "\n".join(part)


@SETTINGS
@given(damaged_excerpts(), st.booleans())
def test_damaged_real_letters_segment_into_valid_chunks(raw, tier2):
    text = clean_text(raw)
    if not text.strip():
        return
    date, note = extract_date(text)
    chunks = segment_letter(CleanedLetter(1990, date, note, "x", text), tier2=tier2)
    assert check_invariants(text, 1990, chunks) == []
    context = LetterContext(cleaned_text=text)
    errors = [
        f"{v.code} {v.chunk_id}: {v.message}"
        for v in validate_letter(chunks, stage="segmented", context=context)
        if v.severity == "error"
    ]
    assert errors == []
