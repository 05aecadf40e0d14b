"""What a search query asks: the words BM25 matches, and the years it names.

BM25 matches the query's content words.  Function words ("why", "does", "the", "its") are left
out: FTS5's BM25 weighs a word by how rare it is, but "OR" matching still lets a passage that
repeats "the" and "of" outrank one that holds the question's only rare word, and a letter
written in the first person matches "we", "our" and "us" everywhere.  A query of function words
alone keeps them all, so it still matches something.

A capital letter outranks the list: **a capitalised word that does not open a sentence is never
dropped.**  "Re" in "General Re", "US" in "sold in the US", "The" in "owns The Washington Post"
name something.  A name (a run of capitalised words) that holds a function word is matched as a
phrase as well as by its content words ("general re": the reinsurer, not every "we're"); a lone
capitalised function word inside a sentence is matched as a word.  The first word of a sentence
is capitalised for the sentence, not for a name ("What", "How", "The" there stay function words),
a query with no lower-case letter at all carries no capitals to read, and AND, OR and NOT in
capitals are the search operators people type ("GEICO OR float"), not names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["STOPWORDS", "YearSignal", "fts_query", "query_years", "year_signal"]

# English function words (close to NLTK's English list): pronouns, articles, auxiliaries,
# prepositions, conjunctions, question words, and the pieces \w+ leaves of a contraction or a
# possessive ("company's" -> "company", "s")
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    s t d ll m re ve
    """.split()
)

_WORD = re.compile(r"\w+")
# what ends a sentence between two words: the next word opens a sentence
_SENTENCE_END = re.compile(r"[.!?:;]")
# what may stand between two words of one name: spaces, a hyphen, an ampersand
_OPERATORS = frozenset({"AND", "OR", "NOT"})
_NAME_GAP = re.compile(r"[ \t]*[-&]?[ \t]*")

# a year 1950-2029 written in a query ("in 1982", "mid-1991", "1977's"), not part of a longer
# number or a percentage
_YEAR = re.compile(r"(?<![\d.,$])(19[5-9]\d|20[0-2]\d)(?![\d%]|,\d|s\b)")


def query_years(text: str) -> list[int]:
    """The years 1950-2029 written in ``text``, in order of first mention."""
    return list(dict.fromkeys(int(y) for y in _YEAR.findall(text)))


# a decade: "1990s", "the 1990's" (after "the", "early", "mid" or "late": "1990's results" is
# the year's), "the '90s"
_DECADE = re.compile(
    r"(?<![\d.,$'\u2019])(?:(19[5-9]|20[0-2])0s\b"
    r"|(?<=the |rly |mid |ate |mid-)(19[5-9]|20[0-2])0['\u2019]s\b"
    r"|['\u2019]([5-9]0|[0-2]0)['\u2019]?s\b)",
    re.IGNORECASE,
)
# the newest letter, said without its year: "last year", "this year", "the latest letter",
# "the most recent report", "the newest annual letter", "most recently"
_NEWEST = re.compile(
    r"\b(?:last year|this year|this past year|the past year|most recently"
    r"|(?:the )?(?:latest|most recent|newest|current)(?: annual| shareholder)?"
    r" (?:letter|report|year)s?)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class YearSignal:
    """The letter years a query names, what named them, and how search uses them.

    ``years``: the letters whose chunks rank higher; ``said``: the words that named each
    (``"1987"``, ``"the 1990s"``, ``"last year"``); ``use``: ``"boost"`` (the years' chunks join
    the ranking once more, the others stay), or ``"off"`` when a year filter already decides.
    """

    years: tuple[int, ...]
    said: tuple[str, ...]
    use: str = "boost"


def year_signal(text: str, newest: int | None = None) -> YearSignal | None:
    """The years ``text`` names: written years, decades (each year of them), and the newest
    letter said without its year ("last year", "the latest letter"), read as ``newest`` (the
    newest letter the index holds; left out when None).  None when it names none."""
    years: list[int] = []
    said: list[str] = []
    decades = list(_DECADE.finditer(text))
    for match in _YEAR.finditer(text):
        if any(d.start() <= match.start() < d.end() for d in decades):
            continue  # "the 1990's": the decade, read below
        years.append(int(match.group(1)))
        said.append(match.group(1))
    for match in decades:
        century = match.group(1) or match.group(2)
        if century:
            first = int(century) * 10
        else:  # "'90s": the twentieth century from '50 up, the twenty-first below
            two = int(match.group(3))
            first = (1900 if two >= 50 else 2000) + two
        years += range(first, first + 10)
        said.append(match.group(0))
    if newest is not None:
        for match in _NEWEST.finditer(text):
            years.append(newest)
            said.append(match.group(0))
    if not years:
        return None
    return YearSignal(tuple(dict.fromkeys(years)), tuple(dict.fromkeys(said)))


def fts_query(text: str) -> str:
    """An FTS5 query matching any content word of ``text``, each word quoted (no FTS5 syntax
    leaks), and each capitalised function word inside a sentence, alone or in its name's
    phrase (see the module docstring); all of its words when it has none of these."""
    tokens = list(_WORD.finditer(text))
    words = list(dict.fromkeys(m.group().lower() for m in tokens))
    terms = [w for w in words if w not in STOPWORDS]
    terms += [t for t in _names(text, tokens) if t not in terms]
    return " OR ".join(f'"{t}"' for t in terms or words)


def _names(text: str, tokens: list[re.Match[str]]) -> list[str]:
    """The terms that keep capitalised function words: a name's phrase ("general re") or the
    lone word ("us")."""
    if not any(ch.islower() for ch in text):
        return []  # all capitals (or none): case says nothing about names
    capital = [m.group()[0].isupper() and m.group() not in _OPERATORS for m in tokens]
    opens = [
        n == 0 or _SENTENCE_END.search(text, tokens[n - 1].end(), m.start()) is not None
        for n, m in enumerate(tokens)
    ]
    terms: list[str] = []
    n = 0
    while n < len(tokens):
        if not capital[n]:
            n += 1
            continue
        run = [n]
        while (
            run[-1] + 1 < len(tokens)
            and capital[run[-1] + 1]
            and not opens[run[-1] + 1]
            and _NAME_GAP.fullmatch(text, tokens[run[-1]].end(), tokens[run[-1] + 1].start())
        ):
            run.append(run[-1] + 1)
        n = run[-1] + 1
        # a sentence's first word is capitalised for the sentence: a function word there is no
        # part of a name ("What Berkshire paid")
        while run and opens[run[0]] and tokens[run[0]].group().lower() in STOPWORDS:
            run.pop(0)
        lowered = [tokens[i].group().lower() for i in run]
        if any(w in STOPWORDS for w in lowered):
            terms.append(" ".join(lowered))
    return terms
