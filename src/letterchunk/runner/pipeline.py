"""The main job: letters -> segmented, enriched, validated chunks on disk.

::

    run_paths(paths, out_dir, client)          letterchunk run PATH... --out DIR
      load_letter -> segment_letter              (all letters first: bad input fails before
                                                  any token is spent, and the total is known)
      enrich_letter(...)                         per letter, chunks through a bounded pool
        enrich_one(chunk, job)                   ONE LLM call -> apply -> validate (stage
                                                  "enriched") -> repair loop when invalid
        unify_titles(...)                        one LLM title per untitled section
        validate_letter(...)                     letter-level rules over the result
      write_letter(...)                          DIR/YYYY_cleaned.txt, DIR/YYYY.jsonl,
                                                  DIR/YYYY.evidence.jsonl (atomic writes)
      report.RepairReport                        DIR/YYYY.report.jsonl: one record per
                                                  attempt, appended as each chunk finishes
                                                  and tagged with the run's run_id; it says
                                                  where each answer came from, so a cached
                                                  rerun adds records, never replaces
    enrich_dir(dir, client)                    letterchunk enrich DIR (in place)

Invariants:

* Exactly one ``LLMClient.complete`` call per chunk when its first answer validates; the repair
  loop (:mod:`letterchunk.repair.reask`) adds re-asks only for invalid answers.
* An invalid enrichment is never written, and no chunk is ever dropped: a chunk that was not
  (validly) enriched — skipped, halted on, cancelled by a halt / budget stop / Ctrl-C, or not
  reached — stays in ``YYYY.jsonl`` exactly as segmented, so the file always validates at
  stage ``segmented``.  ``on_failure="halt"`` stops with
  :class:`~letterchunk.errors.RepairExhausted` after writing the letter that way; ``"skip"``
  goes on.  Such a letter is *incomplete* (``LetterOutcome.pending``): ``enrich DIR`` (or the
  same ``run``) asks only its chunks whose ``contextual_summary`` is still empty — every valid
  enriched chunk has one, the segmenter never writes one.
* Every model call is counted: each chunk runs against a per-chunk counting view of the
  client, and ``Hooks.chunk_done`` gets the chunk's calls and usage whether it succeeded,
  failed, or raised (halt, budget cap, backend error, Ctrl-C).
* Output order is the segmenter's order whatever order the pool finishes in, so output is
  byte-identical between a serial run, a parallel run and a rerun from the cache.

Rate limits and budget caps ride on the client (its limiter); the ledger and the progress bar
attach through :class:`Hooks`, called after every chunk and letter.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from letterchunk.contract.schema import UNTITLED, Chunk
from letterchunk.contract.validate import (
    LetterContext,
    validate_chunk,
    validate_letter,
)
from letterchunk.contract.violations import EvidenceRecord, Violation
from letterchunk.enrich import (
    Verdicts,
    apply_enrichment,
    apply_verdicts,
    ask_judges,
    build_messages,
    evidence_record,
    response_model_for,
)
from letterchunk.errors import RepairExhausted
from letterchunk.layout import LetterFiles, LetterKey
from letterchunk.llm.client import Completion, CompletionClient, LLMSettings, Usage, grammar_backed
from letterchunk.repair.reask import OnFailure, repair_enriched
from letterchunk.report.records import AttemptRecord, RepairReport, new_run_id
from letterchunk.review.apply import LetterReviews, apply_reviews
from letterchunk.review.records import ReviewRecord
from letterchunk.review.thresholds import BUILT_IN, Thresholds
from letterchunk.runner.outputs import check_replaceable, segmented_letters, write_letter_files
from letterchunk.runner.prepare import LetterJob, letter_job, prepare_letters
from letterchunk.runner.reviewed import letter_context, review_records, reviews_in_force
from letterchunk.text.compilation import Profile

__all__ = [
    "RunOptions",
    "ChunkOutcome",
    "LetterOutcome",
    "Hooks",
    "enrich_one",
    "enrich_letter",
    "enrich_letter_until_failure",
    "run_paths",
    "enrich_dir",
    "write_letter",
    "unify_titles",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOptions:
    tier2: bool = False
    workers: int = 1
    max_attempts: int = 2  # re-asks after the first answer (repair loop)
    on_failure: OnFailure = "halt"
    report: bool = True  # write DIR/YYYY.report.jsonl (the repair report)
    source_label: str | None = None  # e.g. "cassette": what served answers the client calls live
    run_id: str = field(default_factory=new_run_id)  # tags this run's report records
    context_tokens: int | None = None  # the model's context: bigger requests are refused unsent
    profile: Profile = "auto"  # what a letter file holds (text.compilation)
    judges: bool = True  # follow-up yes/no questions after each answer (enrich.judges)
    # the judges' thresholds in force (review.thresholds.thresholds_for: per model)
    thresholds: Thresholds = BUILT_IN

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.max_attempts < 0:
            raise ValueError("max_attempts must be >= 0")


@dataclass
class ChunkOutcome:
    """What became of one chunk.  ``chunk`` is None exactly when the chunk failed."""

    chunk_id: str
    chunk: Chunk | None
    evidence: EvidenceRecord | None
    usage: Usage  # summed over every call for this chunk
    calls: int  # LLMClient.complete calls (1 on a clean answer)
    cache_hits: int  # calls answered from the cache
    violations: list[Violation] = field(default_factory=list)  # error-level ones left when failed
    records: list[AttemptRecord] = field(default_factory=list)  # repair report, one per attempt
    latency_s: float | None = None  # seconds of the one call of a chunk valid on first answer
    verdicts: Verdicts = field(default_factory=Verdicts)  # the follow-up yes/no questions
    # questions sent for a chunk that raised before its verdicts were assembled
    questions_asked: int | None = None

    @property
    def ok(self) -> bool:
        return self.chunk is not None

    @property
    def questions(self) -> int:
        """The follow-up yes/no questions asked for this chunk."""
        return self.verdicts.calls if self.questions_asked is None else self.questions_asked


@dataclass
class LetterOutcome:
    year: LetterKey  # the letter's year, or its compilation stem YYYY-Lk (layout)
    chunks: list[Chunk]  # valid enriched chunks (this run's and kept ones), in output order
    outcomes: list[ChunkOutcome]  # one per chunk enriched in this run, in output order
    violations: list[Violation]  # letter-level (validate_letter) violations of the written chunks
    paths: list[Path] = field(default_factory=list)
    # every chunk of the letter as it is written: enriched where it is, else as segmented
    written: list[Chunk] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)  # ids written as segmented (not enriched)
    kept_evidence: dict[str, EvidenceRecord] = field(default_factory=dict)  # enriched earlier
    files_written: bool = False  # this run wrote the letter's files (else they are as they were)
    # the analysts' decisions applied when the files were written (None: no reviews.jsonl)
    reviews: LetterReviews | None = None

    @property
    def complete(self) -> bool:
        return not self.pending

    @property
    def failed(self) -> list[ChunkOutcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def errors(self) -> list[Violation]:
        return [v for v in self.violations if v.severity == "error"]


@dataclass
class Hooks:
    """Callbacks the CLI (progress bar, ledger, budget checks) attaches to a run.

    ``chunk_done`` is called from the thread that finished the chunk, in completion order;
    ``letter_done`` once per letter after its files are written.
    """

    chunk_done: Callable[[ChunkOutcome], None] | None = None
    # after the letter's files are written, complete or not (a halted letter included)
    letter_done: Callable[[LetterOutcome], None] | None = None
    letters_segmented: Callable[[int, int], None] | None = None  # (letters, chunks) of the run
    # every letter the run will ask about, (key, chunks to ask), before the first request: the
    # ledger lists a letter a halt or a cap stopped the run before
    letters_listed: Callable[[list[tuple[LetterKey, int]]], None] | None = None


# ------------------------------------------------------------------------------ per chunk


def _source_of(completion: object) -> str:
    return getattr(completion, "source", "live") or "live"


class _CountingClient:
    """The run's client seen by one chunk: counts every answer it receives for the chunk.

    The counts survive whatever ends the chunk (a halt, a budget stop in a re-ask, Ctrl-C), so
    the ledger can count a chunk that never returned an outcome.
    """

    def __init__(self, client: CompletionClient) -> None:
        self._client = client
        self.calls = 0
        self.hits = 0
        self.usage = Usage()
        self.keys: list[str] = []  # cache keys of the structured answers
        self.questions = 0  # live yes/no questions (their tokens in question_usage)
        self.question_usage = Usage()

    @property
    def settings(self) -> LLMSettings:
        return self._client.settings

    def complete(
        self,
        messages: list[dict],
        response_model: type[BaseModel],
        *,
        chunk_id: str,
        prompt_hash: str | None = None,
    ) -> Completion:
        # forwarded as given: a client double need not take prompt_hash when none is passed
        completion = (
            self._client.complete(messages, response_model, chunk_id=chunk_id)
            if prompt_hash is None
            else self._client.complete(
                messages, response_model, chunk_id=chunk_id, prompt_hash=prompt_hash
            )
        )
        self.calls += 1
        self.hits += int(_source_of(completion) == "cache")
        self.usage = self.usage + completion.usage
        if completion.cache_key:
            self.keys.append(completion.cache_key)
        return completion

    def count_usage(self, usage: Usage) -> None:
        """A live yes/no question's cost (``llm.judge``): counted here as well, so a chunk that
        raises after its questions still reports them."""
        self.questions += 1
        self.question_usage = self.question_usage + usage
        self._client.count_usage(usage)  # type: ignore[attr-defined]

    def reject_answers(self) -> None:
        """The chunk stayed invalid: its cached answers must not answer a rerun."""
        cache = getattr(self._client, "cache", None)
        if cache is not None and self.keys:
            cache.reject(self.keys)

    def __getattr__(self, name: str) -> object:  # cache, send_plain, ... of the real client
        return getattr(self._client, name)


def enrich_one(
    chunk: Chunk, job: LetterJob, client: CompletionClient, options: RunOptions
) -> ChunkOutcome:
    """One chunk: one structured LLM call, apply, validate; the repair loop when the answer is
    not valid; then the follow-up yes/no questions (``options.judges``, :mod:`~letterchunk.enrich.
    judges`), each a short standalone one-token request.

    Pure with respect to shared state (safe to run in a pool): reads ``job``, returns a result.
    """
    messages = build_messages(chunk, job.prompt)
    model = response_model_for(chunk, job.prompt)
    first = client.complete(messages, model, chunk_id=chunk.chunk_id)  # the structured call
    outcome = _answer(chunk, job, client, options, messages=messages, model=model, first=first)
    return _judged(outcome, job, client, options.thresholds) if options.judges else outcome


def _answer(
    chunk: Chunk,
    job: LetterJob,
    client: CompletionClient,
    options: RunOptions,
    *,
    messages: list[dict],
    model: type,
    first: Completion,
) -> ChunkOutcome:
    """The chunk as the structured answer (repaired when it is not valid) makes it."""
    hits = int(_source_of(first) == "cache")

    if first.value is not None:
        candidate = apply_enrichment(chunk, first.value)
        evidence = evidence_record(chunk.chunk_id, first.value)
        ctx = dataclasses.replace(job.context, evidence={chunk.chunk_id: evidence})
        errors = [
            v
            for v in validate_chunk(candidate, stage="enriched", context=ctx)
            if v.severity == "error"
        ]
        if not errors:
            return ChunkOutcome(
                chunk.chunk_id,
                candidate,
                evidence,
                first.usage,
                1,
                hits,
                latency_s=getattr(first, "latency_s", None),
            )

    return _repair(
        chunk, job, client, options, messages=messages, model=model, first=first, hits=hits
    )


def _judged(
    outcome: ChunkOutcome,
    job: LetterJob,
    client: CompletionClient,
    thresholds: Thresholds = BUILT_IN,
) -> ChunkOutcome:
    """``outcome`` corrected by the follow-up yes/no questions (:mod:`letterchunk.enrich.judges`);
    a correction the validator would reject is not applied (the answer stands)."""
    if outcome.chunk is None or outcome.evidence is None:
        return outcome
    verdicts = ask_judges(outcome.chunk, client)
    if not verdicts.calls:
        return outcome
    chunk, evidence = apply_verdicts(outcome.chunk, outcome.evidence, verdicts, thresholds)
    evidence["judgements"] = verdicts.to_dict(evidence.get("principle_evidence", []))
    ctx = dataclasses.replace(job.context, evidence={chunk.chunk_id: evidence})
    errors = [
        v for v in validate_chunk(chunk, stage="enriched", context=ctx) if v.severity == "error"
    ]
    if errors:
        log.warning(
            "%s: the follow-up judgements would make the chunk invalid (%s); kept the answer",
            chunk.chunk_id,
            errors[0].code,
        )
        judged = verdicts.to_dict(outcome.evidence.get("principle_evidence", []))
        chunk, evidence = outcome.chunk, {**outcome.evidence, "judgements": judged}
    return dataclasses.replace(outcome, chunk=chunk, evidence=evidence, verdicts=verdicts)


def _repair(
    chunk: Chunk,
    job: LetterJob,
    client: CompletionClient,
    options: RunOptions,
    *,
    messages: list[dict],
    model: type,
    first: Completion,
    hits: int,
) -> ChunkOutcome:
    """Hand an invalid first answer to the repair loop (``repair.repair_enriched``).

    It validates again (mechanical fixes by code, then bounded re-asks of only the failing
    fields) and either returns a valid chunk or, with ``on_failure="halt"``, raises
    RepairExhausted.
    """
    result = repair_enriched(
        chunk,
        messages=messages,
        first=first,
        context=job.context,
        client=client,
        model=model,  # the narrowed per-chunk response model
        max_attempts=options.max_attempts,
        on_failure=options.on_failure,
        source=options.source_label,
    )
    return ChunkOutcome(
        chunk_id=chunk.chunk_id,
        chunk=result.chunk,
        evidence=result.evidence if result.chunk is not None else None,
        usage=result.usage,
        calls=result.attempts,
        cache_hits=hits,  # re-asks report their own source in the records
        violations=list(result.violations),
        records=list(result.records),
    )


# ------------------------------------------------------------------------------ per letter


def _section_key(chunk_id: str) -> str:
    return chunk_id.split("-")[1]  # "S3" of "2016-S3-T1-002"


def _title_case(theme: str) -> str:
    """A lower-case theme as a title: each word capitalised, words already capitalised kept."""
    return " ".join(w[:1].upper() + w[1:] for w in theme.split())


def unify_titles(original: Sequence[Chunk], enriched: Sequence[Chunk | None]) -> list[Chunk | None]:
    """One title per untitled section: the first enriched chunk's (output order) wins.

    Every chunk of a section the segmenter left as :data:`UNTITLED` answered its own title;
    the section title must be stable across the section's chunks (spec §0.3), so all of them get
    the title of the section's first chunk.  Deterministic whatever order the pool finished in.
    """
    chosen: dict[str, str] = {}
    themes: dict[str, list[str]] = {}
    for before, after in zip(original, enriched, strict=True):
        if after is not None and before.metadata.section_title == UNTITLED:
            key = _section_key(before.chunk_id)
            chosen.setdefault(key, after.metadata.section_title)
            themes.setdefault(key, list(after.metadata.themes))
    # A model title may repeat another section's title (a small model names the opening after
    # the next header): section titles stay unique within a letter, so the copy is replaced by
    # the section's first theme that is no title yet ("annual results" -> "Annual Results"),
    # else numbered.  Segmenter titles are never changed.
    taken = {
        c.metadata.section_title.casefold()
        for c in original
        if c.metadata.section_title != UNTITLED
    }
    for key in sorted(chosen, key=lambda k: int(k[1:])):
        if chosen[key].casefold() in taken:
            free = [t for t in (_title_case(x) for x in themes[key]) if t.casefold() not in taken]
            chosen[key] = free[0] if free else f"{chosen[key]} (section {key[1:]})"
        taken.add(chosen[key].casefold())
    out: list[Chunk | None] = []
    for before, after in zip(original, enriched, strict=True):
        title = chosen.get(_section_key(before.chunk_id))
        if after is None or title is None or before.metadata.section_title != UNTITLED:
            out.append(after)
            continue
        xref = after.metadata.cross_references
        meta = after.metadata.model_copy(
            update={
                "section_title": title,
                "section_hierarchy": [
                    title if h in (UNTITLED, after.metadata.section_title) else h
                    for h in before.metadata.section_hierarchy
                ],
                # a section never refers to itself (the chunk chose from the other titles before
                # its section had one, and the model may name the section like another one)
                "cross_references": xref.model_copy(
                    update={
                        "related_sections_same_letter": list(
                            dict.fromkeys(
                                t for t in xref.related_sections_same_letter if t != title
                            )
                        ),
                    }
                ),
            }
        )
        out.append(after.model_copy(update={"metadata": meta}))
    return out


def enrich_letter(
    year: LetterKey,
    cleaned_text: str,
    chunks: Sequence[Chunk],
    client: CompletionClient,
    options: RunOptions = RunOptions(),
    hooks: Hooks | None = None,
    *,
    kept: dict[str, EvidenceRecord | None] | None = None,
) -> LetterOutcome:
    """Enrich every chunk of one letter through a pool of ``options.workers`` threads.

    ``kept``: ids of chunks already enriched by an earlier run (``enrich DIR`` resuming), with
    their evidence records; those chunks are taken as they are and not asked again.
    Results are placed by index, so the output order never depends on completion order.
    On RepairExhausted (halt) or any other error (Ctrl-C included), pending chunks are
    cancelled and the error propagates; :func:`enrich_letter_until_failure` also returns the
    letter as far as it got.
    """
    outcome, failure = enrich_letter_until_failure(
        year, cleaned_text, chunks, client, options, hooks, kept=kept
    )
    if failure is not None:
        raise failure
    return outcome


def enrich_letter_until_failure(
    year: LetterKey,
    cleaned_text: str,
    chunks: Sequence[Chunk],
    client: CompletionClient,
    options: RunOptions = RunOptions(),
    hooks: Hooks | None = None,
    *,
    kept: dict[str, EvidenceRecord | None] | None = None,
) -> tuple[LetterOutcome, BaseException | None]:
    """:func:`enrich_letter`, returning the error that stopped the letter (or None) beside the
    letter as far as it got: finished chunks enriched, the others as segmented.
    """
    hooks = hooks or Hooks()
    kept = kept or {}
    job = letter_job(year, cleaned_text, chunks, grounded_choices=grammar_backed(client))
    results: list[ChunkOutcome | None] = [None] * len(chunks)
    todo = [i for i, c in enumerate(chunks) if c.chunk_id not in kept]

    def work(i: int) -> None:
        outcome = _enrich_counted(chunks[i], job, client, options, hooks)
        results[i] = outcome
        if hooks.chunk_done:  # progress bar, ledger, budget check
            hooks.chunk_done(outcome)

    failure = _run_pool(work, todo, options.workers, name=f"enrich-{year}")
    result = _letter_outcome(job, chunks, results, kept)
    return result, failure


def _enrich_counted(
    chunk: Chunk, job: LetterJob, client: CompletionClient, options: RunOptions, hooks: Hooks
) -> ChunkOutcome:
    """:func:`enrich_one` on a counting view of the client: the outcome carries every call made
    for the chunk, and when the chunk raises ``hooks.chunk_done`` still hears of its calls."""
    counted = _CountingClient(client)
    try:
        outcome = enrich_one(chunk, job, counted, options)
    except BaseException as exc:
        # the chunk raised (halt, budget cap, backend gone, Ctrl-C): its calls and questions
        # still count, and a halt's per-attempt records go to the report with them
        if isinstance(exc, RepairExhausted):
            counted.reject_answers()
        if hooks.chunk_done and (counted.calls or counted.questions):
            hooks.chunk_done(
                ChunkOutcome(
                    chunk.chunk_id,
                    None,
                    None,
                    counted.usage + counted.question_usage,
                    counted.calls,
                    counted.hits,
                    records=list(getattr(exc, "records", None) or []),
                    questions_asked=counted.questions,
                )
            )
        raise
    if not outcome.ok:  # skipped: still invalid after the last attempt
        counted.reject_answers()
    # calls and cache_hits count the structured calls; the yes/no questions are counted by
    # ``verdicts`` and their tokens added to the usage
    return dataclasses.replace(
        outcome,
        usage=counted.usage + outcome.verdicts.usage,
        calls=counted.calls,
        cache_hits=counted.hits,
    )


def _run_pool(
    work: Callable[[int], None], todo: Sequence[int], workers: int, *, name: str
) -> BaseException | None:
    """``work(i)`` for every ``i`` in ``todo`` on ``workers`` threads (in order on one).

    The first failure stops the rest (queued work is cancelled) and is returned, not raised, so
    the caller can assemble what finished: in output order for a stable message, or the Ctrl-C
    that arrived while waiting.
    """
    failure: BaseException | None = None
    if workers == 1:
        for i in todo:
            try:
                work(i)
            except BaseException as exc:  # noqa: BLE001 - returned for the caller to re-raise
                return exc
        return None
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name) as pool:
        futures = [pool.submit(work, i) for i in todo]
        try:
            _, pending = wait(futures, return_when=FIRST_EXCEPTION)
        except BaseException as exc:  # noqa: BLE001 - Ctrl-C while waiting: stop queued chunks, re-raised by the caller
            failure = exc
            pending = set(futures)
        for fut in pending:
            fut.cancel()
    if failure is None:
        for fut in futures:  # the first error in output order, for a stable message
            if fut.done() and not fut.cancelled() and fut.exception() is not None:
                failure = fut.exception()
                break
    return failure


def _letter_outcome(
    job: LetterJob,
    chunks: Sequence[Chunk],
    results: Sequence[ChunkOutcome | None],
    kept: dict[str, EvidenceRecord | None],
) -> LetterOutcome:
    """The letter as far as it got: one title per section, each chunk enriched or as segmented,
    and the letter-level violations of what will be written."""
    # chunks enriched earlier keep their title choice: seen as the segmenter's placeholder when
    # their section still has untitled chunks, so the whole section ends with one title
    untitled = {
        _section_key(c.chunk_id)
        for c in chunks
        if c.chunk_id not in kept and c.metadata.section_title == UNTITLED
    }
    originals = [
        c.model_copy(update={"metadata": c.metadata.model_copy(update={"section_title": UNTITLED})})
        if c.chunk_id in kept and _section_key(c.chunk_id) in untitled
        else c
        for c in chunks
    ]
    enriched = unify_titles(
        originals,
        [
            c if c.chunk_id in kept else (r.chunk if r else None)
            for c, r in zip(chunks, results, strict=True)
        ],
    )
    outcomes = [
        dataclasses.replace(r, chunk=c) if r is not None else None
        for r, c in zip(results, enriched, strict=True)
    ]
    finished = [o for o in outcomes if o is not None]
    written = [e if e is not None else c for c, e in zip(chunks, enriched, strict=True)]
    pending_ids = [c.chunk_id for c, e in zip(chunks, enriched, strict=True) if e is None]
    valid = [e for e in enriched if e is not None]
    evidence = {k: v for k, v in kept.items() if v}
    evidence.update(
        {o.chunk_id: o.evidence for o in finished if o.chunk is not None and o.evidence}
    )
    ctx = dataclasses.replace(job.context, evidence=evidence)
    if not pending_ids:
        letter_violations = validate_letter(valid, stage="enriched", context=ctx) if valid else []
    else:  # an incomplete letter: the file as written must hold at stage "segmented"
        letter_violations = validate_letter(written, stage="segmented", context=ctx)
    return LetterOutcome(
        year=job.year,
        chunks=valid,
        outcomes=finished,
        violations=letter_violations,
        written=written,
        pending=pending_ids,
        kept_evidence={k: v for k, v in kept.items() if v},
    )


# ------------------------------------------------------------------------------ files


def write_letter(
    out_dir: str | Path,
    year: LetterKey,
    cleaned_text: str | None,
    outcome: LetterOutcome,
    *,
    reviews: Sequence[ReviewRecord] = (),
    thresholds: Thresholds = BUILT_IN,
    context: LetterContext | None = None,
) -> list[Path]:
    """Write one letter's files atomically (each file is whole or absent, never half-written).

    ``YYYY.jsonl`` holds every chunk of ``outcome.written``: enriched where it is, else as
    segmented.  For an incomplete letter a chunk not enriched now keeps the enriched version an
    earlier run left in the file (same id, content and span), so a failed rerun never undoes
    finished work.  ``reviews``: the analysts' decisions in force, applied after the model's
    answer (:func:`letterchunk.review.apply.apply_reviews`; ``outcome.reviews`` says what became
    of each), validated in ``context``.
    """
    evidence = dict(outcome.kept_evidence)
    evidence.update({o.chunk_id: o.evidence for o in outcome.outcomes if o.ok and o.evidence})
    chunks = list(outcome.written or outcome.chunks)
    if reviews:
        done = apply_reviews(
            str(year), chunks, evidence, reviews, context=context, thresholds=thresholds
        )
        chunks, evidence, outcome.reviews = done.chunks, done.evidence, done
    outcome.paths = write_letter_files(
        LetterFiles.of(out_dir, year), cleaned_text, chunks, evidence, set(outcome.pending)
    )
    outcome.files_written = True
    return outcome.paths


def _run_one(
    year: LetterKey,
    text: str,
    chunks: list[Chunk],
    out_dir: Path,
    client: CompletionClient,
    options: RunOptions,
    hooks: Hooks,
    write_cleaned: bool,
    kept: dict[str, EvidenceRecord | None] | None = None,
    reviews: Sequence[ReviewRecord] = (),
) -> LetterOutcome:
    report = None
    if options.report:  # appended chunk by chunk, so a killed run keeps what it paid for
        report = RepairReport.for_letter(
            out_dir, year, run_id=options.run_id, source=options.source_label
        )
        hooks = dataclasses.replace(hooks, chunk_done=report.chunk_hook(hooks.chunk_done))
    outcome, failure = enrich_letter_until_failure(
        year, text, chunks, client, options, hooks, kept=kept
    )

    def write() -> None:
        write_letter(
            out_dir,
            year,
            text if write_cleaned else None,
            outcome,
            reviews=reviews,
            thresholds=options.thresholds,
            context=letter_context(year, text, chunks),
        )
        if report is not None:
            report.add(review_records(outcome.reviews, year))

    if failure is not None:
        # halt, budget cap, backend gone, Ctrl-C: keep what this run enriched (every other
        # chunk as segmented); when it enriched nothing, files already there stay as they are,
        # and a letter with no file yet is written as segmented, so `enrich DIR` can finish it
        if any(o.ok for o in outcome.outcomes) or not LetterFiles.of(out_dir, year).chunks.exists():
            write()
        if report is not None:
            outcome.paths.append(report.path)  # the halting chunk's records came via chunk_done
        if hooks.letter_done:
            hooks.letter_done(outcome)
        raise failure
    write()
    if report is not None:
        report.flush()  # creates the file even for a letter without chunks
        outcome.paths.append(report.path)
    if hooks.letter_done:  # ledger: letter finished, DIR/run.json rewritten
        hooks.letter_done(outcome)
    return outcome


def run_paths(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    client: CompletionClient,
    options: RunOptions = RunOptions(),
    hooks: Hooks | None = None,
) -> list[LetterOutcome]:
    """``letterchunk run``: every letter in ``paths`` (files, folders of ``*.txt``) -> ``out_dir``,
    in the given order."""
    hooks = hooks or Hooks()
    reviews = reviews_in_force(out_dir)  # a corrupt reviews.jsonl stops the run here
    prepared = prepare_letters(
        paths,
        client,
        profile=options.profile,
        tier2=options.tier2,
        context_tokens=options.context_tokens,
    )
    if hooks.letters_listed:
        hooks.letters_listed([(letter.key, len(chunks)) for _, letter, chunks in prepared])
    if hooks.letters_segmented:
        hooks.letters_segmented(len(prepared), sum(len(c) for _, _, c in prepared))
    out = Path(out_dir)
    keys = [letter.key for _, letter, _ in prepared]
    check_replaceable(out, keys, report=options.report)  # before any request
    return [
        _run_one(letter.key, letter.text, chunks, out, client, options, hooks, True, None, reviews)
        for _, letter, chunks in prepared
    ]


def enrich_dir(
    out_dir: str | Path,
    client: CompletionClient,
    options: RunOptions = RunOptions(),
    hooks: Hooks | None = None,
) -> list[LetterOutcome]:
    """``letterchunk enrich DIR``: enrich the segmented ``DIR/YYYY.jsonl`` files in place.

    Each letter needs its ``DIR/YYYY_cleaned.txt`` (the ``source_file`` of its chunks), which
    ``letterchunk segment`` writes beside it.  Only chunks not yet enriched (empty
    ``contextual_summary``) are asked, so a rerun finishes a letter a halted, skipped, capped or
    interrupted run left incomplete; a letter with nothing left to ask is skipped.
    """
    hooks = hooks or Hooks()
    folder = Path(out_dir)
    jobs = segmented_letters(folder)
    keys = [year for year, *_ in jobs]
    check_replaceable(folder, keys, cleaned=False, report=options.report)  # before any request
    reviews = reviews_in_force(folder)
    if hooks.letters_listed:
        hooks.letters_listed([(year, len(chunks)) for year, _, chunks, _ in jobs])
    if hooks.letters_segmented:
        hooks.letters_segmented(len(jobs), sum(len(c) - len(k) for _, _, c, k in jobs))
    return [
        _run_one(year, text, chunks, folder, client, options, hooks, False, kept, reviews)
        for year, text, chunks, kept in jobs
    ]
