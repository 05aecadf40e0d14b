"""Nothing already produced or paid for is lost, whatever the user's folder holds.

Each class runs through the real CLI (and the Python API where it has the same entry) against
tests/fake_openai.py on 127.0.0.1:

* two letters that would be written to one output file (one year): refused with exit 2 by
  ``run``, ``batch submit``-free ``letterchunk.run`` and ``segment`` alike, before any request;
* ``segment`` over an output file that holds enriched chunks, or that is not a chunk file:
  refused, the file byte-identical, unless ``--overwrite``;
* a halt on a letter's first chunk: the letter is written as segmented (the message says so and
  is true), and ``run.json`` lists every letter of the run, those never reached included;
* answers of a chunk that stayed invalid are not replayed from the cache on a rerun (they are
  kept aside; ``--cache offline`` still replays them);
* a run that fails during the yes/no questions counts every question the server answered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import letterchunk
from fake_openai import refusal
from letterchunk.cli import main
from letterchunk.errors import InputError
from test_fault_matrix import Script, valid_for

ROOT = Path(__file__).resolve().parents[1]
LETTERS = ROOT / "corpus" / "letters"


@pytest.fixture
def backend(fake_server):
    """``backend(default=None, judge=None)`` -> a started FakeOpenAI, env pointed at it."""
    return lambda default=None, judge=None: fake_server(default or Script({}), judge)


def _snapshot(folder: Path) -> dict[str, bytes]:
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def _summaries(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(x)["metadata"]["contextual_summary"] for x in lines if x.strip()]


# --------------------------------------------------------------------- one year, two letters

# names a user gives a second copy of a letter: each is read as the same year
SECOND_NAMES = ["1977 (copy).txt", "1977-copy.txt", "1977_v2.txt", "1977 final.txt"]


def _two_of_one_year(folder: Path, second: str, *, edit: bool) -> Path:
    folder.mkdir()
    text = (LETTERS / "1977.txt").read_text(encoding="utf-8")
    (folder / "1977.txt").write_text(text, encoding="utf-8")
    # a different text of the same year (an edited copy) is refused just the same
    other = text.replace("Berkshire", "Berkshire Hathaway", 3) if edit else text
    (folder / second).write_text(other, encoding="utf-8")
    return folder


@pytest.mark.parametrize("second", SECOND_NAMES)
@pytest.mark.parametrize("edit", [False, True])
def test_run_refuses_two_letters_of_one_year_before_any_request(
    tmp_path, capsys, backend, second, edit
):
    folder = _two_of_one_year(tmp_path / "letters", second, edit=edit)
    out = tmp_path / "out"
    server = backend()
    code = main(["run", str(folder), "--out", str(out), "--cache", "off"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert second in err and "1977.txt" in err and "one letter per year" in err
    assert "Traceback" not in err
    assert len(server.all_chat_requests) == 0
    assert not list(out.glob("*.jsonl"))

    # the Python API refuses the same way
    with pytest.raises(InputError, match="one letter per year"):
        letterchunk.run([folder], tmp_path / "api", cache="off")
    assert len(server.all_chat_requests) == 0

    # segment names the same two files (it writes the first, refuses the second)
    code = main(["segment", str(folder), "--out", str(tmp_path / "seg"), "--quiet"])
    assert code == 2 and "one letter per year" in capsys.readouterr().err


# --------------------------------------------------------------------- segment over enriched


def _enriched_out(tmp_path: Path, backend) -> Path:
    out = tmp_path / "out"
    backend()
    code = main(["run", str(LETTERS / "1977.txt"), "--out", str(out), "--cache", "off", "-q"])
    assert code == 0
    assert all(_summaries(out / "1977.jsonl"))
    return out


def _partly_enriched(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    segmented = tmp_segment(path.parent.parent)
    path.write_text("\n".join([lines[0], *segmented[1:]]) + "\n", encoding="utf-8")


def tmp_segment(base: Path) -> list[str]:
    seg = base / "segmented-copy"
    assert main(["segment", str(LETTERS / "1977.txt"), "--out", str(seg), "-q"]) == 0
    return (seg / "1977.jsonl").read_text(encoding="utf-8").splitlines()


# what a YYYY.jsonl in the --out folder may hold that segmenting over it would lose
DAMAGE = {
    "enriched": lambda p: None,
    "one chunk enriched": _partly_enriched,
    "binary": lambda p: p.write_bytes(os.urandom(256) + b"\xff\xfe"),
    "not chunks": lambda p: p.write_text('{"my": "notes"}\n', encoding="utf-8"),
    "text": lambda p: p.write_text("notes I keep here\n", encoding="utf-8"),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_segment_never_replaces_work_it_cannot_redo(tmp_path, capsys, backend, kind):
    out = _enriched_out(tmp_path, backend)
    DAMAGE[kind](out / "1977.jsonl")
    before = _snapshot(out)
    capsys.readouterr()
    code = main(["segment", str(LETTERS / "1977.txt"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert str(out / "1977.jsonl") in err and "--overwrite" in err and "Traceback" not in err
    assert _snapshot(out) == before  # nothing replaced, the cleaned text included

    # asked to, it overwrites: the folder then holds the segmented letter
    assert main(["segment", str(LETTERS / "1977.txt"), "--out", str(out), "--overwrite"]) == 0
    assert not any(_summaries(out / "1977.jsonl"))


def test_segment_over_segmented_output_replaces_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["segment", str(LETTERS / "1977.txt"), "--out", str(out), "-q"]) == 0
    first = _snapshot(out)
    assert main(["segment", str(LETTERS / "1977.txt"), "--out", str(out), "-q"]) == 0
    assert _snapshot(out) == first


def test_segment_refuses_a_fifo_in_place_of_the_chunk_file(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "1977.jsonl")
    code = main(["segment", str(LETTERS / "1977.txt"), "--out", str(out)])  # must not block
    assert code == 2 and "not a regular file" in capsys.readouterr().err


# --------------------------------------------------------------------- halt on a first chunk


def _always_refuse(request: dict):
    return refusal()


@pytest.mark.parametrize(
    "letters", [["1977.txt"], ["1977.txt", "1978.txt"], ["1978.txt", "1977.txt"]]
)
def test_halt_on_a_first_chunk_writes_the_letter_and_lists_every_letter(
    tmp_path, capsys, backend, letters
):
    out = tmp_path / "out"
    server = backend(default=_always_refuse)
    paths = [str(LETTERS / n) for n in letters]
    code = main(["run", *paths, "--out", str(out), "--cache", "off", "--max-attempts", "1"])
    err = capsys.readouterr().err
    assert code == 3, err
    first = letters[0].removesuffix(".txt")
    assert f"kept as segmented in {out / (first + '.jsonl')}" in err
    # what the message says is true: the letter is on disk as segmented
    seg = tmp_path / "seg"
    assert main(["segment", paths[0], "--out", str(seg), "-q"]) == 0
    assert (out / f"{first}.jsonl").read_bytes() == (seg / f"{first}.jsonl").read_bytes()
    assert main(["validate", str(out / f"{first}.jsonl"), "--stage", "segmented", "-q"]) == 0

    ledger = json.loads((out / "run.json").read_text())
    years = [n.removesuffix(".txt") for n in letters]
    assert sorted(ledger["letters"]) == sorted(years)  # every letter, reached or not
    assert ledger["incomplete_letters"] == [first]
    assert ledger["not_started_letters"] == sorted(years[1:])
    for later in years[1:]:
        assert ledger["letters"][later]["state"] == "not_started"
        assert f"letter {later} not started" in err
    assert ledger["totals"]["requests"] == len(server.all_chat_requests)

    # enrich finishes the halted letter; the same command finishes the run
    backend()
    capsys.readouterr()
    assert main(["enrich", str(out), "--cache", "off", "-q"]) == 0
    assert all(_summaries(out / f"{first}.jsonl"))
    assert main(["run", *paths, "--out", str(out), "--cache", "off", "-q"]) == 0
    for year in years:
        assert all(_summaries(out / f"{year}.jsonl"))


def test_a_halt_over_finished_output_leaves_it_and_says_so(tmp_path, capsys, backend):
    out = _enriched_out(tmp_path, backend)
    before = _snapshot(out)
    backend(default=_always_refuse)
    capsys.readouterr()
    code = main(["run", str(LETTERS / "1977.txt"), "--out", str(out), "--cache", "off"])
    err = capsys.readouterr().err
    assert code == 3
    assert "its files were left as they were" in err
    after = _snapshot(out)
    for name in ("1977.jsonl", "1977.evidence.jsonl", "1977_cleaned.txt"):
        assert after[name] == before[name]


# --------------------------------------------------------------------- cached failures


@pytest.mark.parametrize("first_attempts", [1, 2])
@pytest.mark.parametrize("rerun_attempts", [1, 6])
def test_cached_failures_do_not_answer_a_rerun(
    tmp_path, capsys, backend, first_attempts, rerun_attempts
):
    cache = tmp_path / "cache"
    out = tmp_path / "out"
    letter = str(LETTERS / "1977.txt")
    common = ["--out", str(out), "--cache-dir", str(cache)]
    backend(default=_always_refuse)
    code = main(["run", letter, *common, "--max-attempts", str(first_attempts), "-q"])
    assert code == 3

    # offline replays the run exactly, its failures included, and sends nothing
    server = backend(default=_always_refuse)
    code = main(
        ["run", letter, *common, "--cache", "offline", "--max-attempts", str(first_attempts), "-q"]
    )
    assert code == 3 and len(server.all_chat_requests) == 0

    # the server is healthy now: the failed chunk is asked again, not fed its old refusals
    server = backend()
    capsys.readouterr()
    code = main(["run", letter, *common, "--max-attempts", str(rerun_attempts)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert server.chat_count >= 1
    assert all(_summaries(out / "1977.jsonl"))

    # and the finished run is answered by the cache from now on
    server = backend(default=_always_refuse)
    assert main(["run", letter, *common, "-q"]) == 0
    assert len(server.all_chat_requests) == 0


# --------------------------------------------------------------------- counted on failure


def test_questions_before_a_failure_are_counted(tmp_path, capsys, backend, monkeypatch):
    """A backend lost during a chunk's yes/no questions: run.json still counts every request
    and token the server served, questions included."""
    answered = {"n": 0}

    def judge(body: dict) -> float:
        answered["n"] += 1
        if answered["n"] > 2:
            raise ConnectionError("the server went away")  # the handler fails the request
        return 0.9

    def confessing(request: dict):
        return valid_for(request)

    server = backend(default=confessing, judge=judge)
    out = tmp_path / "out"
    code = main(
        ["run", str(LETTERS / "1977.txt"), "--out", str(out), "--cache", "off", "--retries", "0"]
    )
    assert code == 2  # the backend is gone (the fake server logs its own traceback)
    ledger = json.loads((out / "run.json").read_text())
    assert ledger["totals"]["questions"] >= 2
    served = server.usage_total
    assert ledger["totals"]["prompt_tokens"] == served.prompt_tokens
    assert ledger["totals"]["completion_tokens"] == served.completion_tokens


@pytest.mark.parametrize("flag", ["--timeout", "--retries", "--context-tokens"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "1e999"])
def test_numeric_run_options_refuse_nan_and_infinity(tmp_path, capsys, flag, value):
    """Integer options are refused by the parser (its usage line, exit 2), float ones by the
    option check: neither reaches a request."""
    out = tmp_path / "out"
    try:
        code = main(["run", str(LETTERS / "1977.txt"), "--out", str(out), f"{flag}={value}"])
    except SystemExit as exc:  # argparse's own refusal: usage and message on stderr
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert flag in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


# --------------------------------------------------------------------- closed pipes

PIPED = (
    [["--help"], ["--version"]]
    + [[c, "--help"] for c in main.__globals__["COMMANDS"]]
    + [
        ["validate", "--list-rules"],
        ["validate", "--print-schema"],
        ["validate", "SEG"],
        ["validate", "SEG", "--json"],
        ["analyze", "SEG"],
    ]
)


@pytest.fixture(scope="module")
def seg_folder(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("seg")
    assert main(["segment", str(LETTERS / "1977.txt"), "--out", str(out), "-q"]) == 0
    return out


@pytest.mark.parametrize("argv", PIPED, ids=" ".join)
def test_a_reader_that_closes_early_gets_no_traceback(seg_folder, argv):
    """Every command's output into a pipe whose reader has gone (`| head -0`): exit 141 (128 +
    SIGPIPE, as a shell's own tools), nothing on stderr (no traceback, no "Exception
    ignored")."""
    args = [str(seg_folder) if a == "SEG" else a for a in argv]
    proc = subprocess.Popen(
        [sys.executable, "-m", "letterchunk", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before the first byte
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert code == 141, err


def test_the_progress_line_says_which_request_is_waited_on_and_why():
    from letterchunk.cli.progress import Stats

    stats = Stats()
    stats.segmented(1, 7)
    assert "waiting" not in stats.line()
    why = "the embedded server is still working on it (GET /slots: 1 of 1 slot(s) processing)"
    stats.waiting = lambda: {"1977-S1-T1-001": why}
    assert stats.line().endswith(f"; waiting on 1977-S1-T1-001: {why}")


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: (d / "1977.jsonl").write_bytes(b"\xff\xfe" + os.urandom(64)),
        lambda d: (d / "1977.jsonl").write_text('{"chunk_id": ' + "9" * 5000 + "}\n"),
        lambda d: (d / "1977_cleaned.txt").write_bytes(b"\x00\x01binary"),
        lambda d: (d / "1977_cleaned.txt").unlink(),
    ],
    ids=["binary chunks", "huge integer", "binary cleaned text", "cleaned text missing"],
)
def test_enrich_names_an_unusable_folder_before_any_backend_starts(
    tmp_path, capsys, monkeypatch, damage
):
    """No backend is configured (the embedded default, not installed in CI): the message is
    about the file, not about starting a server."""
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LETTERCHUNK_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "out"
    assert main(["segment", str(LETTERS / "1977.txt"), "--out", str(out), "-q"]) == 0
    damage(out)
    before = _snapshot(out)
    capsys.readouterr()
    code = main(["enrich", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "1977" in err and "llama" not in err and "Traceback" not in err
    assert _snapshot(out) == before
