"""`letterchunk budget`: the safe chunk size for a model's context window and rate limits."""

from __future__ import annotations

import argparse
import json

from letterchunk.cli import COMMAND_HELP, HelpFormatter
from letterchunk.llm.budget import ENV_VARS, compute_budget, settings_from_env

EXAMPLES = """\
Examples:
  # the defaults: a 128k-token model, 90,000 tokens and 10 requests a minute
  letterchunk budget
  # your own API tier
  letterchunk budget --tpm 30000 --requests-per-minute 20 --context-limit 16000
  OPENAI_TPM_LIMIT=200000 letterchunk budget --json
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "budget",
        help=COMMAND_HELP["budget"],
        description=(
            "Compute the safe chunk size for your context window and rate limits: "
            "T_req = TPM / req_per_min, "
            "T_chunk = min((C - Rp - Ra) / K, (T_req - Rp - Ra) / K) * B, words = T_chunk / 1.3. "
            "Each option falls back to its environment variable, then to the default shown."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )

    def opt(flag: str, field: str, kind: type, default: str, help_: str) -> None:
        p.add_argument(
            flag,
            dest=field,
            type=kind,
            default=None,
            metavar="N",
            help=f"{help_} (env {ENV_VARS[field]}; default {default})",
        )

    opt("--context-limit", "context_limit", int, "128000", "model context window C in tokens")
    opt("--tpm", "tpm", int, "90000", "tokens-per-minute limit")
    opt("--rpm", "rpm", int, "60", "requests-per-minute limit (informational)")
    opt("--requests-per-minute", "requests_per_minute", int, "10", "expected requests per minute")
    opt("--top-k", "top_k", int, "6", "chunks packed into one retrieval request K")
    opt("--safety-buffer", "safety_buffer", float, "0.8", "multiplier B, 0.8 = 20%% headroom")
    opt("--reserved-prompt", "reserved_prompt", int, "1200", "tokens reserved for prompt/system Rp")
    opt("--reserved-answer", "reserved_answer", int, "1500", "tokens reserved for the answer Ra")
    opt(
        "--max-tokens-hint",
        "max_tokens_hint",
        int,
        "none",
        "explicit per-chunk token size override",
    )
    opt("--max-words-hint", "max_words_hint", int, "none", "explicit per-chunk word size override")
    p.add_argument("--json", action="store_true", help="print the inputs and results as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    names = (
        "context_limit",
        "tpm",
        "rpm",
        "requests_per_minute",
        "top_k",
        "safety_buffer",
        "reserved_prompt",
        "reserved_answer",
        "max_tokens_hint",
        "max_words_hint",
    )
    settings = settings_from_env(**{n: getattr(args, n) for n in names})
    result = compute_budget(settings)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        return 0
    s = result.settings
    rows = [
        ("context limit C", f"{s.context_limit}"),
        ("TPM limit", f"{s.tpm}"),
        ("RPM limit (informational)", f"{s.rpm}"),
        ("expected requests/min", f"{s.requests_per_minute}"),
        ("top-k K", f"{s.top_k}"),
        ("safety buffer B", f"{s.safety_buffer:g}"),
        ("reserved prompt Rp", f"{s.reserved_prompt}"),
        ("reserved answer Ra", f"{s.reserved_answer}"),
        ("T_req = TPM / req_per_min", f"{result.t_req}"),
        ("T_chunk_ctx = (C - Rp - Ra) / K", f"{result.t_chunk_ctx}"),
        ("T_chunk_tpm = (T_req - Rp - Ra) / K", f"{result.t_chunk_tpm}"),
        (f"T_chunk_safe = B * min  [{result.binding} binds]", f"{result.t_chunk_safe} tokens"),
        ("W_chunk_safe = T_chunk_safe / 1.3", f"{result.w_chunk_safe} words"),
    ]
    if s.max_tokens_hint or s.max_words_hint:
        rows.append(("max tokens per chunk (hint)", f"{result.max_tokens_per_chunk}"))
        rows.append(("max words per chunk (hint)", f"{result.max_words_per_chunk}"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    for w in result.warnings:
        print(f"warning: {w}")
    return 0
