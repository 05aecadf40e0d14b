"""What a run costs in requests and tokens, read from the recorded cassettes (no model, no network).

Each ``cassettes/YYYY.yaml`` holds every request one run of that letter sent, in order
(``workers=1``), with the embedded llama-server's answer and its usage.  That run is the local
one: instructor JSON_SCHEMA mode, a ``response_format`` schema narrowed per chunk for the
grammar, ``PromptContext.grounded_choices=True``.  Each request is one of:

* ``structured`` (the chunk's JSON answer), ``reask`` (a structured call that carries the repair
  loop's correction messages) or ``question`` (a one-token yes/no follow-up read from logprobs).

Two sets of figures come from them.

**Recorded** (the local run as it was): prompt and completion tokens as the server counted them
(Qwen's tokenizer), the prompt tokens its cache reused (``prompt_tokens_details.cached_tokens``),
and the recorded bodies counted with o200k ("rec o200k") as if a hosted model saw them.

**Hosted** (what a hosted OpenAI run, only ``OPENAI_API_KEY`` set, would send): the settings
``LLMSettings.from_env`` gives then (mode TOOLS, gpt-4o-mini), the letter job the runner builds
for that client (``letter_job(..., grounded_choices=grammar_backed(client))``: False), so the
static response model (:func:`~letterchunk.enrich.answers.response_model_for`) and the
per-chunk choices written in the user message (:func:`~letterchunk.enrich.build_messages`).
The recorded requests are matched to the letter's chunks in order: each chunk's group starts at
its structured call and holds the re-asks and questions after it, and the first two messages
of its structured call and re-asks must equal the local prompt rebuilt for that chunk (else the
letter is left out, its cassette stale, and the bench says so).
Per chunk the hosted sequence is:

* exact: the structured call, the body instructor TOOLS mode builds
  (:func:`letterchunk.llm.batch.request_body`, captured from ``instructor.patch``:
  ``tools=[{type: function, function: {name, description, parameters}}]`` + ``tool_choice``);
* exact: one question per recorded question, its recorded messages (no tools): a question is
  a standalone prompt (``enrich.judges``: the judges' system message, one fenced passage and
  the question), the same whichever client asks it;
* approximated: one re-ask per recorded re-ask (a hosted model would fail other chunks, or none):
  the hosted prompt + the recorded correction turns (the local model's answer and the correction
  naming its faults), and the tools block of
  :func:`~letterchunk.repair.reask.partial_model` over the fields the recorded re-ask asked
  for, narrowed from the hosted model, without the rejected values a real re-ask would exclude;
* approximated: completion tokens are the recorded ones (Qwen's count of the local answers).

A prompt is counted with o200k as the schema JSON (``tools``, ``tool_choice`` or
``response_format``) ahead of the messages, each message role first; OpenAI renders tools in
its own format, so this is close, not exact.  A hosted prefix cache reuses the longest prefix
this prompt shares with any earlier request of the same run, if that prefix is at least 1,024
tokens, in steps of 128 tokens beyond 1,024 (OpenAI's published rule); earlier letters of the
run count, as they would within a corpus run.

Dollar figures for the whole corpus scale the per-chunk means to every chunk of
``corpus/letters`` (segmented here).  Standard rate: uncached input, cached input and output at
the prices below (``letterchunk/data/prices.json`` plus the published cached-input rates); Batch:
the Batch API rate for what goes through a batch, with no cache discount.  "batch today" sends
first structured calls and the yes/no questions through the Batch API (re-asks run live, at the
standard rate with the cache); "batch all" is every request through it.

    python bench/llm_cost.py [YEAR ...]

The last lines print the per-chunk figures, recorded and hosted, beside the targets: <=2.0
requests, <=3,000 prompt tokens sent, hosted reuse >=60%.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from letterchunk.contract.schema import Chunk
from letterchunk.enrich import build_messages, response_model_for
from letterchunk.llm.batch import request_body
from letterchunk.llm.client import grammar_backed
from letterchunk.llm.config import LLMSettings
from letterchunk.llm.judge import is_question
from letterchunk.repair.reask import partial_model
from letterchunk.runner.ledger import load_prices
from letterchunk.runner.prepare import LetterJob, letter_job
from letterchunk.text.clean import CleanedLetter, load_letter
from letterchunk.text.compilation import load_document, segment_letters
from letterchunk.text.segment import segment_letter
from letterchunk.tokens import encoding

ROOT = Path(__file__).resolve().parents[1]
HOSTED_MIN, HOSTED_STEP = 1024, 128
# cached-input price per 1M tokens (OpenAI's pricing page, standard tier); Batch gets none here
CACHED_INPUT = {"gpt-4o-mini": 0.075, "gpt-4.1-mini": 0.10, "gpt-4o": 1.25}
MODELS = list(CACHED_INPUT)
TARGET_REQUESTS, TARGET_TOKENS, TARGET_REUSE = 2.0, 3000, 0.60
# the settings of a hosted run: only OPENAI_API_KEY set (nothing is sent; the key is never used)
HOSTED = LLMSettings.from_env({"OPENAI_API_KEY": "sk-bench-sends-nothing"})
KINDS = ("structured", "reask", "question")
# figures per kind: recorded (server counts), recorded bodies in o200k, hosted rebuild in o200k
COUNTS = ("requests", "prompt", "completion", "rec_o200k", "rec_reused", "hosted", "hosted_reused")


def _per_kind() -> dict[str, int]:
    return dict.fromkeys(KINDS, 0)


@dataclass
class Tally:
    chunks: int = 0
    local_cached: int = 0
    requests: dict[str, int] = field(default_factory=_per_kind)
    prompt: dict[str, int] = field(default_factory=_per_kind)
    completion: dict[str, int] = field(default_factory=_per_kind)
    rec_o200k: dict[str, int] = field(default_factory=_per_kind)
    rec_reused: dict[str, int] = field(default_factory=_per_kind)
    hosted: dict[str, int] = field(default_factory=_per_kind)
    hosted_reused: dict[str, int] = field(default_factory=_per_kind)

    def add(self, other: Tally) -> None:
        self.chunks += other.chunks
        self.local_cached += other.local_cached
        for name in COUNTS:
            mine, theirs = getattr(self, name), getattr(other, name)
            for k in KINDS:
                mine[k] += theirs[k]

    def total(self, name: str) -> int:
        return sum(getattr(self, name).values())


@dataclass(frozen=True)
class Recorded:
    """One recorded request: its kind, body and the server's usage."""

    kind: str
    body: dict[str, Any]
    usage: dict[str, Any]


class Stale(Exception):
    """A cassette whose requests are not the ones the code builds now for its letter."""


@dataclass(frozen=True)
class _Client:
    """What the runner reads of a client to build a letter's job: its settings."""

    settings: LLMSettings


def kind_of(body: dict) -> str:
    if is_question(body):
        return "question"
    roles = [m["role"] for m in body["messages"]]
    return "reask" if "assistant" in roles else "structured"


def prompt_tokens(body: dict) -> list[int]:
    """The prompt as a hosted model reads it: schema first, then each message."""
    enc = encoding()
    parts = []
    for key in ("tools", "tool_choice", "response_format"):
        if key in body:
            parts.append(json.dumps(body[key], sort_keys=True, separators=(",", ":")))
    for m in body["messages"]:
        parts.append(f"<|{m['role']}|>{m['content'] if isinstance(m['content'], str) else ''}")
    return enc.encode("".join(parts), disallowed_special=())


def _common(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def hosted_reuse(tokens: list[int], earlier: list[list[int]]) -> int:
    best = max((_common(tokens, e) for e in earlier), default=0)
    if best < HOSTED_MIN:
        return 0
    return HOSTED_MIN + (best - HOSTED_MIN) // HOSTED_STEP * HOSTED_STEP


def recorded(year: int) -> list[Recorded]:
    data = yaml.safe_load((ROOT / "cassettes" / f"{year}.yaml").read_text(encoding="utf-8"))
    out = []
    for it in data["interactions"]:
        body = json.loads(it["request"]["body"])
        usage = json.loads(it["response"]["body"]["string"])["usage"]
        out.append(Recorded(kind_of(body), body, usage))
    return out


def by_chunk(requests: Sequence[Recorded]) -> list[list[Recorded]]:
    """The requests grouped per chunk (``workers=1``): a group starts at a structured call."""
    groups: list[list[Recorded]] = []
    for r in requests:
        if r.kind == "structured" or not groups:
            groups.append([])
        groups[-1].append(r)
    return groups


def letter_of(year: int) -> tuple[CleanedLetter, list[Chunk]]:
    """The letter and its chunks as ``run`` segments them (``runner.prepare``)."""
    (letter,) = load_document(ROOT / "corpus" / "letters" / f"{year}.txt", "auto")
    (chunks,) = segment_letters([letter])
    return letter, chunks


def jobs(letter: CleanedLetter, chunks: Sequence[Chunk]) -> tuple[LetterJob, LetterJob]:
    """(local job, hosted job): the job the runner builds for each client."""
    local = letter_job(letter.key, letter.text, chunks)
    hosted = letter_job(
        letter.key, letter.text, chunks, grounded_choices=grammar_backed(_Client(HOSTED))
    )
    return local, hosted


def hosted_requests(
    chunk: Chunk, local: LetterJob, hosted: LetterJob, group: Sequence[Recorded]
) -> list[tuple[str, dict[str, Any]]]:
    """The hosted run's requests for ``chunk``, one per recorded request of its ``group`` (see
    the module docstring for what is exact and what approximated)."""
    asked = build_messages(chunk, local.prompt)
    for r in group:
        if r.kind != "question" and r.body["messages"][:2] != asked:
            raise Stale(
                f"{chunk.chunk_id}: a recorded {r.kind} request does not start with the prompt "
                "the code builds now (record the cassette again)"
            )
    messages = build_messages(chunk, hosted.prompt)
    model = response_model_for(chunk, hosted.prompt)
    out: list[tuple[str, dict[str, Any]]] = []
    for r in group:
        turns = r.body["messages"][2:]
        if r.kind == "structured":
            out.append((r.kind, request_body(HOSTED, messages, model)))
        elif r.kind == "reask":
            schema = r.body["response_format"]["json_schema"]["schema"]
            fields = list(schema.get("required") or schema["properties"])
            fix = partial_model(fields, model)
            out.append((r.kind, request_body(HOSTED, messages + turns, fix)))
        else:
            out.append((r.kind, {"model": HOSTED.model, "messages": r.body["messages"]}))
    return out


def tally(year: int, earlier: list[list[int]], hosted_earlier: list[list[int]]) -> Tally:
    """One letter's figures; ``earlier`` / ``hosted_earlier``: the prompts sent before it in the
    run (recorded / hosted), extended here.  Raises :class:`Stale` before counting anything when
    the cassette does not match the letter."""
    letter, chunks = letter_of(year)
    groups = by_chunk(recorded(year))
    if len(groups) != len(chunks):
        raise Stale(f"{len(groups)} recorded chunk(s), {len(chunks)} segmented")
    local, hosted = jobs(letter, chunks)
    rebuilt = [hosted_requests(c, local, hosted, g) for c, g in zip(chunks, groups, strict=True)]
    t = Tally(chunks=len(chunks))
    for group, requests in zip(groups, rebuilt, strict=True):
        for r in group:
            t.requests[r.kind] += 1
            t.prompt[r.kind] += r.usage["prompt_tokens"]
            t.completion[r.kind] += r.usage["completion_tokens"]
            details = r.usage.get("prompt_tokens_details") or {}
            t.local_cached += details.get("cached_tokens", 0)
            tokens = prompt_tokens(r.body)
            t.rec_o200k[r.kind] += len(tokens)
            t.rec_reused[r.kind] += hosted_reuse(tokens, earlier)
            earlier.append(tokens)
        for kind, body in requests:
            tokens = prompt_tokens(body)
            t.hosted[kind] += len(tokens)
            t.hosted_reused[kind] += hosted_reuse(tokens, hosted_earlier)
            hosted_earlier.append(tokens)
    return t


def corpus_chunks() -> int:
    return sum(
        len(segment_letter(load_letter(p)))
        for p in sorted((ROOT / "corpus" / "letters").glob("*.txt"))
    )


def dollars(t: Tally, model: str, scale: float, *, hosted: bool) -> dict[str, float]:
    """Corpus dollars of the recorded bodies (``hosted`` False) or the hosted rebuild."""
    price = load_prices()[model]
    cached = CACHED_INPUT[model]
    sent_of, reused_of = (t.hosted, t.hosted_reused) if hosted else (t.rec_o200k, t.rec_reused)

    def live(kinds: tuple[str, ...]) -> float:
        sent = sum(sent_of[k] for k in kinds)
        reused = sum(reused_of[k] for k in kinds)
        out = sum(t.completion[k] for k in kinds)
        return ((sent - reused) * price.input_per_mtok + reused * cached) / 1e6 + (
            out * price.output_per_mtok / 1e6
        )

    def batched(kinds: tuple[str, ...]) -> float:
        sent = sum(sent_of[k] for k in kinds)
        out = sum(t.completion[k] for k in kinds)
        assert price.batch_input_per_mtok is not None and price.batch_output_per_mtok is not None
        return (sent * price.batch_input_per_mtok + out * price.batch_output_per_mtok) / 1e6

    return {
        "run": live(KINDS) * scale,
        "batch today": (batched(("structured", "question")) + live(("reask",))) * scale,
        "batch all": batched(KINDS) * scale,
    }


def _reuse(reused: int, sent: int) -> str:
    return f"{reused / max(sent, 1):.1%}"


def print_letters(years: Sequence[int]) -> tuple[Tally, list[int]]:
    """Each letter's row; the totals and the letters counted (a stale cassette is left out)."""
    total = Tally()
    counted: list[int] = []
    earlier: list[list[int]] = []
    hosted_earlier: list[list[int]] = []
    print(
        f"{'letter':>6} {'chunks':>6} {'req':>5} {'q':>4} {'reask':>5} {'prompt/chunk':>12} "
        f"{'local reuse':>11} {'rec o200k/ch':>12} {'rec reuse':>9} "
        f"{'hosted/chunk':>12} {'hosted reuse':>12}"
    )
    for year in years:
        try:
            t = tally(year, earlier, hosted_earlier)
        except Stale as exc:
            print(f"{year:>6} left out, stale cassette: {exc}")
            continue
        total.add(t)
        counted.append(year)
        sent = t.total("prompt")
        print(
            f"{year:>6} {t.chunks:>6} {t.total('requests'):>5} {t.requests['question']:>4} "
            f"{t.requests['reask']:>5} {sent / t.chunks:>12,.0f} "
            f"{_reuse(t.local_cached, sent):>11} {t.total('rec_o200k') / t.chunks:>12,.0f} "
            f"{_reuse(t.total('rec_reused'), t.total('rec_o200k')):>9} "
            f"{t.total('hosted') / t.chunks:>12,.0f} "
            f"{_reuse(t.total('hosted_reused'), t.total('hosted')):>12}"
        )
    return total, counted


def main(argv: list[str]) -> int:
    years = [int(a) for a in argv] or sorted(
        int(p.stem) for p in (ROOT / "cassettes").glob("*.yaml")
    )
    total, counted = print_letters(years)
    n = total.chunks
    if not n:
        print("no letter with a current cassette")
        return 1
    print(
        f"\nper chunk over {len(counted)} letter(s), {n} chunks (hosted: {HOSTED.model}, "
        f"mode {HOSTED.mode}):"
    )
    print(
        f"{'kind':>10} {'requests':>9} {'prompt':>8} {'completion':>10} {'rec o200k':>9} "
        f"{'rec reused':>10} {'hosted':>8} {'hosted reused':>13}"
    )
    for k in KINDS:
        print(
            f"{k:>10} {total.requests[k] / n:>9.2f} {total.prompt[k] / n:>8,.0f} "
            f"{total.completion[k] / n:>10,.0f} {total.rec_o200k[k] / n:>9,.0f} "
            f"{_reuse(total.rec_reused[k], total.rec_o200k[k]):>10} "
            f"{total.hosted[k] / n:>8,.0f} {_reuse(total.hosted_reused[k], total.hosted[k]):>13}"
        )

    corpus = corpus_chunks()
    print(f"\ncorpus: {corpus} chunks in corpus/letters; $ scaled from the per-chunk means")
    print(f"{'model':>14} {'bodies':>8} {'run':>8} {'batch today':>12} {'batch all':>10}")
    for model in MODELS:
        for label, hosted in (("recorded", False), ("hosted", True)):
            d = dollars(total, model, corpus / n, hosted=hosted)
            print(
                f"{model:>14} {label:>8} {d['run']:>8.2f} {d['batch today']:>12.2f} "
                f"{d['batch all']:>10.2f}"
            )

    requests = total.total("requests") / n  # the hosted rebuild asks as many
    print(f"\n{'per chunk':>28} {'recorded':>9} {'hosted':>9}  target")
    print(f"{'requests':>28} {requests:>9.2f} {requests:>9.2f}  <= {TARGET_REQUESTS}")
    print(
        f"{'prompt tokens sent':>28} {total.total('prompt') / n:>9,.0f} "
        f"{total.total('hosted') / n:>9,.0f}  <= {TARGET_TOKENS:,}"
    )
    print(
        f"{'prefix-cache reuse':>28} "
        f"{_reuse(total.local_cached, total.total('prompt')):>9} "
        f"{_reuse(total.total('hosted_reused'), total.total('hosted')):>9}  >= {TARGET_REUSE:.0%}"
    )
    print(
        "(recorded: the server's own token counts and llama.cpp's cache; "
        "hosted: o200k and OpenAI's 1,024-token prefix rule)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
