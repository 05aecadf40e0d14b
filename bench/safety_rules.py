"""How often each safety rule fires on the recorded answers: the false-positive rate, expected 0.

    python bench/safety_rules.py                   # every cassettes/YYYY.yaml
    python bench/safety_rules.py 1991              # one letter
    python bench/safety_rules.py --also out/       # and enriched chunk files written elsewhere
    python bench/safety_rules.py --before ff59383  # compare with the rules of another revision

No shipped letter holds an instruction-like sentence and no recorded answer obeyed one, so every
time a safety rule (``letterchunk.contract.semantic_checks.SAFETY_CODES``) fires on them it is a
false positive, and a false positive costs re-asks and can fail a chunk that was right.

Each letter with a cassette is replayed as ``tests/test_cassettes.py`` replays it (record mode
none, body matching, no model, no network).  Two sets are checked:

* **answers**: every candidate chunk the run validated (each first answer and each re-ask's
  merged answer), with the letter's context, so a rule that would have sent the run off its
  recorded path is counted even where a later answer hid it;
* **written**: the enriched chunks the run wrote, validated as ``letterchunk validate --stage
  enriched`` does (the letter rules too: ``injection.duplicate_summary`` needs the whole letter).

The "before" columns run the rules of ``--before`` (a git revision; default the last commit
before these rules changed) on the same chunks: ``injection.obeyed`` and
``injection.repeated_value`` then existed, the other two did not ("-").  Exit 1 when a rule of
the current code fires anywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from letterchunk.contract.semantic_checks import SAFETY_CODES, check_grounding, check_injection
from letterchunk.contract.validate import validate_path
from letterchunk.contract.violations import CheckContext
from letterchunk.llm.replay import replayed_client
from letterchunk.repair import reask
from letterchunk.runner import pipeline
from letterchunk.runner.pipeline import RunOptions, run_paths

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "ff59383"  # the last commit before the safety rules changed
SOURCE = "src/letterchunk/contract/semantic_checks.py"


def rules_at(revision: str) -> ModuleType | None:
    """The semantic-check module as it was at ``revision`` (None when git cannot give it)."""
    try:
        text = subprocess.run(
            ["git", "show", f"{revision}:{SOURCE}"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    spec = importlib.util.spec_from_loader(f"semantic_checks_at_{revision}", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(text, f"{revision}:{SOURCE}", "exec"), module.__dict__)
    return module


@contextlib.contextmanager
def checked_candidates() -> Iterator[list[tuple[Any, Any]]]:
    """Every ``(chunk, letter context)`` the run validates, in order, while the block runs."""
    seen: list[tuple[Any, Any]] = []
    modules = (pipeline, reask)
    originals = [m.validate_chunk for m in modules]

    def spy(original: Any) -> Any:
        def validate_chunk(chunk: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append((chunk, kwargs.get("context")))
            return original(chunk, *args, **kwargs)

        return validate_chunk

    for m, original in zip(modules, originals, strict=True):
        m.validate_chunk = spy(original)  # type: ignore[attr-defined]
    try:
        yield seen
    finally:
        for m, original in zip(modules, originals, strict=True):
            m.validate_chunk = original  # type: ignore[attr-defined]


def replay(year: int, out: Path) -> list[tuple[Any, Any]]:
    """Replay ``year`` into ``out``; the candidates the run validated."""
    with (
        checked_candidates() as seen,
        replayed_client(ROOT / "cassettes" / f"{year}.yaml") as (client, _),
    ):
        run_paths(
            [ROOT / "corpus" / "letters" / f"{year}.txt"],
            out,
            client,
            RunOptions(workers=1, on_failure="skip", source_label="cassette"),
        )
    return seen


def now_codes(chunk: Any, context: Any) -> set[str]:
    ctx = CheckContext(context)
    return {v.code for v in [*check_injection(chunk, ctx), *check_grounding(chunk, ctx)]}


def before_codes(old: ModuleType | None, chunk: Any) -> set[str]:
    return set() if old is None else {v.code for v in old.check_injection(chunk)}


class Tally:
    """Distinct chunk ids each rule fired on, per set and per version."""

    def __init__(self) -> None:
        self.fired: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        self.checked: dict[str, set[str]] = defaultdict(set)
        self.answers = 0

    def add(self, what: str, version: str, chunk_id: str, codes: set[str]) -> None:
        for code in codes & set(SAFETY_CODES):
            self.fired[(what, version, code)].add(chunk_id)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("years", nargs="*", type=int, help="letters to replay (default: all)")
    parser.add_argument("--before", default=BEFORE, help=f"git revision (default {BEFORE})")
    parser.add_argument(
        "--also", nargs="*", default=[], type=Path, help="enriched chunk files/folders to check"
    )
    args = parser.parse_args(argv)
    years = args.years or sorted(int(p.stem) for p in (ROOT / "cassettes").glob("*.yaml"))
    old = rules_at(args.before)
    tally = Tally()
    with tempfile.TemporaryDirectory() as tmp:
        for year in years:
            out = Path(tmp) / str(year)
            for chunk, context in replay(year, out):
                tally.answers += 1
                tally.checked["answers"].add(chunk.chunk_id)
                tally.add("answers", "now", chunk.chunk_id, now_codes(chunk, context))
                tally.add("answers", "before", chunk.chunk_id, before_codes(old, chunk))
        folders = [Path(tmp) / str(y) for y in years] + list(args.also)
        for folder in folders:
            found = validate_path(folder, stage="enriched")
            by_chunk: dict[str, set[str]] = defaultdict(set)
            for v in found:
                if v.chunk_id:
                    by_chunk[v.chunk_id].add(v.code)
            for chunk in _enriched(folder):
                tally.checked["written"].add(chunk.chunk_id)
                tally.add("written", "now", chunk.chunk_id, by_chunk[chunk.chunk_id])
                tally.add("written", "before", chunk.chunk_id, before_codes(old, chunk))
    _print(tally, years, args.before if old is not None else None)
    return 1 if any(version == "now" for _, version, _ in tally.fired) else 0


def _enriched(folder: Path) -> list[Any]:
    """The enriched chunks (those with a summary) of every chunk file under ``folder``."""
    from letterchunk.contract.schema import Chunk

    files = [folder] if folder.is_file() else sorted(folder.glob("*.jsonl"))
    out = []
    for path in files:
        if path.name.endswith((".evidence.jsonl", ".report.jsonl")):
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                chunk = Chunk.model_validate_json(line)
                if chunk.metadata.contextual_summary.strip():
                    out.append(chunk)
    return out


def _print(tally: Tally, years: list[int], before: str | None) -> None:
    answers = len(tally.checked["answers"])
    written = len(tally.checked["written"])
    print(
        f"letters {', '.join(map(str, years))}: {tally.answers} answers checked "
        f"({answers} chunks), {written} enriched chunks written"
    )
    head = f"before ({before})" if before else "before (unavailable)"
    print(f"{'rule':<30} {head:>26}   {'now':>22}")
    print(f"{'':<30} {'answers':>12} {'written':>13}   {'answers':>10} {'written':>11}")
    introduced = {"injection.ungrounded_summary", "injection.duplicate_summary"}
    for code in SAFETY_CODES:
        cells = []
        for version in ("before", "now"):
            for what, total in (("answers", answers), ("written", written)):
                if version == "before" and (code in introduced or before is None):
                    cells.append("-")
                elif what == "answers" and code == "injection.duplicate_summary":
                    cells.append("n/a")  # a letter rule: one answer alone cannot break it
                else:
                    hit = tally.fired.get((what, version, code), set())
                    cells.append(f"{len(hit)}/{total}")
        print(f"{code:<30} {cells[0]:>12} {cells[1]:>13}   {cells[2]:>10} {cells[3]:>11}")
    for (what, version, code), ids in sorted(tally.fired.items()):
        print(f"  {version} {what} {code}: {', '.join(sorted(ids))}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
