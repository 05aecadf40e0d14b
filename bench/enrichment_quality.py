"""Is the enrichment *right*? Ours vs a keyword rule on the gold letters, replayed from cassettes.

    python bench/enrichment_quality.py              # every gold letter, table on stdout
    python bench/enrichment_quality.py --json       # one JSON object instead
    python bench/enrichment_quality.py --out DIR    # also write DIR/YYYY.jsonl (+ evidence, text)

For each gold letter (``bench/gold/YYYY.json``, hand-made, see ``bench/gold/README.md``) that has a
recording ``cassettes/YYYY.yaml``, the letter is segmented and enriched by replaying the model's
recorded answers (no model, no network; same replay rules as tests/test_cassettes.py). A gold
letter without a recording is reported "not recorded" and joins as soon as its cassette exists.
Every figure is given per letter and pooled (counts summed over letters), for OURS (the recorded
answers) beside the KEYWORD RULE applied to the *same* chunks:

* confessions (tier-1/2 chunks, exactly as ``score_enrichment.py`` of the graders): recall = gold
  confession quotes whose chunk (a tier-1/2 chunk whose whitespace-normalised content holds the
  quote) is tagged ``mistake_confession``; precision = tagged chunks holding a gold quote; F1 of
  the two, "n/a" where the scorer gives null (no tagged chunk, or no hit). Keyword rule: a chunk
  is a confession when it mentions mistake/error/wrong/blunder/dumb/misjudge.
* principles: coverage = gold principle quotes whose chunk has >= 1 extracted principle (as the
  scorer); grounded coverage = ... >= 1 principle whose evidence is a sentence of that chunk
  (:func:`is_sentence_of`: the quote starts at a sentence start and ends at a sentence end of
  the chunk, sentences split by :func:`sentences`, which does not split at "Mr.", "U.S.",
  "Inc." or initials); on gold = extracted principles whose evidence overlaps a gold principle
  quote of that chunk (one contains the other). Keyword rule: every sentence of a tier-1/2 chunk
  holding a general-statement cue (we believe / should / must / never / always / the best) is
  an extracted principle, with itself as evidence.
* entity typing precision: share of ``entities.people`` that are persons, and of
  ``entities.companies`` that are organisations. A name is judged first by its hand label in
  ``bench/gold/entities.json`` (every name candidate of the gold letters' chunks, labelled
  person / organisation / place / other by reading it in its letter, see ``bench/gold/README.md``;
  place and other are wrong in either list); a name without a label by the rule
  :func:`entity_type`; the number judged each way is printed beside. The rule, first match wins:
  a title (Mr./Mrs./Ms./Dr./Sir) in the name -> person; a corporate suffix or organisation word
  (Inc, Corp, Company, Bank, Insurance, Group, ... :data:`ORG_WORDS`) -> organisation; an all-caps
  acronym (GEICO, BNSF) -> organisation; a common given name (:data:`GIVEN_NAMES`, a general list,
  nothing from these letters) as first word of one to four capitalised words -> person; in the
  letter, the name written right after a title -> person, or right before a corporate word ->
  organisation; every word of the name also written in lower case in the letter ("Management",
  "Textile Operations") -> generic, i.e. not a name; otherwise unknown (place names such as "New
  Bedford" land here). Headline precision counts only judged entries (unknowns left out, their
  number printed beside); ``strict`` in --json counts unknowns as wrong (a lower bound).
* grounding (as the scorer, over all chunks): entity strings found case-insensitively in their
  chunk's content, comparison years found as text in it.
* concept agreement on ``bench/gold/concepts.json`` (chunks labelled by hand from their text;
  its "test" split, the gold letters' labels; labels of chunks whose text has changed are
  reported stale and left out): precision, recall,
  F1 over (chunk, concept) pairs. Keyword rule: the concepts whose cues in
  ``schemas/buffett_concepts.json`` (or own name) occur in the chunk, as the vocabulary defines.
* LLM calls per chunk: structured calls (re-asks included) and the one-token yes/no questions
  of ``enrich.judges`` apart, with the questions' prompt tokens and how many of them the server
  did not have in its prompt cache (``usage.prompt_tokens_details.cached_tokens``); prompt and
  completion tokens per chunk over all requests (the keyword rule makes none).

Exit status 1 when a replay leaves recorded answers unplayed or fails a chunk (the recording no
longer matches the requests: re-record, see tests/test_cassettes.py); otherwise 0.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from letterchunk.enrich.candidates import cued_concepts
from letterchunk.enrich.context import PromptContext
from letterchunk.llm.client import Usage
from letterchunk.llm.replay import replayed_client
from letterchunk.runner.pipeline import LetterOutcome, RunOptions, run_paths
from letterchunk.text.sentences import sentence_spans, sentences

ROOT = Path(__file__).resolve().parents[1]
GOLD = ROOT / "bench" / "gold"
CASSETTES = ROOT / "cassettes"
LETTERS = ROOT / "corpus" / "letters"
CONFESSION = "mistake_confession"

_WS = re.compile(r"\s+")
# the graders' keyword rule, verbatim (score_enrichment.py KEYWORDS)
KEYWORDS = re.compile(r"\b(mistakes?|errors?|wrong|blunders?|dumb|misjudg\w*)\b", re.I)
PRINCIPLE_CUES = re.compile(r"\b(we believe|should|must|never|always|the best)\b", re.I)


def norm(text: str) -> str:
    """Whitespace collapsed to single spaces, ends stripped (the scorer's ``norm``)."""
    return _WS.sub(" ", text).strip()


# -- sentences ----------------------------------------------------------------------------------

# sentences as the product splits them (letterchunk.text.sentences: no end at "Mr.", "U.S.",
# "Inc." or initials), so "evidence is a sentence" is judged on the same units evidence is
# chosen from
_TERMINAL = ".!?\"'\u201d\u2019)]:;"


def is_sentence_of(quote: str, content: str) -> bool:
    """True when ``quote`` is one or more whole consecutive sentences of ``content``.

    Whitespace is normalised on both sides; the quote may leave out the final punctuation.
    """
    q = norm(quote).strip("\"'\u201c\u201d\u2018\u2019 ")
    text = norm(content)
    if len(q) < 2:
        return False
    spans = sentence_spans(text)
    starts = {s for s, _ in spans}
    ends = {e for _, e in spans}
    ends |= {e - len(text[s:e]) + len(text[s:e].rstrip(_TERMINAL)) for s, e in spans}
    at = text.find(q)
    while at != -1:
        if at in starts and at + len(q) in ends:
            return True
        at = text.find(q, at + 1)
    return False


# -- entity typing ------------------------------------------------------------------------------

TITLES = frozenset("mr mrs ms miss dr sir dame lady lord prof professor".split())
ORG_WORDS = frozenset(
    """inc incorporated corp corporation co company companies cos ltd limited llc lp plc ag sa
    nv gmbh group holdings holding partners partnership associates bank banks bancorp banking
    trust fund funds insurance assurance casualty indemnity reinsurance re underwriters
    financial securities investments investors capital exchange association institute
    university college foundation council commission board agency bureau department ministry
    international industries manufacturing mills stores shops mart markets foods candies
    communications newspapers newspaper publishing broadcasting media airlines airways
    railroad railway energy electric utilities power pipeline motors systems technologies
    pharmaceuticals laboratories products enterprises services furnishings furniture""".split()
)
# common English given names (a general list; nothing taken from the letters being measured)
GIVEN_NAMES = frozenset(
    """aaron adam alan albert alex alexander alfred alice allan allen amanda amy andrew andy angela
    anita ann anna anne anthony arnold arthur barbara barry ben benjamin bernard bernice beth betty
    bill billy bob bobby brad bradley brenda brent brian bruce carl carla carlos carol caroline
    catherine cecil charles charlie charlotte chester chris christine christopher chuck claire
    clara clarence claude clifford craig curtis cynthia dale dan daniel danny darlene dave david
    dean debbie deborah dennis diana diane dolores don donald donna doris dorothy douglas earl ed
    edith edward edwin elaine eleanor elizabeth ellen elmer emil emily emma eric ernest ethel
    eugene eva evelyn felix floyd frances francis frank franklin fred frederick gail gary gene
    george gerald glen glenn gloria gordon grace greg gregory hal harold harriet harry harvey hazel
    helen henry herbert herman howard hugh ida irene isabel ivan jack jacqueline james jane janet
    jay jean jeff jeffrey jennifer jerome jerry jessica jill jim jimmy joan joe john johnny jon
    jonathan jose joseph joyce juan judith judy julia julie karen karl kate katherine kathleen
    kathy kay keith ken kenneth kevin kurt larry laura lawrence lee leo leon leonard leroy leslie
    lester lillian linda lisa lloyd lois lou louis louise lucy lynn marcia margaret marge maria
    marie marilyn marion marjorie mark martha martin marvin mary matthew max melissa melvin michael
    michelle mike mildred milt milton miriam nancy nathan neil nelson nicholas nora norman oscar
    otto pamela pat patricia patrick paul pauline peggy percy peter phil philip phillip ralph ray
    raymond rebecca richard rick rita robert roberta rodney roger roland ron ronald rose ross roy
    rudolph russell ruth ryan sally sam samuel sandra sarah scott sharon shirley sid sidney stanley
    stephen steve steven stuart sue susan ted terry theodore thomas tim timothy tom tony vera
    vernon victor vincent virginia wallace walter warren wayne wendy wesley wilbur william willie
    wilma
    """.split()
)
_NAME_WORD = re.compile(r"[A-Z][\w&'\u2019.-]*")
_ACRONYM = re.compile(r"[A-Z][A-Z&.\d-]{1,7}")


def _words(name: str) -> list[str]:
    out = []
    for raw in norm(name).split():
        word = re.sub(r"['\u2019]s$", "", raw.strip(',;:()"\u201c\u201d'))
        if word:
            out.append(word)
    return out


def entity_type(name: str, letter_text: str = "") -> str:
    """'person', 'organisation', 'generic' (not a name) or 'unknown'; rule in the module docstring.

    ``letter_text`` (the whole letter) lets the name's uses elsewhere decide: "Mr. Chace",
    "Blue Chip Stamps Inc.", or words the letter writes in lower case.
    """
    words = _words(name)
    if not words:
        return "generic"
    keys = [w.rstrip(".").lower() for w in words]
    if keys[0] in TITLES and len(words) > 1:
        return "person"
    if any(k in ORG_WORDS for k in keys) or "&" in name:
        return "organisation"
    if len(words) == 1 and _ACRONYM.fullmatch(words[0].rstrip(".")) and not words[0].istitle():
        return "organisation"
    capitalised = all(_NAME_WORD.fullmatch(w) for w in words)
    if capitalised and len(words) <= 4 and keys[0] in GIVEN_NAMES:
        return "person"
    text = norm(letter_text)
    if text:
        escaped = re.escape(norm(name))
        titles = "|".join(t.capitalize() for t in TITLES)
        if re.search(rf"\b(?:{titles})\.? (?:[A-Z][\w.'\u2019-]* )*{escaped}\b", text):
            return "person"
        if re.search(rf"{escaped},? ([A-Z][\w.&-]*)", text):
            for follow in re.findall(rf"{escaped},? ([A-Z][\w.&-]*)", text):
                if follow.rstrip(".,").lower() in ORG_WORDS:
                    return "organisation"
        if all(re.search(rf"\b{re.escape(k)}\b", text) for k in keys if k.isalpha()) and all(
            k.isalpha() for k in keys
        ):
            return "generic"
    return "unknown"


# -- records ------------------------------------------------------------------------------------


@dataclass
class Replay:
    """One gold letter enriched from its cassette."""

    year: int
    records: list[dict]  # canonical chunk records as written to YYYY.jsonl, in order
    evidence: dict[str, dict]  # chunk_id -> evidence record (YYYY.evidence.jsonl)
    calls: int
    questions: int  # one-token yes/no follow-ups (enrich.judges)
    question_tokens: int  # their prompt tokens
    question_new_tokens: int  # ... of them not served from the server's prompt cache
    prompt_tokens: int
    completion_tokens: int
    unplayed: int  # recorded interactions never requested (0 on a faithful replay)
    failed: int  # chunks the run could not enrich


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def replay(year: int, out: Path | None = None) -> Replay:
    """Segment and enrich ``year`` from ``cassettes/YYYY.yaml``; copy its files into ``out``."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with replayed_client(CASSETTES / f"{year}.yaml") as (client, cassette):
            [letter] = run_paths(
                [LETTERS / f"{year}.txt"],
                folder,
                client,
                RunOptions(on_failure="skip", report=False, source_label="cassette"),
            )
            unplayed = len(cassette) - cassette.play_count
        return replayed(year, letter, folder, client.usage, unplayed, out)


def replayed(
    year: int, letter: LetterOutcome, folder: Path, usage: Usage, unplayed: int, out: Path | None
) -> Replay:
    """The :class:`Replay` of a run of ``year`` that wrote ``folder`` (``letter``: its outcome;
    ``usage``: its client's tokens); copies the letter's files into ``out``."""
    records = read_jsonl(folder / f"{year}.jsonl")
    evidence_path = folder / f"{year}.evidence.jsonl"
    evidence = {r["chunk_id"]: r for r in read_jsonl(evidence_path)}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for name in (f"{year}.jsonl", f"{year}.evidence.jsonl", f"{year}_cleaned.txt"):
            if (folder / name).is_file():
                shutil.copyfile(folder / name, out / name)
    return Replay(
        year=year,
        records=records,
        evidence=evidence,
        calls=sum(o.calls for o in letter.outcomes),
        questions=sum(o.verdicts.calls for o in letter.outcomes),
        question_tokens=sum(o.verdicts.usage.prompt_tokens for o in letter.outcomes),
        question_new_tokens=sum(o.verdicts.new_prompt_tokens for o in letter.outcomes),
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        unplayed=unplayed,
        failed=len(letter.failed),
    )


def keyword_records(records: Sequence[dict]) -> tuple[list[dict], dict[str, dict]]:
    """The same chunks with the keyword rule's content type and principles (and their evidence)."""
    out: list[dict] = []
    evidence: dict[str, dict] = {}
    for record in records:
        copy = json.loads(json.dumps(record))
        md = copy["metadata"]
        if md["chunk_tier"] in (1, 2):
            md["content_type"] = CONFESSION if KEYWORDS.search(copy["content"]) else "narrative"
            cued = [s for s in sentences(copy["content"]) if PRINCIPLE_CUES.search(s)]
            md["principles"] = cued
            evidence[copy["chunk_id"]] = {"principle_evidence": cued}
        out.append(copy)
    return out, evidence


# -- scores -------------------------------------------------------------------------------------


def ratio(hit: int, total: int) -> float | None:
    return round(hit / total, 4) if total else None


def f1(recall: float | None, precision: float | None) -> float | None:
    """Harmonic mean; None (the scorer's null) unless both are defined and positive."""
    if not recall or not precision:
        return None
    return round(2 * recall * precision / (recall + precision), 4)


@dataclass
class Scores:
    """Counts for one letter (or pooled); every figure derives from these."""

    chunks: int = 0
    body: int = 0
    conf_hit: int = 0  # gold confession quotes whose chunk is tagged
    conf_total: int = 0  # gold confession quotes found in a tier-1/2 chunk
    tagged: int = 0  # tier-1/2 chunks tagged mistake_confession
    tagged_ok: int = 0  # ... of them holding a gold quote
    pr_hit: int = 0  # gold principle quotes whose chunk has a principle
    pr_grounded: int = 0  # ... a principle whose evidence is a sentence of the chunk
    pr_total: int = 0
    principles: int = 0  # principles extracted in tier-1/2 chunks
    principles_on_gold: int = 0  # ... whose evidence overlaps a gold principle quote
    people: list[int] = field(default_factory=lambda: [0, 0, 0])  # person, judged, all
    companies: list[int] = field(default_factory=lambda: [0, 0, 0])  # organisation, judged, all
    ent_ok: int = 0
    ent_total: int = 0
    ent_by_label: int = 0  # entities judged by their hand label
    ent_by_rule: int = 0  # ... by entity_type (a name without a label, typed other than unknown)
    yr_ok: int = 0
    yr_total: int = 0
    concept_tp: int = 0
    concept_predicted: int = 0
    concept_gold: int = 0
    concept_chunks: int = 0
    concept_stale: int = 0
    calls: int = 0
    questions: int = 0
    question_tokens: int = 0
    question_new_tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Scores) -> Scores:
        merged = Scores()
        for name in self.__dataclass_fields__:
            a, b = getattr(self, name), getattr(other, name)
            setattr(
                merged,
                name,
                [x + y for x, y in zip(a, b, strict=True)] if isinstance(a, list) else a + b,
            )
        return merged

    def figures(self) -> dict[str, Any]:
        recall = ratio(self.conf_hit, self.conf_total)
        precision = ratio(self.tagged_ok, self.tagged)
        c_prec = ratio(self.concept_tp, self.concept_predicted)
        c_rec = ratio(self.concept_tp, self.concept_gold)
        return {
            "chunks": self.chunks,
            "body_chunks": self.body,
            "confession_recall": recall,
            "confessions_found": f"{self.conf_hit}/{self.conf_total}",
            "confession_precision": precision,
            "tagged_confession_chunks": self.tagged,
            "confession_f1": f1(recall, precision),
            "principle_coverage": ratio(self.pr_hit, self.pr_total),
            "principle_coverage_grounded": ratio(self.pr_grounded, self.pr_total),
            "principles_extracted": self.principles,
            "principles_on_gold": ratio(self.principles_on_gold, self.principles),
            "people_precision": ratio(self.people[0], self.people[1]),
            "people_precision_strict": ratio(self.people[0], self.people[2]),
            "people": {"persons": self.people[0], "judged": self.people[1], "all": self.people[2]},
            "companies_precision": ratio(self.companies[0], self.companies[1]),
            "companies_precision_strict": ratio(self.companies[0], self.companies[2]),
            "companies": {
                "organisations": self.companies[0],
                "judged": self.companies[1],
                "all": self.companies[2],
            },
            "entities_judged": {
                "by label": self.ent_by_label,
                "by rule": self.ent_by_rule,
                "all": self.ent_total,
            },
            "entity_grounding": ratio(self.ent_ok, self.ent_total),
            "entities": self.ent_total,
            "comparison_year_grounding": ratio(self.yr_ok, self.yr_total),
            "concept_precision": c_prec,
            "concept_recall": c_rec,
            "concept_f1": f1(c_rec, c_prec),
            "concept_chunks": self.concept_chunks,
            "concept_labels_stale": self.concept_stale,
            "llm_calls_per_chunk": ratio(self.calls, self.chunks),
            "questions_per_chunk": ratio(self.questions, self.chunks),
            "requests_per_chunk": ratio(self.calls + self.questions, self.chunks),
            "prompt_tokens_per_question": ratio(self.question_tokens, self.questions),
            "new_prompt_tokens_per_question": ratio(self.question_new_tokens, self.questions),
            "prompt_tokens_per_chunk": ratio(self.prompt_tokens, self.chunks),
            "completion_tokens_per_chunk": ratio(self.completion_tokens, self.chunks),
        }


def load_gold(year: int) -> dict:
    return json.loads((GOLD / f"{year}.json").read_text(encoding="utf-8"))


def load_entity_labels(year: int) -> dict[str, str]:
    """name -> person / organisation / place / other for the gold letter ``year`` ({} if none)."""
    data = json.loads((GOLD / "entities.json").read_text(encoding="utf-8"))
    by_kind = data.get(str(year), {})
    return {name: kind for kind, names in by_kind.items() for name in names}


def load_concept_labels(split: str | None = None) -> dict[str, dict]:
    """chunk_id -> hand label; only the labels of ``split`` ("test": gold letters, "dev":
    development letters, see ``bench/gold/concepts.json``) unless ``split`` is None."""
    data = json.loads((GOLD / "concepts.json").read_text(encoding="utf-8"))
    return {
        label["chunk_id"]: label
        for label in data["labels"]
        if split is None or label["split"] == split
    }


def keyword_concepts(content: str, ctx: PromptContext | None = None) -> set[str]:
    """The keyword rule for concepts: every concept of the vocabulary whose name or cue occurs
    at a word start, case-insensitively (``enrich.candidates.cued_concepts``)."""
    return set(cued_concepts(content, ctx or PromptContext.for_letter(0, [])))


def _holders(quote: str, texts: Sequence[str]) -> list[int]:
    q = norm(quote)
    return [i for i, t in enumerate(texts) if q in t]


def _overlaps(a: str, b: str) -> bool:
    a, b = norm(a), norm(b)
    return bool(a and b) and (a in b or b in a)


def _score_confessions(s: Scores, gold: dict, body: Sequence[dict], texts: list[str]) -> None:
    gold_conf_chunks: set[int] = set()
    for m in gold.get("mistake_confessions", []):
        hs = _holders(m["quote"], texts)
        if not hs:
            continue
        s.conf_total += 1
        gold_conf_chunks.update(hs)
        s.conf_hit += any(body[i]["metadata"]["content_type"] == CONFESSION for i in hs)
    tagged = [i for i, r in enumerate(body) if r["metadata"]["content_type"] == CONFESSION]
    s.tagged = len(tagged)
    s.tagged_ok = sum(1 for i in tagged if i in gold_conf_chunks)


def _score_principles(
    s: Scores, gold: dict, body: Sequence[dict], texts: list[str], evidence: dict[str, dict]
) -> None:
    def quotes(i: int) -> list[str]:
        return evidence.get(body[i]["chunk_id"], {}).get("principle_evidence", [])

    gold_quotes_of: dict[int, list[str]] = {}
    for p in gold.get("principles", []):
        hs = _holders(p["quote"], texts)
        if not hs:
            continue
        s.pr_total += 1
        for i in hs:
            gold_quotes_of.setdefault(i, []).append(p["quote"])
        s.pr_hit += any(body[i]["metadata"]["principles"] for i in hs)
        s.pr_grounded += any(
            any(is_sentence_of(q, body[i]["content"]) for q in quotes(i)) for i in hs
        )
    for i, record in enumerate(body):
        s.principles += len(record["metadata"]["principles"])
        s.principles_on_gold += sum(
            any(_overlaps(q, g) for g in gold_quotes_of.get(i, [])) for q in quotes(i)
        )


def _score_entities(s: Scores, records: Sequence[dict], labels: dict[str, str]) -> None:
    letter_text = "\n\n".join(r["content"] for r in records if r["metadata"]["chunk_tier"] == 1)
    for record in records:
        md = record["metadata"]
        low = norm(record["content"]).lower()
        for kind, want, tally in (
            ("people", "person", s.people),
            ("companies", "organisation", s.companies),
        ):
            for name in md["entities"][kind]:
                if name in labels:
                    judged = labels[name]
                    s.ent_by_label += 1
                else:
                    judged = entity_type(name, letter_text)
                    s.ent_by_rule += judged != "unknown"
                tally[0] += judged == want
                tally[1] += judged != "unknown"
                tally[2] += 1
                s.ent_total += 1
                s.ent_ok += norm(name).lower() in low
        for year in md["temporal_references"]["comparison_years"]:
            s.yr_total += 1
            s.yr_ok += str(year) in record["content"]


def _score_concepts(
    s: Scores,
    records: Sequence[dict],
    labels: dict[str, dict],
    by_rule: bool,
) -> None:
    ctx = PromptContext.for_letter(0, []) if by_rule else None
    for record in records:
        label = labels.get(record["chunk_id"])
        if label is None:
            continue
        if not norm(record["content"]).startswith(norm(label["opening"])):
            s.concept_stale += 1
            continue
        want = set(label["concepts"])
        if ctx is not None:
            got = keyword_concepts(record["content"], ctx)
        else:
            got = set(record["metadata"]["buffett_concepts"])
        s.concept_chunks += 1
        s.concept_tp += len(want & got)
        s.concept_predicted += len(got)
        s.concept_gold += len(want)


def score_letter(
    gold: dict,
    records: Sequence[dict],
    evidence: dict[str, dict] | None = None,
    *,
    concept_labels: dict[str, dict] | None = None,
    concepts_by_rule: bool = False,
    entity_labels: dict[str, str] | None = None,
) -> Scores:
    """Score one letter's canonical ``records`` against its ``gold`` (see the module docstring).

    ``evidence`` maps chunk_id to its evidence record (``principle_evidence`` aligned with the
    chunk's principles); ``concepts_by_rule`` scores the vocabulary-cue rule instead of the
    chunks' own ``buffett_concepts``; ``entity_labels`` (name -> hand label) judge entity
    types before :func:`entity_type` does.
    """
    s = Scores(chunks=len(records))
    body = [r for r in records if r["metadata"]["chunk_tier"] in (1, 2)]
    texts = [norm(r["content"]) for r in body]
    s.body = len(body)
    _score_confessions(s, gold, body, texts)
    _score_principles(s, gold, body, texts, evidence or {})
    _score_entities(s, records, entity_labels or {})
    _score_concepts(s, records, concept_labels or {}, concepts_by_rule)
    return s


@dataclass
class LetterResult:
    year: int
    recorded: bool
    ours: Scores | None = None
    keyword: Scores | None = None
    unplayed: int = 0
    failed: int = 0


def gold_years() -> list[int]:
    return sorted(int(p.stem) for p in GOLD.glob("*.json") if p.stem.isdigit())


def measure(
    years: Iterable[int] | None = None,
    out: Path | None = None,
    replay: Callable[[int, Path | None], Replay] = replay,
) -> list[LetterResult]:
    """Replay (``replay(year, out)``) and score each gold letter in ``years`` (default: all);
    unrecorded ones say so."""
    labels = load_concept_labels("test")
    results = []
    for year in years or gold_years():
        if not (CASSETTES / f"{year}.yaml").is_file():
            results.append(LetterResult(year, recorded=False))
            continue
        run = replay(year, out)
        gold = load_gold(year)
        ours = score_letter(
            gold,
            run.records,
            run.evidence,
            concept_labels=labels,
            entity_labels=load_entity_labels(year),
        )
        ours.calls, ours.prompt_tokens = run.calls, run.prompt_tokens
        ours.questions = run.questions
        ours.question_tokens, ours.question_new_tokens = (
            run.question_tokens,
            run.question_new_tokens,
        )
        ours.completion_tokens = run.completion_tokens
        kw_records, kw_evidence = keyword_records(run.records)
        keyword = score_letter(
            gold,
            kw_records,
            kw_evidence,
            concept_labels=labels,
            concepts_by_rule=True,
        )
        results.append(LetterResult(year, True, ours, keyword, run.unplayed, run.failed))
    return results


def pooled(results: Sequence[LetterResult]) -> tuple[Scores, Scores]:
    ours, keyword = Scores(), Scores()
    for r in results:
        if r.ours is not None and r.keyword is not None:
            ours, keyword = ours + r.ours, keyword + r.keyword
    return ours, keyword


# -- output -------------------------------------------------------------------------------------

_ROWS: list[tuple[str, str, str | None]] = [
    # label, figure, count shown beside it (ours | keyword)
    ("confession recall", "confession_recall", "confessions_found"),
    ("confession precision", "confession_precision", "tagged_confession_chunks"),
    ("confession F1", "confession_f1", None),
    ("principle coverage", "principle_coverage", None),
    ("principle coverage, evidence a sentence", "principle_coverage_grounded", None),
    ("principles extracted (tier 1/2)", "principles_extracted", None),
    ("principles whose evidence is gold", "principles_on_gold", None),
    ("people typed person (judged)", "people_precision", "people"),
    ("companies typed organisation (judged)", "companies_precision", "companies"),
    ("entities judged by hand label / by rule", "entities_judged", None),
    ("entity grounding", "entity_grounding", "entities"),
    ("comparison-year grounding", "comparison_year_grounding", None),
    ("concept precision (hand-labelled)", "concept_precision", "concept_chunks"),
    ("concept recall (hand-labelled)", "concept_recall", None),
    ("concept F1 (hand-labelled)", "concept_f1", None),
    ("LLM calls per chunk (structured)", "llm_calls_per_chunk", None),
    ("yes/no questions per chunk (1 token each)", "questions_per_chunk", None),
    ("HTTP requests per chunk, all", "requests_per_chunk", None),
    ("prompt tokens per question", "prompt_tokens_per_question", None),
    ("... of them new (not in the server's cache)", "new_prompt_tokens_per_question", None),
    ("prompt tokens per chunk (all requests)", "prompt_tokens_per_chunk", None),
    ("completion tokens per chunk", "completion_tokens_per_chunk", None),
]
# figures of the chunks' own entities: the keyword rule makes none, so they are not its figures
_NO_KEYWORD = {
    "people_precision",
    "people_precision_strict",
    "people",
    "companies_precision",
    "companies_precision_strict",
    "companies",
    "entities_judged",
    "entity_grounding",
    "entities",
    "comparison_year_grounding",
}


def keyword_figures(scores: Scores) -> dict[str, Any]:
    return {k: (None if k in _NO_KEYWORD else v) for k, v in scores.figures().items()}


def _cell(figures: dict[str, Any], key: str, extra: str | None) -> str:
    value = figures[key]
    if isinstance(value, dict):  # entities_judged: by label / by rule of all
        label, rule, total = value.values()
        return f"{label} / {rule} of {total}"
    text = "n/a" if value is None else (f"{value:.2f}" if isinstance(value, float) else str(value))
    if extra is None:
        return text
    more = figures[extra]
    if isinstance(more, dict):
        kind, judged, total = more.values()
        more = f"{kind}/{judged} of {total}"
    return f"{text} ({more})"


def render(results: Sequence[LetterResult]) -> str:
    lines = []
    blocks: list[tuple[str, Scores, Scores]] = []
    for r in results:
        if r.ours is None or r.keyword is None:
            lines.append(f"{r.year}: not recorded (no cassettes/{r.year}.yaml)")
        else:
            blocks.append((str(r.year), r.ours, r.keyword))
            if r.unplayed or r.failed:
                lines.append(
                    f"{r.year}: replay is stale: {r.unplayed} recorded answer(s) unplayed, "
                    f"{r.failed} chunk(s) failed; re-record (see tests/test_cassettes.py)"
                )
    recorded = [r for r in results if r.ours is not None]
    if len(recorded) > 1:
        blocks.append(("pooled", *pooled(recorded)))
    for name, ours, keyword in blocks:
        o, k = ours.figures(), keyword.figures()
        lines.append("")
        lines.append(f"{name}: {o['chunks']} chunks ({o['body_chunks']} tier 1/2)")
        lines.append(f"  {'metric':42} {'ours':>22} {'keyword rule':>22}")
        for label, key, extra in _ROWS:
            kw = "-" if key in _NO_KEYWORD else _cell(k, key, extra)
            if key.endswith("_per_chunk"):
                kw = "0"
            lines.append(f"  {label:42} {_cell(o, key, extra):>22} {kw:>22}")
    return "\n".join(lines).lstrip("\n")


def as_json(results: Sequence[LetterResult]) -> dict[str, Any]:
    letters: dict[str, Any] = {}
    for r in results:
        if r.ours is None or r.keyword is None:
            letters[str(r.year)] = {"recorded": False}
        else:
            letters[str(r.year)] = {
                "recorded": True,
                "unplayed": r.unplayed,
                "failed": r.failed,
                "ours": r.ours.figures(),
                "keyword": keyword_figures(r.keyword),
            }
    ours, keyword = pooled(results)
    return {
        "letters": letters,
        "pooled": {"ours": ours.figures(), "keyword": keyword_figures(keyword)},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("years", nargs="*", type=int, help="gold letters (default: all)")
    parser.add_argument("--out", type=Path, help="write the enriched DIR/YYYY.jsonl here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.years) - set(gold_years()))
    if unknown:
        parser.error(f"no gold for {unknown}: bench/gold/ has {gold_years()}")
    results = measure(args.years or None, args.out)
    print(json.dumps(as_json(results)) if args.json else render(results))
    return 1 if any(r.unplayed or r.failed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
