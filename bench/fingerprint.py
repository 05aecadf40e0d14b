"""Fingerprint of everything letterchunk produces without a live model, to show that a
restructure changed no output byte.

Two parts, both deterministic:

* segment: every letter of ``corpus/letters``, the shared letters and the shared partnership
  compilation (when ``../shared`` is beside the checkout), each segmented and written as
  ``letterchunk segment`` writes it (chunk JSONL and the cleaned text);
* replay: every cassette under ``cassettes/`` replayed end to end (segment -> enrich -> validate
  -> repair) into an output folder, as ``tests/test_cassettes.py`` runs it.

Prints one sha256 per output file and one over all of them (a cassette that cannot replay,
because a prompt changed, gives a ``replay/YEAR:error`` line instead of its files); files
that carry the time of a run (run.json) are left out, and so are the run id and request times
of the repair report's lines.
Compare two commits by running it on each:

    python bench/fingerprint.py [--only segment|replay] > before.txt
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
# files a run writes that hold wall-clock times or the machine's paths, not the output itself
SKIP = {"run.json"}
# keys of a repair report's records that differ on every run (its id, the time a request took)
VOLATILE = ("run_id", "latency_s")


def _segment_sources() -> list[Path]:
    sources = [ROOT / "corpus" / "letters"]
    sources += [p for p in (SHARED / "letters", SHARED / "partnership") if p.is_dir()]
    return sources


def _stable_bytes(file: Path) -> bytes:
    """The file's bytes; a repair report's lines without the keys that differ on every run."""
    if not file.name.endswith(".report.jsonl"):
        return file.read_bytes()
    lines = []
    for line in file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for key in VOLATILE:
            record.pop(key, None)
        lines.append(json.dumps(record, sort_keys=True))
    return "\n".join(lines).encode()


def _digest_folder(folder: Path, prefix: str, out: dict[str, str]) -> None:
    for file in sorted(folder.rglob("*")):
        if file.is_file() and file.name not in SKIP:
            rel = file.relative_to(folder).as_posix()
            out[f"{prefix}/{rel}"] = hashlib.sha256(_stable_bytes(file)).hexdigest()


def segment_digests() -> dict[str, str]:
    """``letterchunk segment SOURCE --out TMP`` for each source folder, every file written."""
    from letterchunk.cli import main as cli

    out: dict[str, str] = {}
    for source in _segment_sources():
        with tempfile.TemporaryDirectory() as tmp:
            code = cli(["segment", str(source), "--out", tmp, "--quiet"])
            out[f"segment/{source.parent.name}/{source.name}:exit"] = str(code)
            _digest_folder(Path(tmp), f"segment/{source.parent.name}/{source.name}", out)
    return out


def replay_digests() -> dict[str, str]:
    from letterchunk.llm.replay import replayed_client
    from letterchunk.runner.pipeline import RunOptions, run_paths

    out: dict[str, str] = {}
    for cassette in sorted((ROOT / "cassettes").glob("*.yaml")):
        year = cassette.stem
        try:
            with tempfile.TemporaryDirectory() as tmp, replayed_client(cassette) as (client, _):
                run_paths(
                    [ROOT / "corpus" / "letters" / f"{year}.txt"],
                    tmp,
                    client,
                    RunOptions(workers=1, on_failure="skip", source_label="cassette"),
                )
                _digest_folder(Path(tmp), f"replay/{year}", out)
        except Exception as exc:  # a prompt the cassette lacks: say so, go on with the rest
            out[f"replay/{year}:error"] = type(exc).__name__
            print(f"replay/{year}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["segment", "replay"])
    args = parser.parse_args(argv)
    digests: dict[str, str] = {}
    if args.only in (None, "segment"):
        digests.update(segment_digests())
    if args.only in (None, "replay"):
        digests.update(replay_digests())
    for label, digest in digests.items():
        print(f"{digest}  {label}")
    total = hashlib.sha256("".join(f"{k}{v}" for k, v in digests.items()).encode()).hexdigest()
    print(f"{total}  ALL ({len(digests)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
