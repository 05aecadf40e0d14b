"""Principle candidates: the few sentences of a chunk most likely to state a general rule.

A principle is a general, reusable rule the writer states: a sentence that would still guide a
decision outside the case at hand. The model judges each candidate sentence (is this a general
rule?), so the candidates must catch the chunk's rules while staying few. Every candidate is one
of :func:`letterchunk.enrich.candidates.sentence_choices`, so it is verbatim chunk text that the
validator accepts as evidence.

The score is a sum of cue weights, not fitted to one letter: cues of a general statement add
(a generic subject such as "investors" or "a business", a normative verb such as "should" or
"never", a first-person-plural policy such as "we believe" or "our policy", an evaluative
comparative such as "far better", a lesson such as "the moral" or "it is folly", a present-tense
general verb, a quoted maxim) and cues of a report subtract (figures, dollar amounts, percents
and years, past-tense verbs of results, proper names in mid-sentence).
"""

from __future__ import annotations

import re

from letterchunk.enrich.candidates import sentence_choices

MAX_PRINCIPLE_CANDIDATES = (
    7  # on the dev principles: the recall of every sentence, ~55% of the sentences
)


def _words(*alternatives: str) -> re.Pattern[str]:
    """A case-insensitive pattern matching any alternative as whole words."""
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.IGNORECASE)


# (pattern, weight): each pattern counts once per sentence (presence, not frequency), so a long
# sentence does not win by repetition.
_GENERAL: tuple[tuple[re.Pattern[str], float], ...] = (
    # a generic subject: people or businesses in general, not Berkshire's own
    (
        _words(
            r"investors?",
            r"managers?",
            r"managements?",
            r"owners?",
            r"shareholders",
            r"businesses",
            r"companies",
            r"(?:a|any|every|the typical|the average) (?:business|company|manager|investor|"
            r"insurer|owner|CEO|director|board)",
            r"one",
            r"you(?:r)?",
            r"people",
            r"anyone",
            r"everyone",
            r"no one",
            r"most (?:people|investors|managers|companies|businesses)",
            r"(?:a|the) (?:business|company)(?:['\u2019]s)? (?:value|owners?|managers?)",
        ),
        0.75,
    ),
    # normative and modal verbs
    (
        _words(
            r"should",
            r"must",
            r"never",
            r"always",
            r"cannot",
            r"can['\u2019]t",
            r"will not",
            r"won['\u2019]t",
            r"ought",
            r"need(?:s)? to",
            r"has to",
            r"have to",
        ),
        1.0,
    ),
    # first-person-plural or first-person policy and belief
    (
        _words(
            r"(?:we|I) (?:believe|think|feel|prefer|want|like|seek|try|much prefer|continue to "
            r"believe|have (?:always|long) (?:believed|felt|thought))",
            r"(?:we|I) (?:will|would) (?:not|never|always|rather)",
            r"(?:we|I) (?:do not|don['\u2019]t|never|always)",
            r"our (?:policy|goal|approach|preference|rule|test|criteria|view|belief|"
            r"philosophy|attitude|practice|aim)",
            r"in (?:our|my) (?:view|opinion|judgment)",
        ),
        1.0,
    ),
    # evaluative comparatives and judgements
    (
        _words(
            r"the (?:best|worst|key|wisest|only|most important|ideal)",
            r"(?:far|much|a lot) (?:better|worse|more|less)",
            r"better than",
            r"worse than",
            r"wise",
            r"foolish",
            r"folly",
            r"silly",
            r"sensible",
            r"rational",
            r"irrational",
            r"important",
            r"essential",
            r"crucial",
            r"dangerous",
            r"attractive",
            r"unattractive",
        ),
        1.0,
    ),
    # lessons, rules and timeless frames
    (
        _words(
            r"lessons?",
            r"moral",
            r"rules?",
            r"principles?",
            r"axiom",
            r"maxim",
            r"truth",
            r"it is (?:folly|wise|foolish|important|essential|better|usually|almost always)",
            r"over (?:time|the long (?:term|run))",
            r"in the long (?:run|term)",
            r"long[- ]term",
            r"in general",
            r"generally",
            r"usually",
            r"inevitably",
            r"invariably",
            r"eventually",
            r"typically",
            r"often",
            r"seldom",
            r"rarely",
            r"forever",
            r"(?:would|much) rather",
            r"what (?:really )?counts",
            r"(?:a|the) (?:wonderful|great|good|bad|mediocre|terrible) business",
        ),
        1.75,
    ),
    # present-tense general verbs
    (
        _words(
            r"is",
            r"are",
            r"tends?",
            r"does",
            r"do",
            r"can",
            r"makes?",
            r"requires?",
            r"depends?",
        ),
        1.0,
    ),
    # a quoted maxim
    (re.compile(r"[\"\u201c][^\"\u201d]{8,}[\"\u201d]"), 0.25),
    # a condition ("if", "when", "unless"): rules are often stated as conditionals
    (_words(r"if", r"when", r"whenever", r"unless"), 0.5),
    # a colon or semicolon: a rule and its reason or its two halves ("X; Y")
    (re.compile(r"[:;]"), 0.75),
)

_REPORT: tuple[tuple[re.Pattern[str], float], ...] = (
    # past-tense verbs of reported results and events
    (
        _words(
            r"was",
            r"were",
            r"had",
            r"did",
            r"earned",
            r"rose",
            r"fell",
            r"increased",
            r"decreased",
            r"declined",
            r"grew",
            r"gained",
            r"lost",
            r"purchased",
            r"bought",
            r"sold",
            r"acquired",
            r"totaled",
            r"amounted",
        ),
        1.75,
    ),
    # a dated report: this year, last year, in a given year
    (
        re.compile(
            r"(?<!\w)(?:this|last|that) year(?!\w)|(?<!\w)(?:in|during|since) (?:19|20)\d\d",
            re.IGNORECASE,
        ),
        1.5,
    ),
)
# a figure: a dollar amount, a percent, a year or any number written in digits
_FIGURE = re.compile(r"\$\s?\d|\d%|\d+(?:[.,]\d+)*\s?(?:%|percent|million|billion)|\d")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_FIGURE_WEIGHT = 1.5  # for the first number written
_MORE_FIGURES_WEIGHT = 0.25  # per further number, up to _MAX_FIGURES in all
_MAX_FIGURES = 5
# a capitalised word that does not open the sentence: mostly a proper name (a company, a person)
_MID_CAPITAL = re.compile(r"(?<=[a-z,;]\s)[A-Z][a-z]+")
_NAME_WEIGHT = 0.25  # per name word, up to _MAX_NAMES
_MAX_NAMES = 4
# an impersonal statement: no first person, name, figure or past-tense report verb in it
_FIRST_PERSON = re.compile(r"(?<!\w)(?:I|we|our|us|my|me)(?!\w)", re.IGNORECASE)
_IMPERSONAL_WEIGHT = 0.75


def principle_score(sentence: str) -> float:
    """How strongly ``sentence`` reads as a general, prescriptive rule (higher: more so).

    Cues of a general statement add their weights, each once; figures, past-tense report verbs
    and mid-sentence proper names subtract, capped so one long report cannot sink below every
    other sentence by its length alone.
    """
    score = sum(w for p, w in _GENERAL if p.search(sentence))
    score -= sum(w for p, w in _REPORT if p.search(sentence))
    figures = min(len(_NUMBER.findall(sentence)), _MAX_FIGURES) if _FIGURE.search(sentence) else 0
    if figures:
        score -= _FIGURE_WEIGHT + _MORE_FIGURES_WEIGHT * (figures - 1)
    names = [m for m in _MID_CAPITAL.findall(sentence) if m != "I"]
    score -= _NAME_WEIGHT * min(len(names), _MAX_NAMES)
    reported = any(p.search(sentence) for p, _ in _REPORT)
    if not (figures or names or reported or _FIRST_PERSON.search(sentence)):
        score += _IMPERSONAL_WEIGHT
    return score


def principle_candidates(text: str, k: int = MAX_PRINCIPLE_CANDIDATES) -> list[str]:
    """At most ``k`` of the chunk's :func:`sentence_choices`, highest :func:`principle_score`
    first; equal scores keep text order, so the result is deterministic."""
    choices = sentence_choices(text)
    ranked = sorted(range(len(choices)), key=lambda i: (-principle_score(choices[i]), i))
    return [choices[i] for i in ranked[: max(k, 0)]]
