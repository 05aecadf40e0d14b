"""Yes/no judgements that correct the one structured answer where a small model is weakest.

A 1.5B model answering the whole enrichment schema almost never tags ``mistake_confession`` and
rarely extracts a principle, yet its *probability* of answering "yes" to one focused question
separates confessions from the rest well (``../shared/llm/README.md``).  So, once a chunk's
answer is valid, short follow-up questions are asked (:func:`letterchunk.llm.judge.ask_yes_no`).
Each is a **standalone prompt**: the same short system message for every question
(``prompts/judge_system.md``), then the quoted paragraph or sentence in a fence of its own and
the question.  A question costs about 150 prompt tokens and one generated token, and every
question of a run shares its system message.  Repeating the chunk's ~3,000-token enrichment
prompt before each question was measured on the same questions: it ranked them no better
(confession paragraphs of the dev letters AUC 0.75 against 0.73; rule sentences of 1982 and
1987 AUC 0.82/0.74 against 0.84/0.77) and sent twenty times the tokens.

* **candidates**: a confession is the writer's own, so only a chunk with a paragraph that holds
  a self-critical sentence about the writer or Berkshire (:func:`~letterchunk.enrich.candidates.
  confession_paragraphs`: the first person outside an opinion frame, or "your Chairman", "your
  management", "Berkshire") can be one.  A chunk whose self-critical words are all about others
  (managements' "adjusted earnings", the results of hedge funds) or that has none is never
  asked, and is not a confession.
* **confession paragraphs**: each of the candidate chunk's first
  :data:`MAX_PARAGRAPH_QUESTIONS` such paragraphs is quoted, then asked whether in it Buffett
  confesses that he or Berkshire made a mistake (``prompts/judge_confession_paragraph.md``).
  Of three wordings tried on the dev candidates, the question after the quote separated
  admissions best (AUC 0.76 against 0.66 and 0.68 with the question before it).  A long
  chunk dilutes one admission among pages of other matter; asked about its own paragraph the
  model rates it high.
* **the tag**: a candidate chunk is ``mistake_confession`` when its best paragraph reaches
  :data:`PARAGRAPH_THRESHOLD`, and quotes that paragraph's self-critical sentence.  Otherwise a
  ``mistake_confession`` answer becomes ``narrative``.
* **concepts** are not asked about: the structured answer chooses them among the candidates the
  code ranks (:func:`~letterchunk.enrich.answers.concept_choices`).  A yes/no question per
  candidate concept was measured on the dev labels (``bench/gold/concepts.json``) and gave the
  same F1 as the answer's own choice (0.47 against 0.46) at three more requests a chunk.
* **rules**: each candidate rule sentence (:func:`rule_questions`: the answer's evidence
  choices, :func:`~letterchunk.enrich.answers.rule_checks`, then the next-ranked candidates up
  to :data:`MAX_RULE_QUESTIONS` a chunk) is asked whether it states a general, reusable rule
  (``prompts/judge_principle.md``).  The answer's choices stay few, to keep its prompt short;
  the questions reach further, since the candidate ranking, not the judge, bounded how many
  gold principles could be found at all.  A
  principle the answer states stays when its evidence sentence reaches
  :data:`PRINCIPLE_THRESHOLD`; a candidate that reaches it without one becomes a principle
  whose statement is the sentence itself (category ``general``); the principles are ordered by
  that probability, which the evidence record keeps, so a letter's principles can be ranked.
  A chunk keeps its :data:`MAX_PRINCIPLES` most probable ones; the other candidates stay in the
  evidence record (``rule_p_yes``) for an analyst to review.

The built-in thresholds are chosen on the dev letters' hand labels (``bench/judge_quality.py``
sweeps them from the recorded probabilities; the three test letters of ``../shared/gold`` are
only reported); a run of another model uses the thresholds ``letterchunk calibrate`` chose from
the analysts' reviews of it (:func:`letterchunk.review.thresholds.thresholds_for`).  Decisions
are made by code after every answer has arrived, so the requests never depend on a threshold.
When the backend gives no probability (``p_yes`` None: no logprobs, or a client without
:meth:`~letterchunk.llm.client.LLMClient.send_plain`: nothing was asked), the model's own
answer stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

from letterchunk.contract.schema import Chunk, Principle
from letterchunk.contract.validate import normalise_ws
from letterchunk.contract.violations import EvidenceRecord, Judgements
from letterchunk.enrich.answers import rule_checks
from letterchunk.enrich.candidates import confession_paragraphs
from letterchunk.enrich.messages import neutralise_fences
from letterchunk.enrich.principle_candidates import principle_candidates
from letterchunk.llm import prompts
from letterchunk.llm.client import LLMClient, Usage
from letterchunk.llm.judge import YesNo, ask_yes_no
from letterchunk.review.thresholds import BUILT_IN, Thresholds

__all__ = [
    "MAX_PRINCIPLES",
    "PARAGRAPH_THRESHOLD",
    "PRINCIPLE_THRESHOLD",
    "Verdicts",
    "ask_judges",
    "apply_verdicts",
    "can_judge",
    "question",
    "questions",
    "rule_questions",
]

# the built-in thresholds, chosen for the embedded model on the dev letters (their reasons are
# beside review.thresholds.BUILT_IN); a run uses those in force for its model
# (review.thresholds.thresholds_for: calibrated from the analysts' reviews, else these)
PARAGRAPH_THRESHOLD = BUILT_IN.confession_paragraph
PRINCIPLE_THRESHOLD = BUILT_IN.rule_sentence
# principles a chunk keeps, its most probable ones: above the threshold the 1.5B model keeps
# 34-248 a letter, of which about a dozen are what a reader would pick; the others stay in the
# evidence record's rule_p_yes, as candidates for review
MAX_PRINCIPLES = 3
MAX_PARAGRAPH_QUESTIONS = 3
# candidate rule sentences asked about per chunk: more than the answer's evidence choices
# (answers.MAX_RULE_CHECKS), which stay few to keep the structured prompt short; a question
# costs ~160 prompt tokens.  On the dev principles the answer's choices reach 59 of 84 gold
# sentences, fifteen a chunk 73, twenty-five 78 (every sentence: 83, at four times the
# questions); 25 is the smallest count that reaches 0.9 of them.
MAX_RULE_QUESTIONS = 25


@dataclass(frozen=True)
class Verdicts:
    """The model's yes-probabilities for one chunk (None: no probability)."""

    asked: bool = False  # whether the questions were put (a judging client, not a table)
    # (sentence, p) for each paragraph asked about: its self-critical sentence about the writer
    # (the quote a tag takes from it) and the paragraph's yes-probability
    confession_paragraphs: tuple[tuple[str, float | None], ...] = ()
    # (candidate, p) of the judgements inside the structured answer
    rules: tuple[tuple[str, float | None], ...] = ()
    answers: tuple[YesNo, ...] = field(default=(), repr=False)

    def principles_p(self, quotes: Sequence[str]) -> list[float | None]:
        """The rule probability of each principle evidence quote (None: not judged)."""
        rated = dict(self.rules)
        return [rated.get(q) for q in quotes]

    def to_dict(self, principle_evidence: Sequence[str] = ()) -> Judgements:
        """The probabilities as the evidence sidecar records them (``judgements``);
        ``principle_p_yes`` holds the rule probability of each of ``principle_evidence``."""
        return {
            "confession_paragraphs": [
                {"sentence": s, "p_yes": _rounded(p)} for s, p in self.confession_paragraphs
            ],
            "principle_p_yes": [_rounded(p) for p in self.principles_p(principle_evidence)],
            "rule_p_yes": [{"sentence": s, "p_yes": _rounded(p)} for s, p in self.rules],
        }

    @property
    def usage(self) -> Usage:
        total = Usage()
        for answer in self.answers:
            total = total + answer.usage
        return total

    @property
    def new_prompt_tokens(self) -> int:
        """Prompt tokens of the questions that the server did not serve from its cache."""
        return sum(a.usage.prompt_tokens - a.cached_tokens for a in self.answers)

    @property
    def calls(self) -> int:
        return len(self.answers)

    @property
    def cache_hits(self) -> int:
        return sum(1 for a in self.answers if a.source == "cache")


def _rounded(p: float | None) -> float | None:
    return None if p is None else round(p, 4)


def can_judge(client: object) -> TypeGuard[LLMClient]:
    """Whether ``client`` can send a plain (logprobs) request: the real client can (and is then
    asked as one); test doubles that only answer structured calls cannot, and their answers
    stand as given."""
    return callable(getattr(client, "send_plain", None))


def question(text: str) -> list[dict]:
    """A standalone question: the judges' system message, then ``text`` (the fenced passage
    and the question) as the one user turn."""
    return [
        {"role": "system", "content": prompts.render("judge_system").strip()},
        {"role": "user", "content": text},
    ]


def rule_questions(chunk: Chunk) -> list[str]:
    """The candidate rule sentences a chunk's questions judge: the answer's evidence choices
    (:func:`~letterchunk.enrich.answers.rule_checks`) first, then the next-ranked candidates up
    to :data:`MAX_RULE_QUESTIONS` (the same ranking cut further, so the choices are its head)."""
    checks = rule_checks(chunk)  # none for a table chunk
    return (
        principle_candidates(chunk.content, max(MAX_RULE_QUESTIONS, len(checks))) if checks else []
    )


def _asked_about(chunk: Chunk) -> tuple[list[tuple[str, str]], list[str]]:
    """What a chunk is asked about: its (paragraph, self-critical sentence) pairs and its
    candidate rule sentences (a table chunk: none)."""
    if chunk.metadata.chunk_tier == 3:
        return [], []
    return confession_paragraphs(chunk.content)[:MAX_PARAGRAPH_QUESTIONS], rule_questions(chunk)


# letter text quoted in a question passes the same fence check as the chunk
def _paragraph_question(paragraph: str) -> list[dict]:
    return question(prompts.render("judge_confession_paragraph", paragraph=_quoted(paragraph)))


def _rule_question(sentence: str) -> list[dict]:
    return question(prompts.render("judge_principle", sentence=_quoted(sentence)))


def questions(chunk: Chunk) -> list[list[dict]]:
    """The messages of every question :func:`ask_judges` puts to ``chunk``, in its order.  They
    depend on the chunk's text alone, not on its answer, so a batch can hold them beside the
    chunk's structured request."""
    paragraphs, rules = _asked_about(chunk)
    return [_paragraph_question(p) for p, _ in paragraphs] + [_rule_question(s) for s in rules]


def ask_judges(chunk: Chunk, client: object) -> Verdicts:
    """Ask the follow-up questions for an enriched ``chunk``: the confession and rule questions
    of a narrative chunk (a table chunk is asked none)."""
    if not can_judge(client):
        return Verdicts()
    answers: list[YesNo] = []

    def ask(messages: list[dict]) -> float | None:
        answer = ask_yes_no(client, messages, chunk_id=chunk.chunk_id)
        answers.append(answer)
        return answer.p_yes

    paragraphs, rules = _asked_about(chunk)
    asked = tuple((sentence, ask(_paragraph_question(p))) for p, sentence in paragraphs)
    rated = tuple((s, ask(_rule_question(s))) for s in rules)
    return Verdicts(
        asked=chunk.metadata.chunk_tier != 3,
        confession_paragraphs=asked,
        rules=rated,
        answers=tuple(answers),
    )


def _quoted(text: str) -> str:
    return neutralise_fences(text)


def _confession_tag(verdicts: Verdicts, threshold: float) -> tuple[bool, str | None] | None:
    """``(tagged, quote)`` as the module docstring decides; None when nothing was asked or no
    probability was given (the structured answer stands)."""
    if not verdicts.asked:
        return None
    if not verdicts.confession_paragraphs:  # no self-critical paragraph about the writer
        return False, None
    rated = [(p, -i, s) for i, (s, p) in enumerate(verdicts.confession_paragraphs) if p is not None]
    if not rated:
        return None
    best, _, sentence = max(rated)  # the best paragraph is quoted
    return best >= threshold, sentence


def _ranked_principles(
    principles: Sequence[Principle],
    quotes: list[str],
    verdicts: Verdicts,
    threshold: float,
    cap: int | None,
) -> tuple[list[Principle], list[str]] | None:
    """The principles whose evidence sentence is judged a rule (p at or above ``threshold``,
    or not judged: those last), with the judged rules the answer left out, most probable
    first, the first ``cap`` of them (None: all); None when no rule was judged."""
    if not verdicts.rules or len(quotes) != len(principles):
        return None
    rated = dict(verdicts.rules)
    ranked: list[tuple[float, int, Principle, str]] = []
    for i, (principle, quote) in enumerate(zip(principles, quotes, strict=True)):
        p = rated.get(quote)
        if p is None or p >= threshold:
            # a principle whose evidence was not judged stays, after the judged ones
            ranked.append((-(0.0 if p is None else p), i, principle, quote))
    stated = set(quotes)
    for i, (sentence, p) in enumerate(verdicts.rules):
        if sentence not in stated and p is not None and p >= threshold:
            rule = Principle(statement=normalise_ws(sentence), category="general")
            ranked.append((-p, len(quotes) + i, rule, sentence))
    ranked.sort(key=lambda r: (r[0], r[1]))
    kept = ranked if cap is None else ranked[:cap]
    return [r[2] for r in kept], [r[3] for r in kept]


def apply_verdicts(
    chunk: Chunk,
    evidence: EvidenceRecord,
    verdicts: Verdicts,
    thresholds: Thresholds = BUILT_IN,
    max_principles: int | None = MAX_PRINCIPLES,
) -> tuple[Chunk, EvidenceRecord]:
    """``(chunk, evidence record)`` with the verdicts applied at ``thresholds`` (see module
    docstring), keeping at most ``max_principles`` principles (None: every one that passes)."""
    meta = chunk.metadata
    update: dict[str, object] = {}
    record = evidence.copy()
    decided = (
        None if meta.chunk_tier == 3 else _confession_tag(verdicts, thresholds.confession_paragraph)
    )
    if decided is not None:
        tagged, quote = decided
        if tagged and meta.content_type != "mistake_confession" and quote is not None:
            update["content_type"] = "mistake_confession"
            record["content_type_evidence"] = [quote]
        elif not tagged and meta.content_type == "mistake_confession":
            update["content_type"] = "narrative"
            record["content_type_evidence"] = []
    ranked = _ranked_principles(
        meta.principles,
        list(record.get("principle_evidence", [])),
        verdicts,
        thresholds.rule_sentence,
        max_principles,
    )
    if ranked is not None:
        update["principles"], record["principle_evidence"] = ranked
    if not update:
        return chunk, record
    new_meta = meta.model_copy(update=update)
    return (
        Chunk.model_validate(
            {
                "chunk_id": chunk.chunk_id,
                "content": chunk.content,
                "metadata": new_meta.model_dump(mode="python"),
            }
        ),
        record,
    )
