"""A run through the Batch API: submit the first question of every chunk, then collect.

::

    submit(paths, DIR, client, api)     segment, build each chunk's first request exactly as
                                        the live run would (same body, same cache key), skip
                                        chunks whose answer is cached, write DIR/batch/
                                        requests-NNN.jsonl, upload, create the batch(es)
    refresh(DIR, api)                   the state of every batch, recorded in DIR/batch.json
    collect(DIR, client, api)           download what finished batches answered and store each
                                        answer in the answer cache under its cache key; the
                                        caller then runs the letters as ``run`` does, every
                                        first answer a cache hit
    resubmit(DIR, client, api)          one more batch of the requests that failed or expired

``DIR/batch.json`` (:class:`BatchJob`) is rewritten after every step that costs or creates
something (an upload, a created batch, a collected batch), so a process stopped at any point
resumes where it was: an uploaded file is not uploaded again, a batch whose create answer was
lost is found by its input file id, a collected batch is not downloaded again, and an answer
already in the cache is never asked again.  Requests the batch did not answer (a failed or
expired batch, a request-level error) are listed in ``batch.json`` and in ``run.json``; they are
cache misses, so the run asks them live (or ``resubmit`` puts them in one more batch).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from letterchunk.enrich import build_messages, response_model_for
from letterchunk.enrich.judges import questions
from letterchunk.errors import CacheMiss, ConfigError, InputError
from letterchunk.io import atomic_write_lines, atomic_write_text
from letterchunk.layout import BATCH_FILE, batch_input, find_letters
from letterchunk.llm.batch import (
    MAX_FILE_BYTES,
    MAX_REQUESTS,
    BatchAPI,
    BatchRequest,
    BatchState,
    request_body,
    split_requests,
)
from letterchunk.llm.client import LLMClient, grammar_backed
from letterchunk.llm.judge import is_question, question_body, yes_no_key
from letterchunk.runner.pipeline import RunOptions
from letterchunk.runner.prepare import letter_job, prepare_letters

__all__ = [
    "BatchJob",
    "BatchPart",
    "FailedRequest",
    "collect",
    "plan_requests",
    "refresh",
    "resubmit",
    "submit",
]

log = logging.getLogger(__name__)

_FORMAT = 1


@dataclass
class FailedRequest:
    custom_id: str
    chunk_id: str
    error: str


@dataclass
class BatchPart:
    """One input file and the batch made of it."""

    number: int
    input_file: str  # relative to DIR (layout.batch_input)
    requests: int
    file_id: str | None = None
    batch_id: str | None = None
    status: str | None = None  # as the API last said
    completed: int = 0
    failed_count: int = 0
    collected: bool = False
    answers: int = 0  # answers stored in the cache
    answered: list[str] = field(default_factory=list)  # their custom ids
    prompt_tokens: int = 0  # tokens the batch billed (at the batch rate)
    completion_tokens: int = 0
    failed: list[FailedRequest] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # batch-level (a failed batch)


@dataclass
class BatchJob:
    """``DIR/batch.json``: what was submitted, and what became of it."""

    letters: list[str]
    tier2: bool
    model: str
    mode: str
    params: dict[str, Any]
    chunks: dict[str, str]  # custom_id (the answer's cache key) -> chunk id
    parts: list[BatchPart] = field(default_factory=list)

    @classmethod
    def path(cls, out_dir: str | Path) -> Path:
        return Path(out_dir) / BATCH_FILE

    @classmethod
    def load(cls, out_dir: str | Path) -> BatchJob:
        path = cls.path(out_dir)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.pop("format", None) != _FORMAT:
                raise ValueError("unknown format")
            parts = [
                BatchPart(**{**p, "failed": [FailedRequest(**f) for f in p.get("failed", [])]})
                for p in data.pop("parts")
            ]
            return cls(**data, parts=parts)
        except FileNotFoundError:
            raise InputError(
                path, "no batch was submitted here; run `letterchunk batch submit PATH --out DIR`"
            ) from None
        except (ValueError, TypeError, KeyError) as exc:
            raise InputError(
                path, f"not a letterchunk batch state ({exc}); submit the letters again"
            ) from exc

    def save(self, out_dir: str | Path) -> None:
        data = {"format": _FORMAT, **asdict(self)}
        atomic_write_text(self.path(out_dir), json.dumps(data, indent=2) + "\n")

    # -- views
    @property
    def failed(self) -> list[FailedRequest]:
        """Requests a batch did not answer and no later batch answered either."""
        answered = {c for p in self.parts for c in p.answered}
        return [f for p in self.parts for f in p.failed if f.custom_id not in answered]

    @property
    def finished(self) -> bool:
        return all(p.collected for p in self.parts)

    def usage(self) -> tuple[int, int]:
        """(prompt, completion) tokens billed by the collected batches."""
        return (
            sum(p.prompt_tokens for p in self.parts),
            sum(p.completion_tokens for p in self.parts),
        )

    def answered_chunks(self) -> list[str]:
        """Ids of the chunks whose first answer a batch gave."""
        return sorted({self.chunks.get(c, "?") for p in self.parts for c in p.answered})

    def check_settings(self, client: LLMClient) -> None:
        """A ConfigError when ``client`` would ask other questions than were submitted."""
        s = client.settings
        if (s.model, s.mode, s.generation_params) != (self.model, self.mode, self.params):
            raise ConfigError(
                f"the batch was submitted for model {self.model!r}, mode {self.mode}, "
                f"{self.params}; collect with the same settings (--model {self.model} "
                f"--mode {self.mode}, LETTERCHUNK_MAX_TOKENS / LETTERCHUNK_SEED) so its answers "
                "are the ones the run looks up"
            )


# ------------------------------------------------------------------------------ submit


def plan_requests(
    letters: Sequence[Path], client: LLMClient, options: RunOptions
) -> list[BatchRequest]:
    """Each chunk's first request, as :func:`~letterchunk.runner.pipeline.enrich_one` sends it,
    then its yes/no questions (``options.judges``: they depend on the chunk's text alone), in
    output order; requests whose answer is already cached, and repeats, are left out."""
    requests: list[BatchRequest] = []
    seen: set[str] = set()
    prepared = prepare_letters(
        letters,
        client,
        profile=options.profile,
        tier2=options.tier2,
        context_tokens=options.context_tokens,
    )

    def add(key: str, chunk_id: str, body: dict[str, Any]) -> None:
        if key not in seen and not _cached(client, key, chunk_id):
            seen.add(key)
            requests.append(BatchRequest(key, chunk_id, body))

    for _, letter, chunks in prepared:
        job = letter_job(letter.key, letter.text, chunks, grounded_choices=grammar_backed(client))
        for chunk in chunks:
            messages = build_messages(chunk, job.prompt)
            model = response_model_for(chunk, job.prompt)
            key = client.answer_key(messages, model)
            add(key, chunk.chunk_id, request_body(client.settings, messages, model))
            for asked in questions(chunk) if options.judges else ():
                add(yes_no_key(client, asked), chunk.chunk_id, question_body(client, asked))
    return requests


def _cached(client: LLMClient, key: str, chunk_id: str) -> bool:
    cache = client.cache
    if cache is None or cache.mode not in ("use", "offline"):
        return False
    try:
        return cache.lookup(key, chunk_id=chunk_id) is not None
    except CacheMiss:  # --cache offline: a miss is simply not cached here
        return False


def submit(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    client: LLMClient,
    api: BatchAPI,
    options: RunOptions | None = None,
    *,
    max_requests: int = MAX_REQUESTS,
    max_bytes: int = MAX_FILE_BYTES,
) -> BatchJob:
    """Build, write, upload and create the batches for ``paths``; resume an earlier submit of
    the same folder instead when ``DIR/batch.json`` exists."""
    out = Path(out_dir)
    options = options or RunOptions()
    if BatchJob.path(out).is_file():
        job = BatchJob.load(out)
        job.check_settings(client)
    else:
        letters = [str(p.resolve()) for p in find_letters(paths)]
        requests = plan_requests([Path(p) for p in letters], client, options)
        s = client.settings
        job = BatchJob(
            letters=letters,
            tier2=options.tier2,
            model=s.model,
            mode=s.mode,
            params=dict(s.generation_params),
            chunks={r.custom_id: r.chunk_id for r in requests},
        )
        _add_parts(job, out, requests, max_requests=max_requests, max_bytes=max_bytes)
    _send_parts(job, out, api)
    return job


def _add_parts(
    job: BatchJob,
    out: Path,
    requests: Sequence[BatchRequest],
    *,
    max_requests: int = MAX_REQUESTS,
    max_bytes: int = MAX_FILE_BYTES,
) -> None:
    """Write the input files of ``requests`` and record them (not yet sent) in batch.json."""
    for group in split_requests(requests, max_requests=max_requests, max_bytes=max_bytes):
        number = len(job.parts) + 1
        name = batch_input(number)
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_lines(out / name, [r.line() for r in group])
        job.parts.append(BatchPart(number=number, input_file=name, requests=len(group)))
    job.save(out)


def _send_parts(job: BatchJob, out: Path, api: BatchAPI) -> None:
    """Upload and create every part not yet created, saving after each step."""
    for part in job.parts:
        if part.batch_id is not None:
            continue
        if part.file_id is None:
            part.file_id = api.upload(out / part.input_file)
            job.save(out)
            state = None
        else:  # uploaded before a stop: the batch may exist already
            state = api.find(part.file_id)
        if state is None:
            state = api.create(part.file_id, {"letterchunk_part": str(part.number)})
        _note(part, state)
        job.save(out)


def _note(part: BatchPart, state: BatchState) -> None:
    part.batch_id, part.status = state.id, state.status
    part.completed, part.failed_count = state.completed, state.failed
    part.errors = list(state.errors)


# ------------------------------------------------------------------------------ status


def refresh(out_dir: str | Path, api: BatchAPI) -> BatchJob:
    """Ask the API for the state of every batch not yet collected; record it."""
    job = BatchJob.load(out_dir)
    for part in job.parts:
        if part.batch_id is not None and not part.collected:
            _note(part, api.retrieve(part.batch_id))
    job.save(out_dir)
    return job


# ------------------------------------------------------------------------------ collect


def collect(out_dir: str | Path, client: LLMClient, api: BatchAPI) -> BatchJob:
    """Store the answers of every finished, not yet collected batch in the client's cache.

    A request without an answer (request error, expired or failed batch) is recorded as
    failed; it stays a cache miss.  Batches still running are left for a later collect.
    """
    out = Path(out_dir)
    job = refresh(out, api)
    job.check_settings(client)
    cache = client.cache
    if cache is None or cache.mode not in ("use", "refresh"):
        raise ConfigError(
            "collecting a batch stores its answers in the answer cache; "
            "run `letterchunk batch collect` with --cache use (the default)"
        )
    for part in job.parts:
        if part.collected or part.batch_id is None:
            continue
        state = api.retrieve(part.batch_id)
        _note(part, state)
        if not state.finished:
            continue
        ids, asked = _ids_of(out / part.input_file)
        found = api.results(state, model=client.settings.model, questions=asked)
        results = {r.custom_id: r for r in found}
        part.answers = part.prompt_tokens = part.completion_tokens = 0
        part.failed, part.answered = [], []
        for custom_id in ids:
            result = results.get(custom_id)
            if result is not None and result.answer is not None:
                cache.store(custom_id, result.answer)
                part.answers += 1
                part.answered.append(custom_id)
                part.prompt_tokens += result.answer.prompt_tokens
                part.completion_tokens += result.answer.completion_tokens
                continue
            why = (result.error if result is not None else None) or _no_result(state)
            part.failed.append(FailedRequest(custom_id, job.chunks.get(custom_id, "?"), why))
        part.collected = True
        job.save(out)  # after the answers are in the cache: a stop before this redoes the part
    return job


def _no_result(state: BatchState) -> str:
    if state.errors:
        return f"batch {state.status}: {'; '.join(state.errors)}"
    return f"no result: the batch ended {state.status}"


def _ids_of(input_file: Path) -> tuple[list[str], set[str]]:
    """The custom ids of an input file's requests, and those of its yes/no questions."""
    text = input_file.read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    ids = [str(line["custom_id"]) for line in lines]
    return ids, {str(line["custom_id"]) for line in lines if is_question(line.get("body") or {})}


def resubmit(out_dir: str | Path, client: LLMClient, api: BatchAPI) -> BatchJob:
    """One more batch of the failed requests whose answer is still not cached."""
    out = Path(out_dir)
    job = BatchJob.load(out)
    job.check_settings(client)
    wanted = {f.custom_id for f in job.failed}
    pending = {c for p in job.parts if not p.collected for c in _ids_of(out / p.input_file)[0]}
    requests: dict[str, BatchRequest] = {}
    for part in job.parts:
        for line in (out / part.input_file).read_text(encoding="utf-8").splitlines():
            record = json.loads(line) if line.strip() else None
            if record is None or record["custom_id"] not in wanted - pending:
                continue
            cid = record["custom_id"]
            if not _cached(client, cid, job.chunks.get(cid, "?")):
                requests[cid] = BatchRequest(cid, job.chunks.get(cid, "?"), record["body"])
    if requests:
        _add_parts(job, out, list(requests.values()))
        _send_parts(job, out, api)
    return job
