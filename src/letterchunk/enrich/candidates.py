"""Candidates computed by code from a chunk's text: proper names, sentences to quote, years,
the concepts its words cue and its confession sentences (see :mod:`letterchunk.enrich`)."""

from __future__ import annotations

import re

from letterchunk.contract.validate import (
    concept_known,
    entity_found,
    entity_text,
    normalise_ws,
    quote_problem,
)
from letterchunk.enrich.context import PromptContext
from letterchunk.text.sentences import sentences

_YEAR = re.compile(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)")


def years_in_text(text: str) -> list[int]:
    """Distinct four-digit years (1800-2099) written in ``text``, ascending."""
    return sorted({int(y) for y in _YEAR.findall(text)})


_WS = re.compile(r"\s+")
_NOT_NAMES = frozenset(
    """
a about after all also although among an and any are as at because before besides both but by
dear despite during each either even every except few for from further given he her here his
however i if in including instead into it its last let many meanwhile more moreover most much my
neither nevertheless next no nor not now of on once one only or other others our overall over
perhaps since so some such than that the their then there these they this those though three
through thus to today two under unless until upon we what when whenever where whether which
while who why will with within without yet you your
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday
""".split()
)
_CONNECTORS = frozenset({"of", "and", "&", "de", "du", "la", "van", "von"})
_CONTINUE_AFTER_DOT = re.compile(r"^(?:Mr|Mrs|Ms|Dr|Jr|Sr|St|[A-Z]|(?:[A-Z]\.)+[A-Z])\.$")
_ENDS_NAME = re.compile(r"[,;:!?)\]\"\u201d]$|\.$")
MAX_NAME_CHOICES, MAX_QUOTE_CHOICES, MIN_QUOTE_WORDS = 60, 150, 5


def name_candidates(text: str) -> list[str]:
    """Proper-name candidates written in ``text`` (first occurrence order, deduplicated).

    Runs of capitalised words inside one paragraph and one sentence ("of", "and", "&" allowed
    inside a run); leading function words ("The", "Our") and a possessive "'s" are dropped, and
    a lone sentence-initial word is not a name unless it is capitalised mid-sentence elsewhere.
    The entity lists are chosen from these, so every entity is grounded in the chunk.
    """
    runs: list[tuple[list[str], bool]] = []  # (words, began a sentence)
    mid_caps: set[str] = set()
    for para in re.split(r"\n\s*\n", text):
        run: list[str] = []
        run_at_start = False
        sentence_start = True
        for raw in para.split():
            word = _name_word(raw)
            if not word:
                continue
            if run and raw[:1] in _OPENERS:  # "Energy (“BHE”)": a bracket starts a new name
                runs.append((run, run_at_start))
                run = []
            capital = word[:1].isupper()
            if capital and not sentence_start:
                mid_caps.add(word.rstrip(".").lower())
            if capital or (run and word in _CONNECTORS):
                if not run:
                    run_at_start = sentence_start
                run.append(word)
            elif run:
                runs.append((run, run_at_start))
                run = []
            ends = bool(_ENDS_NAME.search(raw)) and not _CONTINUE_AFTER_DOT.match(raw.rstrip(",;:"))
            if run and ends:
                runs.append((run, run_at_start))
                run = []
            sentence_start = bool(re.search(r"[.!?:][\"'\u201d\u2019)]*$", raw)) and not (
                _CONTINUE_AFTER_DOT.match(raw)
            )
        if run:
            runs.append((run, run_at_start))
    out: dict[str, None] = {}
    for words, at_start in runs:
        words = list(words)
        while words and (words[0].rstrip(".").lower() in _NOT_NAMES or words[0] in _CONNECTORS):
            words.pop(0)
            at_start = False
        while words and (words[-1] in _CONNECTORS or words[-1].lower() in _NOT_NAMES):
            words.pop()
        if not words:
            continue
        name = re.sub(r"['\u2019]s$", "", " ".join(words)).rstrip(".'\u2019-")
        if len(name) < 2 or name.lower() in _NOT_NAMES:
            continue
        if " " not in name and at_start and name.lower() not in mid_caps:
            continue
        out.setdefault(name, None)
        if " and " in name:  # "New Bedford and Manchester" also names each part
            for part in name.split(" and "):
                if len(part) > 1 and part.lower() not in _NOT_NAMES:
                    out.setdefault(part, None)
    # only names the validator finds in the text (rule entity.not_found), by its own test
    folded = entity_text(text)
    return [name for name in out if entity_found(name, folded)][:MAX_NAME_CHOICES]


_WORD_PUNCT = "\"'\u201c\u201d\u2018([,;:!?)]"
_OPENERS = frozenset("(\"'\u201c\u2018[")


def _name_word(raw: str) -> str:
    """``raw`` without surrounding punctuation; a final '.' is kept (it may end a sentence),
    and punctuation before it goes: ``(“BHE”).`` -> ``BHE.``."""
    word = raw.strip(_WORD_PUNCT)
    core = word.rstrip(".")
    if core != word and core.rstrip(_WORD_PUNCT) != core:
        word = core.rstrip(_WORD_PUNCT) + "."
    return word


def sentence_choices(text: str) -> list[str]:
    """The chunk's sentences (whitespace collapsed) of at least MIN_QUOTE_WORDS words.

    Split by :func:`letterchunk.text.sentences.sentences`, which does not end a sentence at
    "Mr.", "U.S." or "Inc."; evidence quotes are chosen from these, so each is verbatim chunk
    text by construction.
    """
    flat = normalise_ws(text)
    out = dict.fromkeys(s for s in sentences(text) if len(s.split()) >= MIN_QUOTE_WORDS)
    # only quotes the validator accepts (rules evidence.too_short / evidence.not_found)
    return [q for q in out if quote_problem(q, flat) is None][:MAX_QUOTE_CHOICES]


def _cue_pattern(cue: str) -> re.Pattern[str]:
    """A cue matches case-insensitively at a word start; its inner spaces match any whitespace."""
    body = r"\s+".join(re.escape(part) for part in cue.split())
    return re.compile(r"(?<!\w)" + body, re.IGNORECASE)


def cued_concepts(text: str, ctx: PromptContext) -> list[str]:
    """Concepts of ``ctx.vocabulary`` whose cues (or own name) occur in ``text``.

    Ordered by number of cue hits, most first; ties keep vocabulary order.
    """
    cues = dict(ctx.cues)
    hits: list[tuple[int, int, str]] = []
    for index, concept in enumerate(ctx.vocabulary):
        patterns = dict.fromkeys((concept, *cues.get(concept, ())))
        count = sum(len(_cue_pattern(c).findall(text)) for c in patterns)
        if count and concept_known(concept, ctx.vocabulary):  # rule concept.unknown
            hits.append((-count, index, concept))
    return [concept for _, _, concept in sorted(hits)]


# Self-critical cues (see module docstring); each matches at a word start, case-insensitively.
# Broad on purpose: they only propose evidence sentences and order the choices; whether a chunk
# confesses is the model's judgement (enrich.judges).
CONFESSION_CUES: tuple[str, ...] = (
    r"mistake",
    r"errors?\b",
    r"erred\b",
    r"wrong",
    r"blunder",
    r"regret",
    r"misjudg",
    r"miscalculat",
    r"misread",
    r"underestimat",
    r"overestimat",
    r"overpaid\b",
    r"should(?: not|n['\u2019]t)? have\b",
    r"failed to\b",
    r"(?:my|our) (?:failure|fault|decision)",
    r"cost us\b",
    r"costly\b",
    r"embarrass",
    r"foolish",
    r"dumb",
    r"stupid",
    r"too (?:early|late|slow|long)\b",
    r"in hindsight",
    r"alas\b",
    r"(?:paid|paying|pay) (?:far |way )?too much",
    r"unfortunately",
    r"disappoint",
)
_CONFESSION = re.compile(r"(?<!\w)(?:" + "|".join(CONFESSION_CUES) + ")", re.IGNORECASE)
_FIRST_PERSON = re.compile(
    r"(?<!\w)(?:I|I['\u2019](?:ve|d|m)|we|we['\u2019](?:ve|d|re)|us|our|my|me)(?!\w)", re.IGNORECASE
)


def first_person(sentence: str) -> bool:
    """Whether ``sentence`` speaks in the first person ("I", "we", "our", "my", "us")."""
    return _FIRST_PERSON.search(sentence) is not None


def confession_sentences(text: str) -> list[str]:
    """The chunk's :func:`sentence_choices` that hold a self-critical cue: those that also speak
    in the first person ("I", "we", "our") first, then the others, each group in text order."""
    cued = [s for s in sentence_choices(text) if _CONFESSION.search(s)]
    return [s for s in cued if first_person(s)] + [s for s in cued if not first_person(s)]


# A frame that states an opinion ("in my opinion, the results of hedge funds were
# disappointing") puts the writer in the sentence without making him the one who erred, so its
# first-person words do not count; a first-person word elsewhere in the sentence still does.
_OPINION_FRAME = re.compile(
    r"(?<!\w)(?:in my (?:opinion|view|judgment)"
    r"|I (?:believe|think|suspect|guess)"
    r"|I(?:['\u2019]m| am) (?:certain|sure|confident))(?!\w)",
    re.IGNORECASE,
)
# How the letters' writer names himself or the company he runs besides the first person.
_SELF_REFERENCE = re.compile(
    r"(?<!\w)(?:your (?:chairman|management)|Berkshire)(?!\w)", re.IGNORECASE
)


def speaks_of_writer(sentence: str) -> bool:
    """Whether ``sentence`` is about the writer or Berkshire: a first-person word outside an
    opinion frame ("I sold", "our error"; not "in my opinion, their results…"), or one of the
    letters' names for the writer and his company ("your Chairman", "your management",
    "Berkshire")."""
    if _SELF_REFERENCE.search(sentence):
        return True
    return first_person(_OPINION_FRAME.sub(" ", sentence))


def confession_paragraphs(text: str) -> list[tuple[str, str]]:
    """``(paragraph, sentence)`` for each paragraph of ``text`` that holds a self-critical
    sentence (:func:`confession_sentences`) about the writer or Berkshire
    (:func:`speaks_of_writer`), in text order: the paragraph with its whitespace normalised,
    and its first such sentence (the quote a confession tag would take from it)."""
    cued = [s for s in confession_sentences(text) if speaks_of_writer(s)]
    found: list[tuple[str, str]] = []
    for para in re.split(r"\n\s*\n", text):
        flat = normalise_ws(para)
        mine = [s for s in cued if normalise_ws(s) in flat]
        if mine:
            first = min(mine, key=lambda s: flat.index(normalise_ws(s)))
            found.append((flat, first))
    return found


# Cues of a general statement (a rule, a belief, a norm): they order the principle evidence
# choices so that such sentences come first; the model still chooses, and enrich.judges asks
# whether each chosen sentence is a principle.
PRINCIPLE_CUES: tuple[str, ...] = (
    r"(?:we|I) (?:believe|think|feel)\b",
    r"should\b",
    r"must\b",
    r"never\b",
    r"always\b",
    r"rule\b",
    r"the (?:best|key|wisest|only)\b",
    r"it is (?:wise|foolish|important|essential|better)\b",
    r"(?:an |the )?investors?\b",
    r"managers?\b",
    r"over (?:time|the long)",
    r"in the long run",
    r"(?:a|any) (?:business|company|manager|investor)\b",
)
_PRINCIPLE = re.compile(r"(?<!\w)(?:" + "|".join(PRINCIPLE_CUES) + ")", re.IGNORECASE)


def principle_sentences(text: str) -> list[str]:
    """The chunk's :func:`sentence_choices` that hold a general-statement cue, in text order."""
    return [s for s in sentence_choices(text) if _PRINCIPLE.search(s)]
