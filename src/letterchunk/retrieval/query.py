"""What a search query asks: the words BM25 matches, and the years it names.

BM25 matches the query's content words.  Function words ("why", "does", "the", "its") are left
out: FTS5's BM25 weighs a word by how rare it is, but "OR" matching still lets a passage that
repeats "the" and "of" outrank one that holds the question's only rare word, and a letter
written in the first person matches "we", "our" and "us" everywhere.  A query of function words
alone keeps them all, so it still matches something.
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

# a year 1950-2029 written in a query ("in 1982", "mid-1991", "1977's"), not part of a longer
# number or a percentage
_YEAR = re.compile(r"(?<![\d.,$])(19[5-9]\d|20[0-2]\d)(?![\d%]|,\d|s\b)")


def query_years(text: str) -> list[int]:
    """The years 1950-2029 written in ``text``, in order of first mention."""
    return list(dict.fromkeys(int(y) for y in _YEAR.findall(text)))


def fts_query(text: str) -> str:
    """An FTS5 query matching any content word of ``text``, each word quoted (no FTS5 syntax
    leaks); all of its words when it has no content word."""
    words = list(dict.fromkeys(re.findall(r"\w+", text.lower())))
    content = [w for w in words if w not in STOPWORDS]
    return " OR ".join(f'"{w}"' for w in content or words)
