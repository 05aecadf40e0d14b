"""Corpus statistics over an output folder (spec §C, docs/spec.md, adapted to letters).

``analyze_dir(DIR)`` reads every ``DIR/YYYY.jsonl`` chunk file (segmented or enriched), the
``DIR/YYYY.report.jsonl`` repair reports and ``DIR/run.json`` when present, and returns one
:class:`Analysis` (a JSON-shaped ``TypedDict``: the ``--json`` output):

* ``letters``       per year: chunks, by tier, by content type, tokens
* ``tiers`` / ``content_types``   counts over the folder
* ``tokens``        token_count distribution (n, min, median, p90, max, mean), overall and
                    per tier; p90 is the nearest-rank percentile (a value that occurs)
* ``size``          per tier, chunks under the spec's hard minimum (Tier 1: 250 tokens, Tier 2:
                    120) without ``standalone_exception``, and over the size target (2000 / 500)
* ``top``           the most frequent companies, people, metrics, buffett_concepts and themes
                    (counted once per chunk; ties broken alphabetically)
* ``principles``    principles by category
* ``mistake_confessions``  chunks tagged ``mistake_confession`` per year (every year listed)
* ``repairs``       from the report files, which keep every run's records (nothing is
                    overwritten): over the whole history, the records, runs, tokens and the
                    violations found and fixed by code per rule; the outcome of each reported
                    chunk from its latest run; ``null`` when there is no report
* ``run``           the totals of ``run.json`` when present

A line that is not a canonical chunk is skipped and listed under ``skipped`` (file, line,
reason) rather than failing the whole analysis; ``letterchunk validate`` says what is wrong.
:func:`render_text` formats the dict as the human tables the CLI prints.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from pydantic import ValidationError

from letterchunk.contract.jsontypes import JSONObject, JSONValue
from letterchunk.contract.schema import Chunk
from letterchunk.errors import InputError
from letterchunk.io import parse_json, read_json_objects, read_jsonl, read_utf8
from letterchunk.layout import (
    LETTER_CHUNKS,
    LETTER_REPORT,
    REVIEWS_FILE,
    RUN_FILE,
    LetterKey,
    chunk_stem,
)
from letterchunk.report.records import count_value, runs_by_chunk
from letterchunk.review.records import effective_reviews, read_reviews

__all__ = [
    "Analysis",
    "ChunkStats",
    "Distribution",
    "Repairs",
    "analyze_dir",
    "analyze_chunks",
    "distribution",
    "render_text",
    "MIN_TOKENS",
    "TARGET_MAX_TOKENS",
]

_CHUNK_FILE = LETTER_CHUNKS  # YYYY.jsonl, or YYYY-Lk.jsonl for a compilation's letter
_REPORT_FILE = LETTER_REPORT
MIN_TOKENS = {1: 250, 2: 120}  # spec §2.4 anti-orphan minimums (docs/spec.md)
TARGET_MAX_TOKENS = {1: 2000, 2: 500}  # spec §2.1/§2.2 size targets (docs/spec.md)
TOP_FIELDS = ("companies", "people", "metrics", "buffett_concepts", "themes")


class Distribution(TypedDict):
    """A token_count distribution; every value None (n 0) for no chunks."""

    n: int
    min: int | None
    median: float | None  # an int when it is whole
    p90: int | None
    max: int | None
    mean: float | None


class LetterStats(TypedDict):
    chunks: int
    tiers: dict[str, int]  # "1" -> chunks of Tier 1
    content_types: dict[str, int]
    tokens: int


class SizeStats(TypedDict):
    below_minimum: int
    above_target: int


class ChunkStats(TypedDict):
    """What :func:`analyze_chunks` counts (see the module docstring for each key)."""

    chunks: int
    enriched_chunks: int
    letters: dict[str, LetterStats]
    tiers: dict[str, int]
    content_types: dict[str, int]
    tokens: dict[str, Distribution]  # "all", "tier1", ...
    size: dict[str, SizeStats]  # "tier1", "tier2"
    top: dict[str, list[list[str | int]]]  # field -> [value, chunks] pairs, most first
    principles: dict[str, int]
    mistake_confessions: dict[str, int]


class RuleCounts(TypedDict):
    found: int
    fixed: int


class Repairs(TypedDict):
    """What the report files of a folder say, over every run they hold."""

    records: int
    runs: int
    tokens: dict[str, int]  # prompt_tokens, completion_tokens
    chunks: int
    outcomes: dict[str, int]  # outcome of each chunk's latest run -> chunks
    by_rule: dict[str, RuleCounts]


class CompilationLetter(TypedDict):
    letter: str  # YYYY-Lk
    date: str
    year: int
    lines: int | None  # None when the cleaned text cannot be read
    chunks: int


class Skipped(TypedDict):
    file: str
    line: int | None
    reason: str


class Analysis(ChunkStats):
    """:func:`analyze_dir`'s result: the chunk statistics, then the folder's own."""

    folder: str
    compilation_letters: list[CompilationLetter]
    repairs: Repairs | None
    run: JSONObject | None  # model, status and the totals of run.json, as written there
    skipped: list[Skipped]
    # per review field: decisions in force, accepted (the analyst kept the model's value) and
    # rejected (the analyst changed it); None without a reviews.jsonl
    reviews: dict[str, dict[str, int]] | None


def distribution(values: list[int]) -> Distribution:
    """n, min, median, p90 (nearest rank), max, mean; all None for an empty list."""
    if not values:
        return {"n": 0, "min": None, "median": None, "p90": None, "max": None, "mean": None}
    ordered = sorted(values)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]
    median = statistics.median(ordered)
    return {
        "n": len(ordered),
        "min": ordered[0],
        "median": int(median) if float(median).is_integer() else median,
        "p90": p90,
        "max": ordered[-1],
        "mean": round(statistics.fmean(ordered), 1),
    }


def _top(counter: Counter[str], n: int) -> list[list[str | int]]:
    return [[k, v] for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def _read_chunks(path: Path, skipped: list[Skipped]) -> list[Chunk]:
    """The chunks of one chunk file; a line that is not one is skipped and listed.  InputError
    when the file is not a regular file of UTF-8 text (the shared reader's verdict)."""
    chunks = []
    for line in read_jsonl(path):
        if line.blank:
            continue
        reason = line.error or ("" if isinstance(line.value, dict) else "not a JSON object")
        if not reason:
            try:
                chunks.append(Chunk.model_validate(line.value))
                continue
            except ValidationError as exc:
                reason = exc.errors()[0]["msg"]
            except RecursionError:
                reason = "a value nested too deeply"
        skipped.append({"file": path.name, "line": line.number, "reason": reason[:200]})
    return chunks


def _read_records(path: Path, skipped: list[Skipped]) -> list[JSONObject]:
    records, bad = read_json_objects(path, lenient=True)
    skipped.extend({"file": path.name, "line": n, "reason": reason} for n, reason in bad)
    return records


def analyze_chunks(by_year: Mapping[LetterKey, list[Chunk]], *, top: int = 10) -> ChunkStats:
    """Statistics of chunks grouped by letter (its year, or a compilation's stem ``YYYY-Lk``;
    no files involved)."""
    tiers: Counter = Counter()
    types: Counter = Counter()
    tokens_all: list[int] = []
    tokens_tier: dict[int, list[int]] = defaultdict(list)
    size: dict[int, SizeStats] = {t: {"below_minimum": 0, "above_target": 0} for t in (1, 2)}
    tops: dict[str, Counter[str]] = {f: Counter() for f in TOP_FIELDS}
    principles: Counter = Counter()
    letters: dict[str, LetterStats] = {}
    mistakes: dict[str, int] = {}
    enriched = 0
    for year in sorted(by_year, key=str):
        chunks = by_year[year]
        l_tiers: Counter = Counter()
        l_types: Counter = Counter()
        for c in chunks:
            m = c.metadata
            tier = m.chunk_tier
            l_tiers[tier] += 1
            l_types[m.content_type] += 1
            tokens_all.append(m.token_count)
            tokens_tier[tier].append(m.token_count)
            if tier in MIN_TOKENS:
                if m.token_count < MIN_TOKENS[tier] and not m.standalone_exception:
                    size[tier]["below_minimum"] += 1
                if m.token_count > TARGET_MAX_TOKENS[tier]:
                    size[tier]["above_target"] += 1
            enriched += int(bool(m.contextual_summary))
            for name in ("companies", "people", "metrics"):
                tops[name].update(set(getattr(m.entities, name)))
            tops["buffett_concepts"].update(set(m.buffett_concepts))
            tops["themes"].update(set(m.themes))
            principles.update(p.category for p in m.principles)
        tiers.update(l_tiers)
        types.update(l_types)
        mistakes[str(year)] = l_types.get("mistake_confession", 0)
        letters[str(year)] = {
            "chunks": len(chunks),
            "tiers": {str(t): l_tiers[t] for t in sorted(l_tiers)},
            "content_types": dict(sorted(l_types.items())),
            "tokens": sum(c.metadata.token_count for c in chunks),
        }
    return {
        "chunks": sum(tiers.values()),
        "enriched_chunks": enriched,
        "letters": letters,
        "tiers": {str(t): tiers[t] for t in sorted(tiers)},
        "content_types": dict(sorted(types.items())),
        "tokens": {
            "all": distribution(tokens_all),
            **{f"tier{t}": distribution(tokens_tier[t]) for t in sorted(tokens_tier)},
        },
        "size": {f"tier{t}": v for t, v in size.items() if tokens_tier.get(t)},
        "top": {f: _top(tops[f], top) for f in TOP_FIELDS},
        "principles": dict(sorted(principles.items())),
        "mistake_confessions": mistakes,
    }


def _repairs(records_by_file: dict[str, list[JSONObject]]) -> Repairs | None:
    if not records_by_file:
        return None
    found: Counter = Counter()
    fixed: Counter = Counter()
    latest: dict[str, str] = {}  # chunk id -> outcome of its latest run
    runs: set[JSONValue] = set()
    tokens = {"prompt_tokens": 0, "completion_tokens": 0}
    attempts = 0
    for records in records_by_file.values():
        for cid, chunk_runs in runs_by_chunk(r for r in records if r.get("chunk_id")).items():
            latest[cid] = str(chunk_runs[-1].outcome or "?")
        for r in records:
            attempts += 1
            runs.add(r.get("run_id"))
            usage = r.get("usage")
            usage = usage if isinstance(usage, dict) else {}
            for key in tokens:
                tokens[key] += count_value(usage.get(key))
            violations = r.get("violations")
            for v in violations if isinstance(violations, list) else []:
                code = str(v.get("code", "?")) if isinstance(v, dict) else str(v)
                found[code] += 1
                if isinstance(v, dict) and v.get("fixed"):
                    fixed[code] += 1
    outcomes = Counter(latest.values())
    return {
        "records": attempts,
        "runs": len(runs),
        "tokens": tokens,
        "chunks": len(latest),
        "outcomes": dict(sorted(outcomes.items())),
        "by_rule": {code: {"found": found[code], "fixed": fixed[code]} for code in sorted(found)},
    }


def analyze_dir(folder: str | Path, *, top: int = 10) -> Analysis:
    """Statistics of an output folder; see the module docstring for the keys."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(
            folder, "not a folder; pass the --out folder of `letterchunk run` or `segment`"
        )
    skipped: list[Skipped] = []
    by_year: dict[LetterKey, list[Chunk]] = {}
    reports: dict[str, list[JSONObject]] = {}
    for path in sorted(folder.iterdir()):
        if m := _CHUNK_FILE.match(path.name):
            stem = chunk_stem(path)
            by_year[int(m.group(1)) if stem.isdigit() else stem] = _read_chunks(path, skipped)
        elif _REPORT_FILE.match(path.name):
            reports[path.name] = _read_records(path, skipped)
    if not by_year:
        raise InputError(
            folder,
            "holds no YYYY.jsonl chunk files; run `letterchunk segment` or "
            f"`letterchunk run ... --out {folder}` first",
        )
    stats = analyze_chunks(by_year, top=top)
    letters = _compilation_letters(folder, by_year)
    repairs = _repairs(reports)
    run_file = folder / RUN_FILE
    run_totals: JSONObject | None = None
    if run_file.exists():
        try:
            run, _error = parse_json(read_utf8(run_file, "the run ledger run.json"))
            run_totals = {
                "model": run.get("model"),
                "status": run.get("status"),
                **(run.get("totals") or {}),
            }
        except (InputError, AttributeError, TypeError):
            skipped.append({"file": RUN_FILE, "line": None, "reason": "not a run ledger"})
    return Analysis(
        **stats,
        folder=str(folder),
        compilation_letters=letters,
        repairs=repairs,
        run=run_totals,
        skipped=skipped,
        reviews=review_counts(folder),
    )


def review_counts(folder: Path) -> dict[str, dict[str, int]] | None:
    """Per field, the analysts' decisions in force: reviewed, accepted (the model's value
    kept), rejected (changed).  None without ``reviews.jsonl``; ReviewFileError names a
    corrupt line."""
    if not (folder / REVIEWS_FILE).is_file():
        return None
    counts: dict[str, dict[str, int]] = {}
    for r in effective_reviews(read_reviews(folder)).values():
        if r.field == "chunk":
            continue
        row = counts.setdefault(r.field, {"reviewed": 0, "accepted": 0, "rejected": 0})
        row["reviewed"] += 1
        row["accepted" if r.value == r.model_value else "rejected"] += 1
    return dict(sorted(counts.items()))


def _compilation_letters(
    folder: Path, by_year: dict[LetterKey, list[Chunk]]
) -> list[CompilationLetter]:
    """The letters cut from compilations (``YYYY-Lk``): date, year, lines, chunks."""
    out: list[CompilationLetter] = []
    for stem, chunks in sorted(by_year.items(), key=lambda kv: str(kv[0])):
        if isinstance(stem, int) or not chunks:
            continue
        cleaned = folder / chunks[0].metadata.source_file
        lines = None
        with contextlib.suppress(InputError):  # missing or unreadable: no line count
            lines = read_utf8(cleaned, "the cleaned letter").count("\n")
        md = chunks[0].metadata
        out.append(
            {
                "letter": stem,
                "date": md.letter_date,
                "year": md.letter_year,
                "lines": lines,
                "chunks": len(chunks),
            }
        )
    return out


# ------------------------------------------------------------------------------ text


def _table(head: list[str], rows: list[list[object]]) -> list[str]:
    cells = [list(head)] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]

    def fmt(r: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=False))
        )

    return [fmt(cells[0]), *(fmt(r) for r in cells[1:])]


def render_text(a: Analysis) -> str:
    """The human report: one small table per section."""
    lines = _letters_text(a) + _compilation_text(a) + _tokens_text(a) + _enrichment_text(a)
    lines += _repairs_text(a)
    lines += _reviews_text(a)
    lines += _run_text(a)
    return "\n".join(lines) + "\n"


def _letters_text(a: Analysis) -> list[str]:
    """The headline and the per-letter table: chunks by tier and content type, tokens."""
    types = sorted(a["content_types"])
    tiers = sorted(a["tiers"])
    lines = [
        f"{a['chunks']} chunks in {len(a['letters'])} letters ({a['folder']}); "
        f"{a['enriched_chunks']} enriched",
        "",
    ]
    rows: list[list[object]] = []
    for year, d in a["letters"].items():
        rows.append(
            [
                year,
                d["chunks"],
                *(d["tiers"].get(t, 0) for t in tiers),
                *(d["content_types"].get(ct, 0) for ct in types),
                d["tokens"],
            ]
        )
    rows.append(
        [
            "total",
            a["chunks"],
            *(a["tiers"][t] for t in tiers),
            *(a["content_types"][ct] for ct in types),
            sum(d["tokens"] for d in a["letters"].values()),
        ]
    )
    return lines + _table(["letter", "chunks", *(f"T{t}" for t in tiers), *types, "tokens"], rows)


def _compilation_text(a: Analysis) -> list[str]:
    """The letters found in compilations, when there are any."""
    found = a.get("compilation_letters") or []
    if not found:
        return []
    rows: list[list[object]] = [
        [d["letter"], d["date"], d["year"], d["lines"], d["chunks"]] for d in found
    ]
    head = ["", f"letters found in compilations ({len(found)}):"]
    return head + _table(["letter", "date", "year", "lines", "chunks"], rows)


def _tokens_text(a: Analysis) -> list[str]:
    """The token_count distribution and the sizes against the targets."""
    lines = ["", "token_count distribution"]
    lines += _table(
        ["", "n", "min", "median", "p90", "max", "mean"],
        [
            [
                k,
                *(
                    v[c] if v[c] is not None else "-"
                    for c in ("n", "min", "median", "p90", "max", "mean")
                ),
            ]
            for k, v in a["tokens"].items()
        ],
    )
    if a["size"]:
        lines += [
            "",
            "size vs targets (tier 1: min 250, target max 2000; tier 2: 120 / 500 tokens)",
        ]
        lines += _table(
            ["", "below minimum", "above target"],
            [[k, v["below_minimum"], v["above_target"]] for k, v in a["size"].items()],
        )
    return lines


def _enrichment_text(a: Analysis) -> list[str]:
    """The top entities, concepts and themes, principles and confessions (when enriched)."""
    if a["enriched_chunks"] == 0:
        return [
            "",
            "entities, concepts, themes, principles and confessions: none, the chunks are not "
            "enriched yet (run `letterchunk run` or `letterchunk enrich` on them)",
        ]
    lines = [""]
    for field in TOP_FIELDS:
        items = a["top"][field]
        lines.append(
            f"top {field}: " + (", ".join(f"{k} ({v})" for k, v in items) if items else "(none)")
        )
    if a["principles"]:
        lines.append(
            "principles by category: " + ", ".join(f"{k} {v}" for k, v in a["principles"].items())
        )
    confessions = {y: n for y, n in a["mistake_confessions"].items() if n}
    lines += [
        "",
        f"mistake confessions per year (total {sum(confessions.values())}; years not listed: 0)",
    ]
    if confessions:
        lines += _table(["year", "chunks"], [[y, n] for y, n in confessions.items()])
    return lines


def _reviews_text(a: Analysis) -> list[str]:
    found = a.get("reviews")
    if not found:
        return []
    rows: list[list[object]] = [
        [f, c["reviewed"], c["accepted"], c["rejected"]] for f, c in found.items()
    ]
    return ["", "analysts' reviews (decisions in force):"] + _table(
        ["field", "reviewed", "accepted", "rejected"], rows
    )


def _repairs_text(a: Analysis) -> list[str]:
    """What the report files say: records, runs, tokens, outcomes and rules."""
    rep = a["repairs"]
    if rep is None:
        return ["", "repairs: no YYYY.report.jsonl in the folder"]
    lines = [
        "",
        f"repairs: {rep['records']} report record(s) from {rep['runs']} run(s) over "
        f"{rep['chunks']} chunk(s), {rep['tokens']['prompt_tokens']} prompt + "
        f"{rep['tokens']['completion_tokens']} completion tokens; outcomes of the "
        "latest run per chunk: "
        + (", ".join(f"{k} {v}" for k, v in rep["outcomes"].items()) or "none"),
    ]
    if rep["by_rule"]:
        lines += _table(
            ["rule", "found", "fixed by code"],
            [[k, v["found"], v["fixed"]] for k, v in rep["by_rule"].items()],
        )
    return lines


def _run_text(a: Analysis) -> list[str]:
    """The totals of run.json and the lines that were skipped."""
    lines: list[str] = []
    r = a["run"]
    if r:
        cost = "unknown" if r.get("cost_usd") is None else f"${r['cost_usd']:.4f}"
        lines += [
            "",
            f"run ({r.get('status')}, model {r.get('model')}): {r.get('requests', 0)} requests "
            f"({r.get('questions', 0)} of them yes/no questions), "
            f"{r.get('total_tokens', 0)} tokens, {r.get('cache_hits', 0)} cache hits, cost {cost}",
        ]
    if a["skipped"]:
        lines += [
            "",
            f"skipped {len(a['skipped'])} unreadable line(s); run `letterchunk validate` on them:",
        ]
        lines += [f"  {s['file']}:{s['line']}: {s['reason']}" for s in a["skipped"][:20]]
    return lines
