"""Shared test set-up: isolated environment and a small hand-built, valid letter.

Autouse: every test runs with no OPENAI_* / LETTERCHUNK_* variables from the developer's shell
(harness switches LETTERCHUNK_LIVE / LETTERCHUNK_CHROMIUM excepted) and with HOME /
XDG_CACHE_HOME pointing into its own tmp_path, so no test reads or writes user caches or keys.
Tests marked ``live`` are left alone.  Autouse too: no test can start the real embedded
llama-server, whatever is installed beside the tests (a test that would gets a clear failure).

Fixtures:
- ``make_chunk`` — factory ``make_chunk(chunk_id, text, start, **metadata) -> Chunk`` with
  counts, tier, span and year computed from its arguments (metadata overrides win).
- ``good_letter`` — a valid two-section letter: ``.text`` (cleaned text) and ``.chunks``
  (S1-T1-001, S2-T1-001, S2-T3-001 with a parsed table), stage ``segmented``.
- ``enriched_letter`` — the same letter with every semantic field filled and grounded, plus
  ``.evidence`` (chunk_id -> evidence record); valid at stage ``enriched``.
- ``write_letter`` — ``write_letter(letter, folder) -> Path`` writes 1987.jsonl,
  1987_cleaned.txt and (if the letter has evidence) 1987.evidence.jsonl.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from fake_openai import FakeOpenAI
from letterchunk.contract.schema import Chunk, dump_chunk
from letterchunk.tokens import count_tokens
from shared_run import RUN_DIR_ENV

# Bytecode caches on, whatever the shell says (PYTHONDONTWRITEBYTECODE is set on some CI
# machines): the suite starts a few hundred Python processes (CLI runs, kill -9 runs, servers)
# and each would compile letterchunk from source again, and every xdist worker would rewrite
# every test module's asserts again on every run.  The caches go to __pycache__ folders, which
# git ignores; the processes the tests start inherit the setting.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Hypothesis profiles (docs/development.md).  "ci", loaded when CI is set: a fixed seed, so a
# failure in CI is the same failure on any machine, and no example database (a fresh clone has
# none to read).  "dev": random seeds and the local database, which replays earlier failures
# first.  Each property test keeps its own example count.
hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
hypothesis_settings.register_profile("dev")
hypothesis_settings.load_profile(
    os.environ.get("LETTERCHUNK_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


_RUN_DIR = pytest.StashKey[str]()


def pytest_configure(config):
    """The controller (or the only process, without xdist) makes the folder the run's processes
    share (:mod:`shared_run`); the workers it starts inherit its name."""
    if hasattr(config, "workerinput") or os.environ.get(RUN_DIR_ENV):
        return  # a worker, or a pytest run inside a test: the outer run's folder serves
    folder = tempfile.mkdtemp(prefix="letterchunk-tests-")
    config.stash[_RUN_DIR] = folder
    os.environ[RUN_DIR_ENV] = folder


def pytest_unconfigure(config):
    folder = config.stash.get(_RUN_DIR, None)
    if folder is not None:
        os.environ.pop(RUN_DIR_ENV, None)
        shutil.rmtree(folder, ignore_errors=True)


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (addopts): two workers a core for the whole suite.  It waits on sleeps, child
    processes and servers much of its time (measured on 2 cores: 709 s of CPU in 481 s with two
    workers, 461 s with three, and 543 s with three against 495 s with four on the same code
    in one session), and the extra workers fill those waits.  The inner loop
    (``-m "not slow ..."``) leaves the waiting tests out: CPU-bound, it is fastest with a worker
    a core (53 s against 57-61 s with three).
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` or ``-n N`` still decide when given."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    cores = len(os.sched_getaffinity(0))
    return cores if "not slow" in (config.option.markexpr or "") else 2 * cores


# tests measured at 0.2 s or more (bench/suite_durations.py --write-slow): marked ``slow`` here,
# so the inner loop (-m "not slow and not replay and not browser") leaves them out
_SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def pytest_collection_modifyitems(config, items):
    slow = set()
    if _SLOW_LIST.is_file():
        slow = {
            line.strip()
            for line in _SLOW_LIST.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")
        }
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
        if _REPLAYING_FIXTURES.get(item.module.__name__.rsplit(".", 1)[-1], set()) & set(
            getattr(item, "fixturenames", ())
        ):
            item.add_marker(pytest.mark.replay)


# module-scoped fixtures that replay cassettes, by test module: a test that needs one is a
# replay test even when another test of the module paid for the replay in a measured run
_REPLAYING_FIXTURES = {
    "test_links": {"enriched"},
    "test_edges_prompt": {"replayed"},
    "test_export": {"enriched_dir"},
}


_ISOLATED_PREFIXES = ("OPENAI_", "LETTERCHUNK_")
# Switches of the test harness itself, not letterchunk configuration: kept.
_HARNESS_VARS = frozenset(
    {"LETTERCHUNK_LIVE", "LETTERCHUNK_CHROMIUM", "LETTERCHUNK_HYPOTHESIS_PROFILE"}
)
# Re-recording cassettes (tests/test_cassettes.py) starts the real server on purpose; read here,
# before the autouse fixture removes LETTERCHUNK_* variables from each test's environment.
_RECORDING = os.environ.get("LETTERCHUNK_RECORD") in ("1", "update")


@pytest.fixture(autouse=True)
def _isolated_env(request, monkeypatch, tmp_path):
    """No key, endpoint, model or cache setting leaks from the developer's shell into a test.

    Tests marked ``live`` (opt-in, LETTERCHUNK_LIVE=1) keep the real environment: they need the
    user's assembled model and llama-server.
    """
    if request.node.get_closest_marker("live"):
        return
    for name in list(os.environ):
        if name.startswith(_ISOLATED_PREFIXES) and name not in _HARNESS_VARS:
            monkeypatch.delenv(name, raising=False)
    home = tmp_path / "_home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))


@pytest.fixture(autouse=True)
def _no_real_llama_server(request, monkeypatch):
    """Finding the real llama-server fails the test; not finding it raises the usual ConfigError.

    So a test that forgets OPENAI_BASE_URL never starts a 1.1 GB model on a machine with the
    ``local`` extra installed.  Stand-in servers (``EmbeddedServer(binary=...)``) and tests that
    call ``find_server_binary`` by its imported name are unaffected.
    """
    if request.node.get_closest_marker("live") or _RECORDING:
        return
    from letterchunk.llm import backend

    real = backend.find_server_binary

    def guarded(env=None):
        path = real(env)
        pytest.fail(
            f"this test reached the real llama-server ({path}); set OPENAI_BASE_URL to a "
            "tests/fake_openai.py server, or give EmbeddedServer a stand-in binary"
        )

    monkeypatch.setattr(backend, "find_server_binary", guarded)


YEAR = 1987


def _chunk(chunk_id: str, text: str, start: int, **overrides) -> Chunk:
    tier = int(chunk_id.split("-T")[1][0])
    year = int(chunk_id[:4])
    md = {
        "letter_year": year,
        "letter_date": f"{year + 1}-02-29" if (year + 1) % 4 == 0 else f"{year + 1}-02-28",
        "source_file": f"{year}_cleaned.txt",
        "section_title": "Untitled section",
        "section_hierarchy": ["Letter Body"],
        "chunk_tier": tier,
        "parent_chunk_id": None,
        "child_chunk_ids": [],
        "content_type": "financial_table" if tier == 3 else "narrative",
        "contextual_summary": "",
        "has_table": False,
        "table_data": [],
        "has_financial_data": False,
        "entities": {"companies": [], "people": [], "metrics": []},
        "themes": [],
        "buffett_concepts": [],
        "principles": [],
        "temporal_references": {
            "primary_year": year,
            "comparison_years": [],
            "future_outlook": False,
        },
        "cross_references": {"related_sections_same_letter": [], "related_years": []},
        "retrieval_priority": "medium",
        "abstraction_level": "medium",
        "token_count": count_tokens(text),
        "char_count": len(text),
        "source_span": {"start_char": start, "end_char_exclusive": start + len(text)},
        "standalone_exception": False,
        "exception_reason": None,
        "boundary_note": None,
        "merged_from": [],
    }
    md.update(overrides)
    return Chunk.model_validate({"chunk_id": chunk_id, "content": text, "metadata": md})


@pytest.fixture
def make_chunk():
    return _chunk


@dataclass
class Letter:
    text: str
    chunks: list[Chunk]
    evidence: dict[str, dict] = field(default_factory=dict)

    def chunk(self, chunk_id: str) -> Chunk:
        return next(c for c in self.chunks if c.chunk_id == chunk_id)


_P1 = (
    "Our gain in net worth during 1987 was $464 million, or 19.5%. Over the last 23 years "
    "(that is, since present management took over), our per-share book value has grown from "
    "$19.46 to $2,477.47, or at a rate of 23.1% compounded annually. What counts, however, is "
    "intrinsic value, the figure indicating what all of our constituent businesses are rightly "
    "worth. Charlie Munger and I believe that the gap between the two figures widened slightly "
    "in 1987 compared with 1986."
)
_P2 = (
    "We will continue to report to you in this plain-spoken way, because we would want the same "
    "from you if our positions were reversed. Our managers run their businesses as if they owned "
    "all of them, and they answer to owners who expect candour rather than promotion. We never "
    "buy a business whose economics we cannot understand, and we stay inside our circle of "
    "competence even when a clever story tempts us to wander outside it. The approach may look "
    "dull in a roaring market, but it has served our shareholders well for more than two decades "
    "and we see no reason to abandon it now. Owners who join us should expect the same "
    "patience from us in the years ahead, whatever the market does in the meantime, and they "
    "should judge us by the progress of per-share value rather than by any single year."
)
_P3 = (
    "Our insurance business delivered an excellent year, and the table below shows how the "
    "main operations performed in 1987 and 1986."
)
_TABLE = (
    "                          1987        1986\n"
    "GEICO ..................  $ 120       $  95\n"
    "National Indemnity .....     45          30"
)
_P4 = (
    "GEICO was the star of the group, and its float continued to grow at no cost to us. "
    "Underwriting discipline matters more than volume: we would rather shrink than write "
    "business at inadequate prices, and our competitors often choose the opposite path. "
    "When prices recover, our capital will be ready to write as much business as the market "
    "offers, and we expect National Indemnity to be first in line. Until then, we will wait "
    "patiently and accept the smaller premium volume that our discipline implies. The "
    "economics of the business reward patience far more than activity, and in an industry "
    "that prizes growth this lesson is worth repeating often to our managers and owners alike."
)
_P5 = (
    "Float is money we hold but do not own. In an insurance operation, float arises because "
    "premiums are received before losses are paid, an interval that sometimes extends over many "
    "years. During that time, the insurer invests the money. If premiums exceed the total of "
    "expenses and eventual losses, we register an underwriting profit that adds to the "
    "investment income our float produces. That combination allows us to enjoy the use of free "
    "money and, better yet, get paid for holding it."
)


def _build_letter() -> Letter:
    h1, h2 = "Performance", "Insurance Operations"
    parts = [h1, _P1, _P2, h2, _P3, _TABLE, _P4, _P5]
    text = "\n\n".join(parts) + "\n"
    s1_start = 0
    s1_end = text.index(_P2) + len(_P2)
    s2_start = text.index(h2)
    s2_end = text.index(_P5) + len(_P5)
    t3_end = text.index(_P4) + len(_P4)
    t3_start = text.index(_P3)
    table = {
        "table_name": "",
        "summary": "",
        "columns": ["Operation", "1987", "1986"],
        "rows": [["GEICO", "$ 120", "$  95"], ["National Indemnity", "45", "30"]],
        "row_count": 2,
    }
    s1 = _chunk(f"{YEAR}-S1-T1-001", text[s1_start:s1_end], s1_start, section_title=h1)
    s2 = _chunk(
        f"{YEAR}-S2-T1-001",
        text[s2_start:s2_end],
        s2_start,
        section_title=h2,
        section_hierarchy=["Letter Body", "Insurance"],
        child_chunk_ids=[f"{YEAR}-S2-T3-001"],
    )
    t3 = _chunk(
        f"{YEAR}-S2-T3-001",
        text[t3_start:t3_end],
        t3_start,
        section_title=h2,
        section_hierarchy=["Tables", "Insurance"],
        parent_chunk_id=f"{YEAR}-S2-T1-001",
        has_table=True,
        table_data=[table],
        has_financial_data=True,
        retrieval_priority="high",
        abstraction_level="low",
    )
    return Letter(text=text, chunks=[s1, s2, t3])


def _enrich(letter: Letter) -> Letter:
    s1, s2, t3 = letter.chunks
    principle_quote = (
        "We never buy a business whose economics we cannot understand, and we stay inside our "
        "circle of competence even when a clever story tempts us to wander outside it."
    )

    def fill(chunk: Chunk, **md) -> Chunk:
        data = chunk.model_dump(mode="json")
        data["metadata"].update(md)
        return Chunk.model_validate(data)

    s1 = fill(
        s1,
        content_type="principle_statement",
        contextual_summary=(
            "Berkshire's 1987 gain in net worth and book value growth since 1964. "
            "Buffett explains why intrinsic value matters more than book value."
        ),
        themes=["performance", "investment philosophy"],
        buffett_concepts=["intrinsic value", "circle of competence"],
        entities={"companies": [], "people": ["Charlie Munger"], "metrics": ["book value"]},
        principles=[
            {"statement": "Invest only in businesses you understand.", "category": "valuation"}
        ],
        temporal_references={
            "primary_year": YEAR,
            "comparison_years": [1986],
            "future_outlook": False,
        },
        cross_references={
            "related_sections_same_letter": ["Insurance Operations"],
            "related_years": [1986],
        },
        retrieval_priority="high",
    )
    s2 = fill(
        s2,
        contextual_summary="How Berkshire's insurance operations performed in 1987.",
        themes=["insurance"],
        buffett_concepts=["underwriting discipline", "float economics"],
        entities={"companies": ["GEICO", "National Indemnity"], "people": [], "metrics": ["float"]},
        temporal_references={
            "primary_year": YEAR,
            "comparison_years": [1986],
            "future_outlook": True,
        },
        cross_references={"related_sections_same_letter": ["Performance"], "related_years": []},
    )
    t3_data = t3.model_dump(mode="json")["metadata"]["table_data"]
    t3_data[0].update(
        table_name="Insurance Operations Results",
        summary="Underwriting results of GEICO and National Indemnity in 1987 and 1986.",
    )
    t3 = fill(
        t3,
        contextual_summary=(
            "Table of insurance results by operation for 1987 and 1986, with comment."
        ),
        themes=["insurance"],
        entities={"companies": ["GEICO"], "people": [], "metrics": []},
        table_data=t3_data,
        temporal_references={
            "primary_year": YEAR,
            "comparison_years": [1986],
            "future_outlook": False,
        },
    )
    evidence = {
        s1.chunk_id: {
            "chunk_id": s1.chunk_id,
            "content_type_evidence": [principle_quote],
            "principle_evidence": [principle_quote],
        }
    }
    return Letter(text=letter.text, chunks=[s1, s2, t3], evidence=evidence)


@pytest.fixture
def good_letter() -> Letter:
    return _build_letter()


@pytest.fixture
def enriched_letter() -> Letter:
    return _enrich(_build_letter())


def _write_letter(letter: Letter, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    year = letter.chunks[0].metadata.letter_year
    (folder / f"{year}_cleaned.txt").write_text(letter.text, encoding="utf-8", newline="\n")
    path = folder / f"{year}.jsonl"
    path.write_text("".join(dump_chunk(c) + "\n" for c in letter.chunks), encoding="utf-8")
    if letter.evidence:
        (folder / f"{year}.evidence.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in letter.evidence.values()), encoding="utf-8"
        )
    return path


@pytest.fixture
def write_letter():
    return _write_letter


@pytest.fixture
def fake_server(monkeypatch):
    """``fake_server(default, judge=None)`` -> a started tests/fake_openai.py server that the
    CLI's environment points at (key, model, JSON_SCHEMA mode); every one is stopped after the
    test."""
    servers: list[FakeOpenAI] = []

    def start(default, judge=None) -> FakeOpenAI:
        server = FakeOpenAI(default=default, judge=judge).start()
        servers.append(server)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-test-key")
        monkeypatch.setenv("LETTERCHUNK_MODEL", "fake-model")
        monkeypatch.setenv("LETTERCHUNK_INSTRUCTOR_MODE", "JSON_SCHEMA")
        return server

    yield start
    for server in servers:
        server.stop()
