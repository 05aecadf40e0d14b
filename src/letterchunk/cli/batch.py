"""`letterchunk batch submit|status|collect`: a run whose first answers come from the Batch API.

``submit`` sends each chunk's first question and its yes/no follow-ups (exactly the requests
``run`` would send) as one or more batches and records them in ``DIR/batch.json``; ``status``
shows them; ``collect`` stores their answers in the answer cache and then runs the letters as
``run`` does, so every first answer and question is a cache hit and re-asks (and requests the
batch did not answer) go live.  The library side is :mod:`letterchunk.runner.batch`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

from letterchunk.cli import COMMAND_HELP, EXIT_OK, HelpFormatter, _limits, add_common_options
from letterchunk.cli.run import add_llm_options, backend_from, execute, options_from
from letterchunk.errors import ConfigError
from letterchunk.layout import find_letters
from letterchunk.llm.batch import BatchAPI
from letterchunk.llm.client import LLMClient, LLMSettings
from letterchunk.llm.connect import backend_configured
from letterchunk.runner import batch
from letterchunk.runner.ledger import BatchSpend
from letterchunk.runner.pipeline import Hooks, LetterOutcome, RunOptions, run_paths
from letterchunk.runner.session import run_session

EXIT_PENDING = 75  # a batch is still running: collect again later (EX_TEMPFAIL)

EXAMPLES = """\
Examples:
  # send every chunk's first question and follow-ups as batches (hosted: half the price)
  OPENAI_API_KEY=sk-... letterchunk batch submit corpus/letters --out out/
  # how far the batches are
  letterchunk batch status out/
  letterchunk batch status out/ --json
  # store the answers and finish the run (re-asks go live); wait until the batches are done
  letterchunk batch collect out/ --wait 60
  # put requests the batch did not answer into one more batch instead of asking them live
  letterchunk batch collect out/ --resubmit
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "batch",
        help=COMMAND_HELP["batch"],
        description=(
            "Enrich letters through the OpenAI Batch API: half the token price and no rate "
            "limits, answers within 24 hours. `submit` sends every chunk's first question "
            "and its yes/no follow-ups (the requests `run` would send; those already answered "
            "in the cache are left out) "
            "and records the batches in DIR/batch.json; `status` shows them; `collect` stores "
            "their answers in the answer cache and writes the letters exactly as `run` would, "
            "asking re-asks and requests the batch did not answer live. Exit 75: a batch is "
            "still running, collect again later."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    steps = p.add_subparsers(dest="step", required=True, metavar="STEP")

    s = steps.add_parser("submit", help="send every chunk's first question and follow-ups")
    s.add_argument(
        "paths", nargs="+", metavar="PATH", help="letter file (YYYY.txt) or folder of them"
    )
    s.add_argument("--out", required=True, metavar="DIR", help="output folder")
    s.add_argument("--tier2", action="store_true", help="also emit Tier-2 paragraph chunks")
    add_llm_options(s)
    s.set_defaults(func=submit)

    t = steps.add_parser("status", help="the state of each batch")
    t.add_argument("dir", metavar="DIR", help="the --out folder of `batch submit`")
    t.add_argument("--json", action="store_true", help="print JSON on stdout")
    t.set_defaults(func=status)

    c = steps.add_parser("collect", help="store the answers and write the letters")
    c.add_argument("dir", metavar="DIR", help="the --out folder of `batch submit`")
    c.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="S",
        help="while a batch is running, look again every S seconds (default: exit 75 at once)",
    )
    c.add_argument(
        "--resubmit",
        action="store_true",
        help="put requests the batch did not answer into one more batch instead of asking "
        "them live",
    )
    add_llm_options(c)
    c.set_defaults(func=collect)
    for step in (s, t, c):
        step.formatter_class = HelpFormatter
        add_common_options(step)


def _say(args: argparse.Namespace, line: str) -> None:
    if not args.quiet:
        print(f"letterchunk: {line}", file=sys.stderr)


def _need_api() -> None:
    if not backend_configured():
        raise ConfigError(
            "the Batch API needs a hosted API: set OPENAI_API_KEY (hosted OpenAI) or "
            "OPENAI_BASE_URL of a server that serves /v1/batches; the embedded model has none, "
            "use `letterchunk run` with it"
        )


def submit(args: argparse.Namespace) -> int:
    _need_api()
    letters = find_letters(args.paths)  # a wrong path fails before anything is sent
    options = options_from(args)
    # the run session without a ledger: no letter is run, so no run.json yet
    with (
        run_session(
            args.out, backend=backend_from(args), limits=_limits.limits_from(args), ledger=False
        ) as session,
        BatchAPI(session.client.settings) as api,
    ):
        job = batch.submit(letters, args.out, session.client, api, session.options(options))
    _say(args, f"{sum(p.requests for p in job.parts)} request(s) in {len(job.parts)} batch(es):")
    for line in _table(job):
        _say(args, line)
    _say(args, f"next: `letterchunk batch collect {args.out} --wait 60`")
    return EXIT_OK


def _settings(job: batch.BatchJob) -> LLMSettings:
    _need_api()
    return LLMSettings.from_env(model=job.model, mode=job.mode)


def _table(job: batch.BatchJob) -> list[str]:
    head = ("part", "batch", "status", "requests", "done", "failed", "collected")
    rows = [
        (
            str(p.number),
            p.batch_id or "-",
            p.status or "not sent",
            str(p.requests),
            str(p.completed),
            str(p.failed_count),
            "yes" if p.collected else "no",
        )
        for p in job.parts
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [head, *rows]]
    lines += [f"part {p.number}: {e}" for p in job.parts for e in p.errors]
    return [line.rstrip() for line in lines]


def status(args: argparse.Namespace) -> int:
    with BatchAPI(_settings(batch.BatchJob.load(args.dir))) as api:
        job = batch.refresh(args.dir, api)
    if args.json:
        print(json.dumps([_part_dict(p) for p in job.parts], indent=2))
    else:
        for line in _table(job):
            print(line)
    return EXIT_OK


def _part_dict(part: batch.BatchPart) -> dict:
    return {
        "part": part.number,
        "batch_id": part.batch_id,
        "status": part.status,
        "requests": part.requests,
        "completed": part.completed,
        "failed": part.failed_count,
        "collected": part.collected,
        "errors": list(part.errors),
        "failed_requests": [f.__dict__ for f in part.failed],
    }


def _wait(args: argparse.Namespace, api: BatchAPI) -> batch.BatchJob:
    job = batch.refresh(args.dir, api)
    while args.wait is not None and any(p.status not in _DONE for p in job.parts):
        time.sleep(args.wait)
        job = batch.refresh(args.dir, api)
    return job


_DONE = ("completed", "failed", "expired", "cancelled")


def collect(args: argparse.Namespace) -> int:
    job = batch.BatchJob.load(args.dir)
    args.model = args.model or job.model  # the answers were asked of this model, in this mode
    args.mode = args.mode or job.mode
    with BatchAPI(_settings(job)) as api:
        job = _wait(args, api)
        running = [p for p in job.parts if p.status not in _DONE]
        if running:
            for line in _table(job):
                _say(args, line)
            _say(args, f"{len(running)} batch(es) still running; collect again later")
            return EXIT_PENDING
        if args.resubmit:
            return _resubmit(args, api)

        spent: list[BatchSpend] = []  # what the batches billed, for run.json

        def work(client: LLMClient, options: RunOptions, hooks: Hooks) -> list[LetterOutcome]:
            done = batch.collect(args.dir, client, api)
            ids = [p.batch_id for p in done.parts if p.batch_id]
            prompt, completion = done.usage()
            failed = [{"chunk_id": f.chunk_id, "error": f.error} for f in done.failed]
            spent.append(BatchSpend(ids, prompt, completion, done.answered_chunks(), failed))
            options = dataclasses.replace(options, tier2=done.tier2)
            return run_paths(done.letters, args.dir, client, options, hooks)

        return execute(args, work, batch=lambda: spent[-1] if spent else None)


def _resubmit(args: argparse.Namespace, api: BatchAPI) -> int:
    with run_session(
        args.dir,
        backend=backend_from(args),
        limits=_limits.limits_from(args),
        create=False,
        ledger=False,
    ) as session:
        job = batch.collect(args.dir, session.client, api)
        before = len(job.parts)
        job = batch.resubmit(args.dir, session.client, api)
    if len(job.parts) == before:
        _say(args, "every request has an answer; run `batch collect` without --resubmit")
        return EXIT_OK
    for line in _table(job):
        _say(args, line)
    _say(args, f"resubmitted {len(job.failed)} request(s); collect again later")
    return EXIT_PENDING
