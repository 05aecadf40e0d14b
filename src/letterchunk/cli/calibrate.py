"""`letterchunk calibrate DIR`: the judges' thresholds chosen from the analysts' reviews."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from letterchunk.cli import COMMAND_HELP, HelpFormatter
from letterchunk.errors import InputError
from letterchunk.io import write_stream
from letterchunk.review.calibrate import (
    MIN_REVIEWS,
    Calibration,
    Interval,
    JudgeCalibration,
    calibrate,
)
from letterchunk.review.folder import read_run, run_identity_of
from letterchunk.review.records import effective_reviews, read_reviews
from letterchunk.review.thresholds import thresholds_of_run, write_thresholds

EXAMPLES = """\
Examples:
  letterchunk calibrate out/
  letterchunk calibrate out/ --target precision --write
  letterchunk calibrate out/ --json > calibration.json

exit codes: 0 a threshold was chosen for at least one judge; 2 too few reviewed decisions
(the report says how many more), or an unusable folder or reviews file
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help=COMMAND_HELP["calibrate"],
        description=(
            "Read DIR/reviews.jsonl and, per judge (confession paragraph, rule sentence), choose "
            "the threshold with the best score from the analysts' yes/no decisions and the "
            "probabilities the model gave: precision and recall there with a bootstrap "
            f"interval, and the model's agreement with the analysts today. A judge with fewer "
            f"than {MIN_REVIEWS} reviewed decisions is left as it is. --write stores the "
            "thresholds for the model of DIR/run.json in the thresholds file "
            "(LETTERCHUNK_THRESHOLDS), which later runs of that model use."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("dir", metavar="DIR", help="output folder with reviews.jsonl and run.json")
    p.add_argument(
        "--target",
        choices=["precision", "recall", "f1"],
        default="f1",
        help="what the threshold favours: f1 (default), precision (F0.5) or recall (F2)",
    )
    p.add_argument(
        "--write",
        action="store_true",
        help="store the chosen thresholds for this model and prompts (the thresholds file)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    p.set_defaults(func=run)


def _interval(found: Interval | None) -> str:
    return f"[{found.low:.2f}, {found.high:.2f}]" if found else "-"


def _judge_lines(j: JudgeCalibration) -> list[str]:
    name = j.judge.replace("_", " ")
    lines = [f"{name}: {j.reviews} reviewed decision(s), {j.yes} yes"]
    if j.at_current is not None:
        c = j.at_current
        lines.append(
            f"  today's threshold {j.current:.2f}: agreement {c.agreement:.2f}, "
            f"precision {c.precision:.2f}, recall {c.recall:.2f}"
        )
    if j.threshold is None or j.at_threshold is None:
        lines.append(f"  not calibrated: {j.why}; review {j.needed} more")
        return lines
    a = j.at_threshold
    lines.append(
        f"  best threshold {j.threshold:.3f} {_interval(j.threshold_interval)}: "
        f"precision {a.precision:.2f} {_interval(j.precision_interval)}, "
        f"recall {a.recall:.2f} {_interval(j.recall_interval)}, agreement {a.agreement:.2f}"
    )
    return lines


def render(result: Calibration) -> str:
    lines = [
        f"model {result.run.get('model') or '?'} (prompts "
        f"{(result.run.get('prompts_sha256') or '?')[:12]}), target {result.target}"
    ]
    if result.other_runs:
        lines.append(
            f"{result.other_runs} decision(s) on another model's or prompts' output: unused"
        )
    for j in result.judges:
        lines += _judge_lines(j)
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    if not folder.is_dir():
        raise InputError(folder, "not a folder; pass the --out folder of `letterchunk run`")
    run_json = read_run(folder)
    identity = run_identity_of(run_json)
    reviews = list(effective_reviews(read_reviews(folder)).values())
    result = calibrate(reviews, thresholds_of_run(run_json), target=args.target, run=identity)
    if args.json:
        write_stream(sys.stdout, json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        write_stream(sys.stdout, render(result))
    if not result.chosen:
        if not args.quiet:
            print(
                "letterchunk: no judge has enough reviewed decisions; nothing was changed. "
                "Review more in `letterchunk review` and run calibrate again",
                file=sys.stderr,
            )
        return 2
    if args.write:
        counts: dict[str, int] = {j.judge: j.reviews for j in result.judges if j.ok}
        path = write_thresholds(identity, result.chosen, reviews=counts, folder=str(folder))
        if not args.quiet:
            print(f"letterchunk: thresholds written to {path}", file=sys.stderr)
    return 0
