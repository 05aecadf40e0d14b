"""What a run costs in requests and tokens, read from the recorded cassettes (no model, no network).

Each ``cassettes/YYYY.yaml`` holds every request one run of that letter sent, in order
(``workers=1``), with the embedded llama-server's answer and its usage.  For each request:

* kind: ``structured`` (the chunk's JSON answer), ``reask`` (a structured call that carries the
  repair loop's correction messages) or ``question`` (a one-token yes/no follow-up read from
  logprobs);
* prompt and completion tokens as the server counted them (Qwen's tokenizer), and the prompt
  tokens its cache reused (``prompt_tokens_details.cached_tokens``): the local figure;
* the same prompt as a hosted OpenAI model would see it, counted with o200k: the response schema
  (tools / response_format are rendered ahead of the messages) and then every message, role
  first.  A hosted prefix cache reuses the longest prefix this prompt shares with any earlier
  request of the run, if that prefix is at least 1,024 tokens, in steps of 128 tokens beyond
  1,024 (OpenAI's published rule); earlier letters of the run count, as they would within a
  corpus run.

Dollar figures for the whole corpus scale the recorded per-chunk means to every chunk of
``corpus/letters`` (segmented here).  Standard rate: uncached input, cached input and output at
the prices below (``letterchunk/data/prices.json`` plus the published cached-input rates); Batch:
the Batch API rate for what goes through a batch, with no cache discount.  "batch today" sends
only first structured calls through the Batch API (questions and re-asks run live, at the
standard rate with the cache); "batch all" is every request through it.

    python bench/llm_cost.py [YEAR ...]

The last lines print the per-chunk figures beside the targets: <=2.0 requests, <=3,000 prompt
tokens sent, hosted reuse >=60%.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from letterchunk.runner.ledger import load_prices
from letterchunk.text.clean import load_letter
from letterchunk.text.segment import segment_letter
from letterchunk.tokens import encoding

ROOT = Path(__file__).resolve().parents[1]
HOSTED_MIN, HOSTED_STEP = 1024, 128
# cached-input price per 1M tokens (OpenAI's pricing page, standard tier); Batch gets none here
CACHED_INPUT = {"gpt-4o-mini": 0.075, "gpt-4.1-mini": 0.10}
MODELS = list(CACHED_INPUT)
TARGET_REQUESTS, TARGET_TOKENS, TARGET_REUSE = 2.0, 3000, 0.60


@dataclass
class Tally:
    chunks: int = 0
    requests: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    prompt: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    completion: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    local_cached: int = 0
    hosted_prompt: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    hosted_reused: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))

    def add(self, other: Tally) -> None:
        self.chunks += other.chunks
        self.local_cached += other.local_cached
        for name in ("requests", "prompt", "completion", "hosted_prompt", "hosted_reused"):
            mine, theirs = getattr(self, name), getattr(other, name)
            for k in KINDS:
                mine[k] += theirs[k]


KINDS = ("structured", "reask", "question")


def kind_of(body: dict) -> str:
    if body.get("max_tokens") == 1 and body.get("logprobs"):
        return "question"
    roles = [m["role"] for m in body["messages"]]
    return "reask" if "assistant" in roles else "structured"


def hosted_tokens(body: dict) -> list[int]:
    """The prompt as a hosted model reads it: schema first, then each message."""
    enc = encoding()
    parts = []
    for key in ("tools", "response_format"):
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


def tally(year: int, earlier: list[list[int]]) -> Tally:
    t = Tally(chunks=len(segment_letter(load_letter(ROOT / "corpus" / "letters" / f"{year}.txt"))))
    data = yaml.safe_load((ROOT / "cassettes" / f"{year}.yaml").read_text(encoding="utf-8"))
    for it in data["interactions"]:
        body = json.loads(it["request"]["body"])
        usage = json.loads(it["response"]["body"]["string"])["usage"]
        k = kind_of(body)
        t.requests[k] += 1
        t.prompt[k] += usage["prompt_tokens"]
        t.completion[k] += usage["completion_tokens"]
        t.local_cached += (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        tokens = hosted_tokens(body)
        t.hosted_prompt[k] += len(tokens)
        t.hosted_reused[k] += hosted_reuse(tokens, earlier)
        earlier.append(tokens)
    return t


def corpus_chunks() -> int:
    return sum(
        len(segment_letter(load_letter(p)))
        for p in sorted((ROOT / "corpus" / "letters").glob("*.txt"))
    )


def dollars(t: Tally, model: str, scale: float) -> dict[str, float]:
    price = load_prices()[model]
    cached = CACHED_INPUT[model]

    def live(kinds: tuple[str, ...]) -> float:
        sent = sum(t.hosted_prompt[k] for k in kinds)
        reused = sum(t.hosted_reused[k] for k in kinds)
        out = sum(t.completion[k] for k in kinds)
        return ((sent - reused) * price.input_per_mtok + reused * cached) / 1e6 + (
            out * price.output_per_mtok / 1e6
        )

    def batched(kinds: tuple[str, ...]) -> float:
        sent = sum(t.hosted_prompt[k] for k in kinds)
        out = sum(t.completion[k] for k in kinds)
        assert price.batch_input_per_mtok is not None and price.batch_output_per_mtok is not None
        return (sent * price.batch_input_per_mtok + out * price.batch_output_per_mtok) / 1e6

    return {
        "run": live(KINDS) * scale,
        "batch today": (batched(("structured",)) + live(("reask", "question"))) * scale,
        "batch all": batched(KINDS) * scale,
    }


def main(argv: list[str]) -> int:
    years = [int(a) for a in argv] or sorted(
        int(p.stem) for p in (ROOT / "cassettes").glob("*.yaml")
    )
    total = Tally()
    earlier: list[list[int]] = []
    print(
        f"{'letter':>6} {'chunks':>6} {'req':>5} {'q':>4} {'reask':>5} {'prompt/chunk':>12} "
        f"{'local reuse':>11} {'hosted/chunk':>12} {'hosted reuse':>12}"
    )
    for year in years:
        t = tally(year, earlier)
        total.add(t)
        req, sent = sum(t.requests.values()), sum(t.prompt.values())
        hosted = sum(t.hosted_prompt.values())
        print(
            f"{year:>6} {t.chunks:>6} {req:>5} {t.requests['question']:>4} "
            f"{t.requests['reask']:>5} {sent / t.chunks:>12,.0f} {t.local_cached / sent:>11.1%} "
            f"{hosted / t.chunks:>12,.0f} {sum(t.hosted_reused.values()) / hosted:>12.1%}"
        )
    n = total.chunks
    print(f"\nper chunk over {len(years)} letter(s), {n} chunks:")
    print(
        f"{'kind':>10} {'requests':>9} {'prompt':>8} {'completion':>10} {'hosted':>8} "
        f"{'hosted reused':>13}"
    )
    for k in KINDS:
        print(
            f"{k:>10} {total.requests[k] / n:>9.2f} {total.prompt[k] / n:>8,.0f} "
            f"{total.completion[k] / n:>10,.0f} {total.hosted_prompt[k] / n:>8,.0f} "
            f"{total.hosted_reused[k] / max(total.hosted_prompt[k], 1):>13.1%}"
        )
    requests = sum(total.requests.values()) / n
    sent = sum(total.prompt.values()) / n
    hosted = sum(total.hosted_prompt.values())
    reuse = sum(total.hosted_reused.values()) / hosted
    local = total.local_cached / sum(total.prompt.values())

    corpus = corpus_chunks()
    print(f"\ncorpus: {corpus} chunks in corpus/letters; $ scaled from the per-chunk means")
    print(f"{'model':>14} {'run':>8} {'batch today':>12} {'batch all':>10}")
    for model in MODELS:
        d = dollars(total, model, corpus / n)
        print(f"{model:>14} {d['run']:>8.2f} {d['batch today']:>12.2f} {d['batch all']:>10.2f}")

    print(f"\nlocal (llama.cpp) cache reuse: {local:.1%}")
    print(f"requests per chunk: {requests:.2f} (target <= {TARGET_REQUESTS})")
    print(f"prompt tokens sent per chunk: {sent:,.0f} (target <= {TARGET_TOKENS:,})")
    print(f"hosted prefix-cache reuse: {reuse:.1%} (target >= {TARGET_REUSE:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
