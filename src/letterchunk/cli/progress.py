"""Progress and the end summary of `letterchunk run` / `letterchunk enrich`, on stderr.

::

    make_reporter(quiet)            the reporter for this stderr:
      RichReporter                    a terminal: a live rich bar, redrawn in place
      PlainReporter                   not a terminal (CI, nohup, | tee): as chunks finish, at
                                      most one line per LETTERCHUNK_PROGRESS_INTERVAL seconds
                                      (default 30; 0 = every chunk), and one at the end of
                                      every letter
      Reporter                        --quiet: counts, prints nothing
    summary_lines(stats, ...)       the one end summary: run totals, then the ledger's
                                    per-letter table

Every reporter keeps a :class:`Stats` fed by the pipeline's hooks (``letters_segmented``,
``chunk_done``, ``letter_done``); both displays show the same figures: chunks done/total, chunks
per minute, tokens, cache hits, repairs, elapsed time and ETA.  ``chunk_done`` comes from worker
threads, so counts and writes are under a lock.  rich is imported only here and only for a
terminal; stdout is never written.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
)
from rich.text import Text

from letterchunk.layout import LetterKey
from letterchunk.settings import Settings

if TYPE_CHECKING:  # the records the pipeline's hooks hand over; importing them here is slow
    from letterchunk.llm.client import LLMClient
    from letterchunk.runner.ledger import Ledger
    from letterchunk.runner.pipeline import ChunkOutcome, LetterOutcome

__all__ = [
    "ENV_INTERVAL",
    "PlainReporter",
    "Reporter",
    "RichReporter",
    "Stats",
    "format_duration",
    "make_reporter",
    "progress_interval",
    "summary_lines",
]

ENV_INTERVAL = "LETTERCHUNK_PROGRESS_INTERVAL"  # seconds between plain lines off a terminal


def format_duration(seconds: float | None) -> str:
    """``45s``, ``3m05s``, ``2h03m``; ``?`` when unknown (nothing finished yet)."""
    if seconds is None:
        return "?"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Stats:
    """Running counts of one run, fed by the pipeline hooks (thread-safe)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.created = clock()  # the whole command, backend start included
        self.started = self.created  # enrichment start: the rate counts from here
        self.letters_total = self.letters_done = 0
        self.total = self.done = self.failed = self.enriched = 0
        self.calls = self.cache_hits = self.repairs = self.questions = 0
        self.prompt_tokens = self.completion_tokens = 0
        self.last_letter: LetterKey | None = None  # a year, or a compilation letter YYYY-Lk
        self.began = False  # letters were read and segmented: there is a run to summarize
        # the requests the client keeps waiting on, and why (chunk id -> reason): a slow
        # embedded server still working on a request is waited for, not asked again
        self.waiting: Callable[[], dict[str, str]] = dict

    def segmented(self, letters: int, chunks: int) -> None:
        with self._lock:
            self.began = True
            self.letters_total, self.total = letters, chunks
            self.started = self._clock()

    def chunk_done(self, outcome: ChunkOutcome) -> None:
        calls = int(outcome.calls or 0)
        with self._lock:
            self.done += 1
            self.failed += 0 if outcome.ok else 1
            self.calls += calls
            self.questions += int(getattr(outcome, "questions", 0) or 0)
            self.cache_hits += int(outcome.cache_hits or 0)
            self.repairs += max(0, calls - 1)
            self.prompt_tokens += outcome.usage.prompt_tokens
            self.completion_tokens += outcome.usage.completion_tokens

    def letter_done(self, outcome: LetterOutcome) -> None:
        with self._lock:
            # a halted, capped or interrupted letter also reaches here (its files are written
            # with the unfinished chunks as segmented); only a complete letter counts as done
            self.letters_done += 1 if getattr(outcome, "complete", True) else 0
            self.enriched += len(outcome.chunks)  # valid enriched chunks on disk
            self.last_letter = outcome.year

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def elapsed(self) -> float:
        return self._clock() - self.started

    def wall(self) -> float:
        return self._clock() - self.created

    def rate_per_min(self) -> float | None:
        """Chunks per minute since enrichment began; None before the first chunk."""
        elapsed = self.elapsed()
        if not self.done or elapsed <= 0:
            return None
        return self.done * 60.0 / elapsed

    def eta_s(self) -> float | None:
        rate = self.rate_per_min()
        if rate is None:
            return None
        return max(0, self.total - self.done) * 60.0 / rate

    def figures(self) -> str:
        """Everything but done/total, as both displays show it."""
        with self._lock:
            rate = self.rate_per_min()
            return (
                f"{'?' if rate is None else f'{rate:,.1f}'} chunks/min, "
                f"{self.tokens:,} tokens, {self.cache_hits} cache hit(s), "
                f"{self.repairs} repair(s), elapsed {format_duration(self.elapsed())}, "
                f"ETA {format_duration(self.eta_s())}"
            ) + "".join(f"; waiting on {c}: {why}" for c, why in sorted(self.waiting().items()))

    def line(self) -> str:
        """One plain progress line (no prefix, no newline)."""
        with self._lock:
            done, total = self.done, self.total
            letters = (
                f"letter {min(self.letters_done + 1, self.letters_total)}/{self.letters_total}"
            )
        pct = f" ({done * 100 // total}%)" if total else ""
        return f"{done}/{total} chunks{pct}, {letters}, {self.figures()}"


class Reporter:
    """Collects :class:`Stats` and shows nothing (``--quiet``); the base of the displays."""

    def __init__(self, stats: Stats | None = None) -> None:
        self.stats = stats or Stats()

    def segmented(self, letters: int, chunks: int) -> None:
        self.stats.segmented(letters, chunks)

    def chunk_done(self, outcome: ChunkOutcome) -> None:
        self.stats.chunk_done(outcome)

    def letter_done(self, outcome: LetterOutcome) -> None:
        self.stats.letter_done(outcome)

    def close(self) -> None:
        pass


class PlainReporter(Reporter):
    """Whole lines for a log: at most one per ``interval_s`` while chunks finish, and one at
    the end of every letter, so a run of hours under CI or nohup is never silent."""

    def __init__(
        self,
        stream: TextIO,
        interval_s: float,
        stats: Stats | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(stats or Stats(clock))
        self.stream = stream
        self.interval_s = interval_s
        self._clock = clock
        self._last = clock()
        self._write_lock = threading.Lock()

    def chunk_done(self, outcome: ChunkOutcome) -> None:
        super().chunk_done(outcome)
        with self._write_lock:
            now = self._clock()
            if now - self._last < self.interval_s:
                return
            self._last = now
            self._emit(f"letterchunk: progress {self.stats.line()}")

    def letter_done(self, outcome: LetterOutcome) -> None:
        super().letter_done(outcome)
        with self._write_lock:
            self._last = self._clock()
            stats = self.stats
            state = "done" if getattr(outcome, "complete", True) else "incomplete"
            self._emit(
                f"letterchunk: letter {outcome.year} {state} "
                f"({stats.letters_done}/{stats.letters_total}): "
                f"{stats.done}/{stats.total} chunks, {stats.figures()}"
            )

    def _emit(self, line: str) -> None:
        self.stream.write(line + "\n")
        self.stream.flush()


class RichReporter(Reporter):
    """A live rich progress bar on a terminal console (``rich.console.Console``)."""

    def __init__(self, console: Console, stats: Stats | None = None) -> None:

        super().__init__(stats)
        figures = self.stats.figures

        class Figures(ProgressColumn):
            """Rate, tokens, hits, repairs, elapsed and ETA, recomputed at every refresh so
            the clock moves while a slow chunk is in flight."""

            def render(self, task: Task) -> Text:
                return Text(f"chunks  {figures()}")

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            Figures(),
            console=console,
            refresh_per_second=2,
            redirect_stdout=False,  # stdout is data; only stderr writes go above the bar
        )
        self._task: TaskID | None = None

    def segmented(self, letters: int, chunks: int) -> None:
        super().segmented(letters, chunks)
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task(self._description(), total=chunks)
        self._update()

    def chunk_done(self, outcome: ChunkOutcome) -> None:
        super().chunk_done(outcome)
        self._update()

    def letter_done(self, outcome: LetterOutcome) -> None:
        super().letter_done(outcome)
        self._update()

    def _description(self) -> str:
        s = self.stats
        return f"letter {min(s.letters_done + 1, s.letters_total)}/{s.letters_total}"

    def _update(self) -> None:
        if self._task is None:
            return
        self._progress.update(
            self._task,
            completed=self.stats.done,
            total=self.stats.total,
            description=self._description(),
        )

    def close(self) -> None:
        if self._task is not None:
            self._update()
            self._progress.stop()


def progress_interval() -> float:
    """Seconds between plain progress lines: ``LETTERCHUNK_PROGRESS_INTERVAL`` or 30."""

    return Settings.from_env().progress_interval_s


def make_reporter(quiet: bool, stream: TextIO | None = None) -> Reporter:
    """The reporter for ``stream`` (default stderr): silent, a rich bar, or plain lines."""
    stream = stream or sys.stderr
    if quiet:
        return Reporter()
    interval = progress_interval()
    if stream.isatty():
        return RichReporter(Console(file=stream))
    return PlainReporter(stream, interval)


def summary_lines(
    stats: Stats,
    client: LLMClient,
    ledger: Ledger,
    failure: BaseException | None,
    out_dir: Path | None = None,
) -> list[str]:
    """The end summary, printed once however the run ends (done, halted, capped, Ctrl-C).

    The first line holds the run's totals as the client saw them (every HTTP request and token,
    a halted chunk's included; the cache's own hit/miss counts); then the ledger's table, one
    row per letter and a total, with repairs, wall time and cost, and a line for each letter
    left incomplete.  A halted letter reaches ``letter_done`` and its halting chunk
    ``chunk_done``, so the counts need no correction for ``failure``.
    """
    usage = client.usage
    cache = client.cache
    hits, misses = (cache.hits, cache.misses) if cache is not None else (0, 0)
    head = (
        f"summary: {stats.letters_done}/{stats.letters_total} letter(s), "
        f"{stats.enriched}/{stats.total} chunk(s) enriched, {stats.failed} failed; "
        f"{stats.calls} LLM call(s) + {stats.questions} yes/no question(s), "
        f"{usage.requests} HTTP request(s), "
        f"{usage.prompt_tokens:,} prompt + {usage.completion_tokens:,} completion tokens; "
        f"cache {hits} hit(s), {misses} miss(es)"
        + ("" if cache is not None else " (cache off)")
        + f"; {stats.repairs} repair(s); {stats.wall():,.1f}s"
    )
    return [head, *ledger.summary_lines(out_dir)]
