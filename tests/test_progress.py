"""Progress on stderr while a run goes, and one summary at its end.

* Off a terminal (stderr a pipe, as under CI, nohup or ``| tee``) the real CLI, run as a
  subprocess over several letters against tests/fake_openai.py (slowed by a fixed latency),
  writes plain progress lines with rate and ETA while it runs, read here as they arrive; the
  summary comes once, last; stdout stays empty.
* The plain reporter throttles to one line per interval plus one per finished letter.
* On a terminal the rich bar (a forced-terminal console writing to a StringIO) shows the same
  figures: done/total, chunks per minute and ETA.
* ``--quiet`` prints nothing at all on success.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI, answer
from letterchunk.cli import main
from letterchunk.cli.progress import (
    ENV_INTERVAL,
    PlainReporter,
    RichReporter,
    Stats,
    format_duration,
    make_reporter,
    progress_interval,
)
from letterchunk.errors import ConfigError
from test_fault_matrix import valid_for

ROOT = Path(__file__).resolve().parents[1]
LETTERS = [ROOT / "corpus" / "letters" / f"{y}.txt" for y in (1971, 1972, 1973)]
PROGRESS = re.compile(
    r"^letterchunk: progress (\d+)/(\d+) chunks .*?([\d.]+) chunks/min, .*ETA (\S+)$"
)
LETTER_DONE = re.compile(
    r"^letterchunk: letter (\d{4}) done \((\d+)/(\d+)\): .*chunks/min.*ETA \S+$"
)
SUMMARY = "letterchunk: summary: "
TABLE_HEAD = re.compile(r"^letterchunk: letter\s+chunks\s+requests\s+prompt\s+completion")


# --------------------------------------------------------------------- fakes for unit tests


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Usage:
    prompt_tokens: int = 100
    completion_tokens: int = 20


@dataclass
class Outcome:
    """The fields of pipeline.ChunkOutcome the reporters read."""

    calls: int = 1
    cache_hits: int = 0
    ok: bool = True
    usage: Usage = field(default_factory=Usage)


@dataclass
class Letter:
    year: int
    chunks: list


# --------------------------------------------------------------------- the CLI, off a terminal


def _run_streaming(cmd: list[str], env: dict[str, str]) -> tuple[int, list[tuple[str, bool]], str]:
    """Run ``cmd``; every stderr line with whether the process was still running when it came."""
    proc = subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    lines: list[tuple[str, bool]] = []
    timer = threading.Timer(120, proc.kill)  # a hung run fails the test instead of blocking it
    timer.start()
    try:
        for line in proc.stderr:  # type: ignore[union-attr]
            lines.append((line.rstrip("\n"), proc.poll() is None))
        code = proc.wait()
    finally:
        timer.cancel()
        reader.join()
    return code, lines, "".join(out)


def _chunks(path: Path) -> int:
    """How many chunks the segmenter makes of the letter at ``path``: one request each."""
    from letterchunk.text.clean import load_letter
    from letterchunk.text.segment import segment_letter

    return len(segment_letter(load_letter(path)))


def test_run_off_a_terminal_prints_progress_while_it_runs_and_one_summary(tmp_path):
    n = sum(_chunks(p) for p in LETTERS)
    # every answer takes 50 ms: the run lasts seconds after its first progress line, so that
    # line is seen while the process still runs
    with FakeOpenAI(default=lambda body: answer(valid_for(body)), latency_s=0.05) as server:
        env = dict(os.environ)
        env.update(
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="sk-dummy-test-key",
            LETTERCHUNK_MODEL="fake-model",
            **{ENV_INTERVAL: "0"},
        )
        cmd = [
            sys.executable,
            "-m",
            "letterchunk",
            "run",
            *map(str, LETTERS),
            "--out",
            str(tmp_path / "out"),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
        code, lines, stdout = _run_streaming(cmd, env)
        served = len(server.structured_requests)
        questions = server.question_count
    text = "\n".join(line for line, _ in lines)
    assert code == 0, text
    assert stdout == ""  # progress and summary never touch stdout
    assert served == n
    assert questions > 0  # the yes/no questions (principles, confession candidates) come apart

    progress = [(PROGRESS.match(line), live) for line, live in lines if PROGRESS.match(line)]
    assert len(progress) == n, text  # interval 0: a line per chunk
    first, live = progress[0]
    assert live, "the first progress line came only after the process had exited"
    assert (first.group(1), first.group(2)) == ("1", str(n))
    assert float(first.group(3)) > 0 and first.group(4) != "?"  # a rate and an ETA
    assert [m.group(1) for m, _ in progress] == [str(i) for i in range(1, n + 1)]

    letters = [LETTER_DONE.match(line) for line, _ in lines if LETTER_DONE.match(line)]
    assert [(m.group(1), m.group(2), m.group(3)) for m in letters] == [
        ("1971", "1", "3"),
        ("1972", "2", "3"),
        ("1973", "3", "3"),
    ]

    # the summary comes once, after every progress line, and holds the run's totals
    heads = [i for i, (line, _) in enumerate(lines) if line.startswith(SUMMARY)]
    tables = [i for i, (line, _) in enumerate(lines) if TABLE_HEAD.match(line)]
    assert len(heads) == 1 and len(tables) == 1, text
    last_progress = max(
        i for i, (line, _) in enumerate(lines) if PROGRESS.match(line) or LETTER_DONE.match(line)
    )
    assert last_progress < heads[0] < tables[0]
    head = lines[heads[0]][0]
    for figure in (
        "3/3 letter(s)",
        f"{n}/{n} chunk(s) enriched, 0 failed",
        f"{n} LLM call(s) + {questions} yes/no question(s)",
        f"{n + questions} HTTP request(s)",
        f"cache 0 hit(s), {n + questions} miss(es)",
        "0 repair(s)",
    ):
        assert figure in head, head
    rows = [line.split()[1] for line, _ in lines[tables[0] + 1 :]]
    assert rows[:4] == ["1971", "1972", "1973", "total"]


def test_quiet_prints_nothing(tmp_path, monkeypatch, capsys):
    with FakeOpenAI(default=lambda body: answer(valid_for(body))) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        monkeypatch.setenv(ENV_INTERVAL, "0")
        assert (
            main(
                ["run", str(LETTERS[0]), "--out", str(tmp_path / "o"), "--cache", "off", "--quiet"]
            )
            == 0
        )
    assert capsys.readouterr() == ("", "")


def test_summary_is_printed_once_when_a_cap_stops_the_run(tmp_path, monkeypatch, capsys):
    with FakeOpenAI(default=lambda body: answer(valid_for(body))) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        code = main(
            [
                "run",
                *map(str, LETTERS[:2]),
                "--out",
                str(tmp_path / "o"),
                "--cache",
                "off",
                "--max-tokens-total",
                "1",
            ]
        )
    err = capsys.readouterr().err
    assert code == 4, err
    assert err.count(SUMMARY) == 1
    n = sum(_chunks(p) for p in LETTERS[:2])
    assert f"0/2 letter(s), 0/{n} chunk(s) enriched" in err
    assert "run budget_exceeded" in err


def test_a_run_that_fails_on_its_input_prints_only_the_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never reached
    monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
    missing = tmp_path / "1999.txt"
    assert main(["run", str(missing), "--out", str(tmp_path / "o")]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert str(missing) in line and SUMMARY not in line


# --------------------------------------------------------------------- the reporters


def test_plain_reporter_throttles_to_the_interval_and_reports_every_letter():
    clock, stream = Clock(), io.StringIO()
    reporter = PlainReporter(stream, interval_s=30, clock=clock)
    reporter.segmented(2, 6)
    for _ in range(3):  # three chunks in 10 s: no line yet
        clock.now += 10 / 3
        reporter.chunk_done(Outcome())
    assert stream.getvalue() == ""
    clock.now += 20  # 30 s since the start
    reporter.chunk_done(Outcome(calls=2, cache_hits=1))
    reporter.chunk_done(Outcome())  # at once: throttled
    [line] = stream.getvalue().splitlines()
    assert line == (
        "letterchunk: progress 4/6 chunks (66%), letter 1/2, 8.0 chunks/min, "
        "480 tokens, 1 cache hit(s), 1 repair(s), elapsed 30s, ETA 15s"
    )
    reporter.letter_done(Letter(1977, [object()] * 5))  # always a line at a letter's end
    last = stream.getvalue().splitlines()[-1]
    assert last.startswith("letterchunk: letter 1977 done (1/2): 5/6 chunks, 10.0 chunks/min")
    assert last.endswith("ETA 6s")


def test_rich_reporter_draws_rate_and_eta_on_a_terminal():
    from rich.console import Console

    clock, buffer = Clock(), io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=160, color_system=None)
    reporter = RichReporter(console, stats=Stats(clock))
    reporter.segmented(3, 120)
    for _ in range(30):
        clock.now += 2
        reporter.chunk_done(Outcome())
    reporter.letter_done(Letter(1971, [object()] * 30))
    reporter.close()
    screen = buffer.getvalue()
    assert "\x1b[" in screen or "\r" in screen  # drawn in place, as on a terminal
    final = [line for line in re.split(r"[\r\n]", screen) if "30/120" in line][-1]
    assert "letter 2/3" in final and "30.0 chunks/min" in final
    assert "ETA 3m00s" in final and "3,600 tokens" in final


def test_make_reporter_picks_the_display_for_the_stream(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert type(make_reporter(True, Tty())).__name__ == "Reporter"
    assert isinstance(make_reporter(False, Tty()), RichReporter)
    plain = make_reporter(False, io.StringIO())
    assert isinstance(plain, PlainReporter) and plain.interval_s == 30
    monkeypatch.setenv(ENV_INTERVAL, "2.5")
    assert make_reporter(False, io.StringIO()).interval_s == 2.5


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("soon", "not a number of seconds"),
        ("-1", "must be 0 or more"),
    ],
)
def test_a_bad_interval_says_which_variable_to_fix(monkeypatch, raw, message):
    monkeypatch.setenv(ENV_INTERVAL, raw)
    with pytest.raises(ConfigError, match=message) as info:
        progress_interval()
    assert ENV_INTERVAL in str(info.value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "?"),
        (0.4, "0s"),
        (59, "59s"),
        (61, "1m01s"),
        (3599, "59m59s"),
        (7380, "2h03m"),
    ],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_stats_before_the_first_chunk_has_no_rate_or_eta():
    stats = Stats(Clock())
    stats.segmented(1, 10)
    assert "? chunks/min" in stats.figures() and stats.figures().endswith("ETA ?")
