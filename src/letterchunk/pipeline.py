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
      report.write_letter_report(...)            DIR/YYYY.report.jsonl (developer D): one
                                                  record per attempt; it says where each
                                                  answer came from, so it differs between a
                                                  live run and a cached rerun
    enrich_dir(dir, client)                    letterchunk enrich DIR (in place)

Invariants:

* Exactly one ``LLMClient.complete`` call per chunk when its first answer validates; the repair
  loop (:mod:`letterchunk.repair`) adds re-asks only for invalid answers.
* An invalid chunk is never written.  ``on_failure="halt"`` stops with
  :class:`~letterchunk.errors.RepairExhausted` after writing the letter's valid chunks;
  ``"skip"`` leaves the chunk out and goes on.
* Output order is the segmenter's order whatever order the pool finishes in, so output is
  byte-identical between a serial run, a parallel run and a rerun from the cache.

Extension points for rate limits, the ledger and budget caps (issue 5) are marked ``HOOK``:
the client carries the limiter; :class:`Hooks` is called after every chunk and letter.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .enrich import (
    UNTITLED,
    PromptContext,
    apply_enrichment,
    build_messages,
    evidence_record,
    response_model_for,
)
from .errors import InputError, LetterchunkError, RepairExhausted
from .io import atomic_write_lines, atomic_write_text
from .repair import OnFailure
from .schema import Chunk, dump_chunk

__all__ = [
    "RunOptions",
    "ChunkOutcome",
    "LetterOutcome",
    "Hooks",
    "LetterJob",
    "enrich_one",
    "enrich_letter",
    "run_paths",
    "enrich_dir",
    "write_letter",
    "unify_titles",
    "output_paths",
]

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class RunOptions:
    tier2: bool = False
    workers: int = 1
    max_attempts: int = 2  # re-asks after the first answer (repair loop)
    on_failure: OnFailure = "halt"
    report: bool = True  # write DIR/YYYY.report.jsonl (developer D's repair report)
    source_label: str | None = None  # e.g. "cassette": what served answers the client calls live
    context_tokens: int | None = None  # the model's context: bigger requests are refused unsent

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
    evidence: dict | None
    usage: Any  # llm.Usage summed over every call for this chunk
    calls: int  # LLMClient.complete calls (1 on a clean answer)
    cache_hits: int  # calls answered from the cache
    violations: list[Any] = field(default_factory=list)  # error-level ones left when failed
    records: list[dict] = field(default_factory=list)  # repair report records (developer D)

    @property
    def ok(self) -> bool:
        return self.chunk is not None


@dataclass
class LetterOutcome:
    year: int
    chunks: list[Chunk]  # valid, written, in output order
    outcomes: list[ChunkOutcome]  # one per segmented chunk, in output order
    violations: list[Any]  # letter-level (validate_letter) violations of the written chunks
    paths: list[Path] = field(default_factory=list)

    @property
    def failed(self) -> list[ChunkOutcome]:
        return [o for o in self.outcomes if not o.ok]

    @property
    def errors(self) -> list[Any]:
        return [v for v in self.violations if getattr(v, "severity", "error") == "error"]


@dataclass
class Hooks:
    """Callbacks the CLI (progress bar) and issue 5 (ledger, budget) attach to a run.

    ``chunk_done`` is called from the thread that finished the chunk, in completion order;
    ``letter_done`` once per letter after its files are written.
    """

    chunk_done: Callable[[ChunkOutcome], None] | None = None
    letter_done: Callable[[LetterOutcome], None] | None = None
    letters_segmented: Callable[[int, int], None] | None = None  # (letters, chunks) of the run


@dataclass(frozen=True)
class LetterJob:
    """Everything the per-chunk work needs about its letter (shared, read-only)."""

    year: int
    cleaned_text: str
    prompt: PromptContext
    context: Any  # validate.LetterContext without evidence


# ------------------------------------------------------------------------------ per chunk


def _usage_zero() -> Any:
    from .llm import Usage

    return Usage()


def _source_of(completion: Any) -> str:
    return getattr(completion, "source", "live") or "live"


def enrich_one(chunk: Chunk, job: LetterJob, client: Any, options: RunOptions) -> ChunkOutcome:
    """One chunk: one LLM call, apply, validate; the repair loop when the answer is not valid.

    Pure with respect to shared state (safe to run in a pool): reads ``job``, returns a result.
    """
    from .validate import validate_chunk

    messages = build_messages(chunk, job.prompt)
    model = response_model_for(chunk, job.prompt)
    first = client.complete(messages, model, chunk_id=chunk.chunk_id)  # the one call
    hits = int(_source_of(first) == "cache")

    if first.value is not None:
        candidate = apply_enrichment(chunk, first.value)
        evidence = evidence_record(chunk.chunk_id, first.value)
        ctx = dataclasses.replace(job.context, evidence={chunk.chunk_id: evidence})
        errors = [
            v for v in validate_chunk(candidate, stage="enriched", context=ctx)
            if v.severity == "error"
        ]
        if not errors:
            return ChunkOutcome(chunk.chunk_id, candidate, evidence, first.usage, 1, hits)

    return _repair(chunk, job, client, options, messages=messages, model=model, first=first,
                   hits=hits)


def _repair(
    chunk: Chunk,
    job: LetterJob,
    client: Any,
    options: RunOptions,
    *,
    messages: list[dict],
    model: type,
    first: Any,
    hits: int,
) -> ChunkOutcome:
    """Hand an invalid first answer to developer D's repair loop (``repair.repair_enriched``).

    It validates again (mechanical fixes by code, then bounded re-asks of only the failing
    fields) and either returns a valid chunk or, with ``on_failure="halt"``, raises
    RepairExhausted.
    """
    from . import repair

    result = repair.repair_enriched(
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


def letter_job(year: int, cleaned_text: str, chunks: Sequence[Chunk], *,
               grounded_choices: bool = True) -> LetterJob:
    from .segment import section_titles
    from .validate import LetterContext
    from .vocabulary import load_concepts

    titles = [t for t in section_titles(list(chunks)) if t != UNTITLED]
    vocab = load_concepts()
    prompt = PromptContext.for_letter(year, titles, vocab, grounded_choices=grounded_choices)
    context = LetterContext(cleaned_text=cleaned_text, section_titles=list(titles),
                            vocabulary=vocab)
    return LetterJob(year=year, cleaned_text=cleaned_text, prompt=prompt, context=context)


def _grammar_backed(client: Any) -> bool:
    """Whether the backend constrains answers by the JSON schema (instructor JSON_SCHEMA mode).

    Then entity names and quotes are offered as enums of the chunk's own names and sentences;
    with tool calling (hosted OpenAI) the enums would only repeat the chunk in the request.
    """
    settings = getattr(client, "settings", None)
    return getattr(settings, "mode", "JSON_SCHEMA") == "JSON_SCHEMA"


def _section_key(chunk_id: str) -> str:
    return chunk_id.split("-")[1]  # "S3" of "2016-S3-T1-002"


def unify_titles(original: Sequence[Chunk], enriched: Sequence[Chunk | None]) -> list[Chunk | None]:
    """One title per untitled section: the first enriched chunk's (output order) wins.

    Every chunk of a section the segmenter left as :data:`UNTITLED` answered its own title;
    the section title must be stable across the section's chunks (seed §0.3), so all of them get
    the title of the section's first chunk.  Deterministic whatever order the pool finished in.
    """
    chosen: dict[str, str] = {}
    for before, after in zip(original, enriched):
        if after is not None and before.metadata.section_title == UNTITLED:
            chosen.setdefault(_section_key(before.chunk_id), after.metadata.section_title)
    # A model title may repeat another section's title (a small model names the opening after
    # the next header): section titles stay unique within a letter, so the later-chosen copy
    # gets its section number.  Segmenter titles are never changed.
    taken = {c.metadata.section_title.casefold() for c in original
             if c.metadata.section_title != UNTITLED}
    for key in sorted(chosen, key=lambda k: int(k[1:])):
        if chosen[key].casefold() in taken:
            chosen[key] = f"{chosen[key]} (section {key[1:]})"
        taken.add(chosen[key].casefold())
    out: list[Chunk | None] = []
    for before, after in zip(original, enriched):
        title = chosen.get(_section_key(before.chunk_id))
        if after is None or title is None or before.metadata.section_title != UNTITLED:
            out.append(after)
            continue
        xref = after.metadata.cross_references
        meta = after.metadata.model_copy(update={
            "section_title": title,
            "section_hierarchy": [
                title if h in (UNTITLED, after.metadata.section_title) else h
                for h in before.metadata.section_hierarchy
            ],
            # a section never refers to itself (the chunk chose from the other titles before
            # its section had one, and the model may name the section like another one)
            "cross_references": xref.model_copy(update={
                "related_sections_same_letter": list(dict.fromkeys(
                    t for t in xref.related_sections_same_letter if t != title
                )),
            }),
        })
        out.append(after.model_copy(update={"metadata": meta}))
    return out


def enrich_letter(
    year: int,
    cleaned_text: str,
    chunks: Sequence[Chunk],
    client: Any,
    options: RunOptions = RunOptions(),
    hooks: Hooks | None = None,
) -> LetterOutcome:
    """Enrich every chunk of one letter through a pool of ``options.workers`` threads.

    Results are placed by index, so the output order never depends on completion order.
    On RepairExhausted (halt) or any other error, pending chunks are cancelled, the chunks
    already valid are returned on the exception (``exc.partial``) and it propagates.
    """
    from .validate import validate_letter

    hooks = hooks or Hooks()
    job = letter_job(year, cleaned_text, chunks, grounded_choices=_grammar_backed(client))
    results: list[ChunkOutcome | None] = [None] * len(chunks)

    def work(i: int) -> None:
        outcome = enrich_one(chunks[i], job, client, options)
        results[i] = outcome
        if hooks.chunk_done:  # HOOK (issue 5): ledger.record_chunk / budget check
            hooks.chunk_done(outcome)

    failure: BaseException | None = None
    if options.workers == 1:
        for i in range(len(chunks)):
            try:
                work(i)
            except BaseException as exc:  # noqa: BLE001 - re-raised below after bookkeeping
                failure = exc
                break
    else:
        with ThreadPoolExecutor(max_workers=options.workers,
                                thread_name_prefix=f"enrich-{year}") as pool:
            futures = [pool.submit(work, i) for i in range(len(chunks))]
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for fut in pending:
                fut.cancel()
            for fut in futures:  # the first error in output order, for a stable message
                if fut.done() and not fut.cancelled() and fut.exception() is not None:
                    failure = fut.exception()
                    break

    enriched = unify_titles(chunks, [r.chunk if r else None for r in results])
    outcomes = [
        dataclasses.replace(r, chunk=c) if r is not None else None
        for r, c in zip(results, enriched)
    ]
    finished = [o for o in outcomes if o is not None]
    valid = [o.chunk for o in finished if o.chunk is not None]
    evidence = {o.chunk_id: o.evidence for o in finished if o.chunk is not None and o.evidence}
    ctx = dataclasses.replace(job.context, evidence=evidence)
    letter_violations = validate_letter(valid, stage="enriched", context=ctx) if valid else []
    result = LetterOutcome(year=year, chunks=valid, outcomes=finished,
                           violations=letter_violations)
    if failure is not None:
        failure.partial = result  # type: ignore[attr-defined]
        raise failure
    return result


# ------------------------------------------------------------------------------ files


def output_paths(out_dir: str | Path, year: int) -> dict[str, Path]:
    out = Path(out_dir)
    return {
        "cleaned": out / f"{year}_cleaned.txt",
        "chunks": out / f"{year}.jsonl",
        "evidence": out / f"{year}.evidence.jsonl",
    }


def dump_evidence(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(", ", ": "))


def write_letter(out_dir: str | Path, year: int, cleaned_text: str | None,
                 outcome: LetterOutcome) -> list[Path]:
    """Write one letter's files atomically (each file is whole or absent, never half-written)."""
    paths = output_paths(out_dir, year)
    written: list[Path] = []
    if cleaned_text is not None:
        atomic_write_text(paths["cleaned"], cleaned_text)
        written.append(paths["cleaned"])
    atomic_write_lines(paths["chunks"], [dump_chunk(c) for c in outcome.chunks])
    evidence = {o.chunk_id: o.evidence for o in outcome.outcomes if o.ok and o.evidence}
    atomic_write_lines(
        paths["evidence"], [dump_evidence(evidence[c.chunk_id]) for c in outcome.chunks
                            if c.chunk_id in evidence]
    )
    written += [paths["chunks"], paths["evidence"]]
    outcome.paths = written
    return written


def _run_one(year: int, text: str, chunks: list[Chunk], out_dir: Path, client: Any,
             options: RunOptions, hooks: Hooks, write_cleaned: bool) -> LetterOutcome:
    try:
        outcome = enrich_letter(year, text, chunks, client, options, hooks)
    except LetterchunkError as exc:
        partial = getattr(exc, "partial", None)
        if isinstance(exc, RepairExhausted) and partial is not None:
            # keep every chunk already valid on disk, then halt
            write_letter(out_dir, year, text if write_cleaned else None, partial)
        if options.report and partial is not None:
            _write_report(out_dir, year, partial, exc, options)
        raise
    write_letter(out_dir, year, text if write_cleaned else None, outcome)
    if options.report:
        _write_report(out_dir, year, outcome, None, options)
    if hooks.letter_done:  # HOOK (issue 5): ledger.record_letter / run.json
        hooks.letter_done(outcome)
    return outcome


def _write_report(out_dir: Path, year: int, outcome: LetterOutcome,
                  failure: BaseException | None, options: RunOptions) -> None:
    from .report import write_letter_report

    path = write_letter_report(out_dir, year, outcome, failure, source=options.source_label)
    outcome.paths.append(Path(path))


def run_paths(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    client: Any,
    options: RunOptions = RunOptions(),
    hooks: Hooks | None = None,
) -> list[LetterOutcome]:
    """``letterchunk run``: every letter file in ``paths`` -> ``out_dir``, in the given order."""
    from .clean import load_letter
    from .segment import segment_letter

    hooks = hooks or Hooks()
    letters = [load_letter(p) for p in paths]
    segmented = [segment_letter(letter, tier2=options.tier2) for letter in letters]
    if options.context_tokens:  # before the first request: a chunk that cannot fit never goes
        for path, letter, chunks in zip(paths, letters, segmented):
            check_prompt_sizes(path, letter.year, letter.text, chunks, client, options.context_tokens)
    if hooks.letters_segmented:
        hooks.letters_segmented(len(letters), sum(len(c) for c in segmented))
    out = Path(out_dir)
    return [
        _run_one(letter.year, letter.text, chunks, out, client, options, hooks, True)
        for letter, chunks in zip(letters, segmented)
    ]


def check_prompt_sizes(path: str | Path, year: int, text: str, chunks: Sequence[Chunk],
                       client: Any, context_tokens: int) -> None:
    """Raise InputError naming the letter when a chunk's request (prompt + answer allowance,
    counted as :func:`~letterchunk.llm.estimate_tokens` does) exceeds ``context_tokens``."""
    from .llm import estimate_tokens

    job = letter_job(year, text, chunks, grounded_choices=_grammar_backed(client))
    max_tokens = int(getattr(getattr(client, "settings", None), "max_tokens", 0) or 0)
    for chunk in chunks:
        need = estimate_tokens({"messages": build_messages(chunk, job.prompt), "max_tokens": max_tokens})
        if need > context_tokens:
            raise InputError(path, (
                f"chunk {chunk.chunk_id} ({chunk.metadata.token_count:,} tokens) needs a "
                f"{need:,}-token request, more than the model's {context_tokens:,}-token context, "
                "so the letter cannot be enriched as is and nothing was sent; split the letter "
                "into paragraphs and sections (blank lines, headers), or pass --context-tokens "
                "if the model has a larger context"))


_JSONL = re.compile(r"^(\d{4})\.jsonl$")


def _read_chunks(path: Path) -> list[Chunk]:
    chunks = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            chunks.append(Chunk.model_validate_json(line))
        except ValueError as exc:
            raise InputError(path, f"line {n} is not a canonical chunk ({exc.__class__.__name__}); "
                                   "run `letterchunk validate` on it, or segment the letter again"
                             ) from None
    return chunks


def enrich_dir(
    out_dir: str | Path,
    client: Any,
    options: RunOptions = RunOptions(),
    hooks: Hooks | None = None,
) -> list[LetterOutcome]:
    """``letterchunk enrich DIR``: enrich the segmented ``DIR/YYYY.jsonl`` files in place.

    Each letter needs its ``DIR/YYYY_cleaned.txt`` (the ``source_file`` of its chunks), which
    ``letterchunk segment`` writes beside it.
    """
    hooks = hooks or Hooks()
    folder = Path(out_dir)
    if not folder.is_dir():
        raise InputError(folder, "not a folder; pass the --out folder of `letterchunk segment`")
    files = sorted(p for p in folder.iterdir() if _JSONL.match(p.name))
    if not files:
        raise InputError(folder, "holds no YYYY.jsonl chunk files; run `letterchunk segment "
                                 f"LETTER --out {folder}` first")
    jobs = []
    for path in files:
        chunks = _read_chunks(path)
        year = int(_JSONL.match(path.name).group(1))  # type: ignore[union-attr]
        # HOOK (issue 5, resume): a letter an earlier run (finished, capped or killed) already
        # enriched in place is not asked again; segment it again to enrich it afresh
        if chunks and all(c.metadata.contextual_summary for c in chunks):
            log.info("%s: already enriched, skipped", path)
            continue
        source = chunks[0].metadata.source_file if chunks else f"{year}_cleaned.txt"
        cleaned = folder / source
        if not cleaned.is_file():
            raise InputError(cleaned, f"missing: {path.name} was cut from it; run `letterchunk "
                                      f"segment` again so both files are in {folder}")
        jobs.append((year, cleaned.read_text(encoding="utf-8"), chunks))
    if hooks.letters_segmented:
        hooks.letters_segmented(len(jobs), sum(len(c) for _, _, c in jobs))
    return [
        _run_one(year, text, chunks, folder, client, options, hooks, False)
        for year, text, chunks in jobs
    ]
