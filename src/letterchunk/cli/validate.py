"""``letterchunk validate PATH... [--stage segmented|enriched] [--json]``.

Human output (stdout): one line per violation, ``file:line chunk_id field severity code
message``, then a summary line.  ``--json`` prints one JSON object instead.  Exit 0 when there is
no error-level violation, 1 when there is, 2 when an input is unusable (missing path, empty,
binary, not JSONL, a folder without chunk files).

``--print-schema`` writes the canonical JSON Schema; the committed ``schemas/chunk.schema.json``
is regenerated with ``letterchunk validate --print-schema > schemas/chunk.schema.json``
(tests/test_schema.py fails when it drifts from the models).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from letterchunk.cli import COMMAND_HELP, EXIT_INVALID, EXIT_OK, EXIT_USAGE, HelpFormatter, err
from letterchunk.contract.rules import VALIDATOR_RULES
from letterchunk.contract.schema import json_schema_text
from letterchunk.contract.validate import STAGES, Violation, validate_paths
from letterchunk.errors import InputError
from letterchunk.io import write_stream
from letterchunk.layout import REVIEWS_FILE
from letterchunk.review.apply import folder_reviews
from letterchunk.review.records import ReviewFileError

EXAMPLES = """\
Examples:
  letterchunk validate out/
  letterchunk validate out/1977.jsonl --stage enriched --errors-only
  letterchunk validate out/ --stage enriched --json > violations.json
  letterchunk validate --list-rules

exit codes: 0 no errors, 1 error-level violations, 2 unusable input
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "validate",
        help=COMMAND_HELP["validate"],
        description=(
            "Validate chunk JSONL files (or folders of them) against the canonical schema "
            "and every rule on values, sizes, links and boundaries (list them with "
            "--list-rules).  The cleaned text is read from metadata.source_file beside each "
            "JSONL, the evidence from YYYY.evidence.jsonl."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="chunk JSONL file, or a folder: every *.jsonl in it except "
        "*.evidence.jsonl and *.report.jsonl",
    )
    p.add_argument(
        "--stage",
        choices=STAGES,
        default="segmented",
        help="segmented: semantic fields may be empty (default); enriched: they must be filled "
        "and grounded in the chunk text",
    )
    p.add_argument("--json", action="store_true", help="print one machine-readable JSON object")
    p.add_argument("--errors-only", action="store_true", help="list only error-level violations")
    p.add_argument(
        "--list-rules", action="store_true", help="print every rule code and exit (PATH ignored)"
    )
    p.add_argument(
        "--print-schema",
        action="store_true",
        help="print the canonical chunk JSON Schema and exit (PATH ignored); regenerate the "
        "committed file with: letterchunk validate --print-schema > schemas/chunk.schema.json",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.print_schema:
        write_stream(sys.stdout, json_schema_text())
        return EXIT_OK
    if args.list_rules:
        if args.json:
            rules = {
                code: {"severity": r.severity, "description": r.description, "kind": r.kind}
                for code, r in VALIDATOR_RULES.items()
            }
            write_stream(sys.stdout, json.dumps(rules, indent=2, ensure_ascii=False) + "\n")
        else:
            write_stream(
                sys.stdout,
                "".join(
                    f"{code:34} {r.severity:7} {r.kind:10} {r.description}\n"
                    for code, r in VALIDATOR_RULES.items()
                ),
            )
        return EXIT_OK
    if not args.paths:
        err("validate: give at least one PATH (a chunk JSONL file or a folder of them)")
        return EXIT_USAGE
    report = validate_paths(args.paths, stage=args.stage)
    shown = report.errors if args.errors_only else report.violations
    errors, warnings = len(report.errors), len(report.warnings)
    reviews, unreadable = _reviews(args.paths)
    if report.fatal or unreadable:
        exit_code = EXIT_USAGE
    elif errors:
        exit_code = EXIT_INVALID
    else:
        exit_code = EXIT_OK
    # one write for the whole output: a reader that stops early (`| head`) ends it quietly
    if args.json:
        out = (
            json.dumps(
                {
                    "stage": args.stage,
                    "files": report.files,
                    "chunks": report.chunks,
                    "errors": errors,
                    "warnings": warnings,
                    "exit_code": exit_code,
                    "counts_by_code": _counts(report.violations),
                    "violations": [v.to_dict() for v in shown],
                    "reviews": reviews,
                },
                ensure_ascii=False,
                indent=1,
            )
            + "\n"
        )
    else:
        out = (
            "".join(f"{v}\n" for v in shown)
            + _review_text(reviews)
            + (
                f"{len(report.files)} file(s), {report.chunks} chunk(s), stage {args.stage}: "
                f"{errors} error(s), {warnings} warning(s)\n"
            )
        )
    write_stream(sys.stdout, out)
    for v in report.fatal:
        err(v.message if v.file and v.message.startswith(v.file) else f"{v.file}: {v.message}")
    for message in unreadable:
        err(message)
    return exit_code


def _reviews(paths: Iterable[str]) -> tuple[dict[str, dict], list[str]]:
    """Per folder holding a reviews.jsonl: its decisions in force, how many are applied, and
    each one not applied (stale, refused, waiting) with why; and the messages of reviews files
    that cannot be read (a corrupt line, named)."""
    found: dict[str, dict] = {}
    unreadable: list[str] = []
    for p in map(Path, paths):
        if not (p.is_dir() and (p / REVIEWS_FILE).is_file()):
            continue
        try:
            state = folder_reviews(p)
        except (ReviewFileError, InputError) as exc:
            unreadable.append(str(exc))
            continue
        found[str(p / REVIEWS_FILE)] = {
            "in_force": state.in_force,
            "applied": len(state.applied),
            "unapplied": [s.to_dict() for s in state.unapplied],
        }
    return found, unreadable


def _review_text(reviews: dict[str, dict]) -> str:
    lines = []
    for path, state in reviews.items():
        for u in state["unapplied"]:
            lines.append(
                f"{path} {u['kind']} review {u['letter']} {u['chunk_id']} {u['field']}: "
                f"{u['reason']}\n"
            )
        lines.append(
            f"{path}: {state['in_force']} decision(s) in force, {state['applied']} applied, "
            f"{len(state['unapplied'])} not applied\n"
        )
    return "".join(lines)


def _counts(violations: Iterable[Violation]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in violations:
        counts[v.code] = counts.get(v.code, 0) + 1
    return dict(sorted(counts.items()))
