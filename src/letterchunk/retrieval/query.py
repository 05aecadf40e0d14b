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

__all__ = ["STOPWORDS", "fts_query", "query_years"]

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
