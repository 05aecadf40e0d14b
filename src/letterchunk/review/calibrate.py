"""Thresholds for a model from the analysts' yes/no decisions and the probabilities it gave.

Per judge (``confession_paragraph`` from the ``confession`` reviews, ``rule_sentence`` from
the ``rule`` reviews) the decisions in force that carry the model's recorded probability are
the labelled points ``(p, yes)``.  Of the midpoints between consecutive distinct
probabilities (and the ends), the threshold ``t`` (a decision is yes when ``p >= t``) with the
best score is chosen: F1 by default, F0.5 with ``target="precision"`` (precision weighs twice),
F2 with ``target="recall"``; a tie goes to the threshold nearest today's.  One number is fitted
per judge: nothing with more parameters is fitted on a few dozen labels.

Uncertainty: :data:`BOOTSTRAP_SAMPLES` resamples of the points (with replacement, a fixed
seed, so a rerun prints the same figures) give 95% percentile intervals for the precision and
recall at the chosen threshold and for the threshold itself (chosen again on each resample).

Minimum: :data:`MIN_REVIEWS` decisions per judge, with at least :data:`MIN_EACH` yes and no
among them.  The 95% interval of a proportion measured on ``n`` labels is about
``± 1.96·sqrt(p(1-p)/n)``, at worst ``± 0.98/sqrt(n)``; 40 labels bring that to ± 0.15, the
widest interval with which a threshold moved by calibration is still distinguishable from the
built-in one on our dev figures (their precision and recall moved by 0.1-0.2 between the
thresholds swept).  Below it a judge is left as it is and the report says how many more
decisions are needed.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from letterchunk.review.records import ReviewRecord
from letterchunk.review.thresholds import JUDGES, Judge, Thresholds

__all__ = [
    "BOOTSTRAP_SAMPLES",
    "MIN_EACH",
    "MIN_REVIEWS",
    "Calibration",
    "Interval",
    "JudgeCalibration",
    "Target",
    "calibrate",
    "choose_threshold",
    "labelled_points",
]

Target = Literal["precision", "recall", "f1"]
MIN_REVIEWS = 40
MIN_EACH = 5
BOOTSTRAP_SAMPLES = 1000
SEED = 20261129
_BETA = {"f1": 1.0, "precision": 0.5, "recall": 2.0}
_FIELD_JUDGE: dict[str, Judge] = {"confession": "confession_paragraph", "rule": "rule_sentence"}

Point = tuple[float, bool]


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    def to_dict(self) -> list[float]:
        return [round(self.low, 4), round(self.high, 4)]


@dataclass(frozen=True)
class Scores:
    precision: float
    recall: float
    f: float
    agreement: float  # share of decisions the threshold gets right


@dataclass(frozen=True)
class JudgeCalibration:
    """One judge: its points, and (when there are enough) the threshold chosen."""

    judge: Judge
    reviews: int
    yes: int
    current: float  # today's threshold
    at_current: Scores | None
    threshold: float | None = None  # None: too few decisions
    at_threshold: Scores | None = None
    threshold_interval: Interval | None = None
    precision_interval: Interval | None = None
    recall_interval: Interval | None = None
    needed: int = 0  # more decisions needed (0: enough)
    why: str | None = None  # why there is no threshold

    @property
    def ok(self) -> bool:
        return self.threshold is not None

    def to_dict(self) -> dict[str, object]:
        def scores(s: Scores | None) -> dict[str, float] | None:
            if s is None:
                return None
            return {
                "precision": round(s.precision, 4),
                "recall": round(s.recall, 4),
                "f": round(s.f, 4),
                "agreement": round(s.agreement, 4),
            }

        return {
            "judge": self.judge,
            "reviews": self.reviews,
            "yes": self.yes,
            "current_threshold": self.current,
            "at_current": scores(self.at_current),
            "threshold": None if self.threshold is None else round(self.threshold, 4),
            "at_threshold": scores(self.at_threshold),
            "threshold_interval": self.threshold_interval and self.threshold_interval.to_dict(),
            "precision_interval": self.precision_interval and self.precision_interval.to_dict(),
            "recall_interval": self.recall_interval and self.recall_interval.to_dict(),
            "needed": self.needed,
            "why": self.why,
        }


@dataclass(frozen=True)
class Calibration:
    target: Target
    run: dict[str, str]  # the identity calibrated
    judges: tuple[JudgeCalibration, ...]
    other_runs: int = 0  # decisions on another model's or prompts' output, not used
    notes: list[str] = field(default_factory=list)

    @property
    def chosen(self) -> dict[str, float]:
        return {j.judge: j.threshold for j in self.judges if j.threshold is not None}

    def to_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "run": self.run,
            "other_runs": self.other_runs,
            "judges": [j.to_dict() for j in self.judges],
        }


def labelled_points(
    reviews: Iterable[ReviewRecord], run: dict[str, str] | None = None
) -> tuple[dict[Judge, list[Point]], int]:
    """Per judge, ``(p, yes)`` of each yes/no decision in force with a recorded probability
    (of the run ``run`` when given: ``model`` and ``prompts_sha256``); and how many were on
    another run's output."""
    out: dict[Judge, list[Point]] = {j: [] for j in JUDGES}
    other = 0
    for r in reviews:
        judge = _FIELD_JUDGE.get(r.field)
        if judge is None or not isinstance(r.value, bool) or r.model_p is None:
            continue
        if run and any(r.run.get(k, "") != v for k, v in run.items() if v):
            other += 1
            continue
        out[judge].append((float(r.model_p), r.value))
    return out, other


def _from_counts(tp: int, fp: int, fn: int, tn: int, beta: float) -> Scores:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    b2 = beta * beta
    f = (1 + b2) * tp / ((1 + b2) * tp + b2 * fn + fp) if tp else 0.0
    total = tp + fp + fn + tn
    return Scores(precision, recall, f, (tp + tn) / total if total else 0.0)


def _split(points: Sequence[Point]) -> tuple[list[float], list[float]]:
    return sorted(p for p, y in points if y), sorted(p for p, y in points if not y)


def _at(yes: list[float], no: list[float], t: float, beta: float) -> Scores:
    """Scores of ``p >= t`` over sorted yes / no probabilities (two bisections)."""
    tp = len(yes) - bisect.bisect_left(yes, t)
    fp = len(no) - bisect.bisect_left(no, t)
    return _from_counts(tp, fp, len(yes) - tp, len(no) - fp, beta)


def _scores(points: Sequence[Point], t: float, beta: float) -> Scores:
    yes, no = _split(points)
    return _at(yes, no, t, beta)


def choose_threshold(points: Sequence[Point], target: Target, current: float) -> float:
    """The threshold with the best score (see the module docstring); ties: nearest
    ``current``.  One sweep down the sorted probabilities, counting as it goes."""
    beta2 = _BETA[target] ** 2
    ordered = sorted(points, key=lambda x: -x[0])
    total_yes = sum(1 for _, y in ordered if y)
    tp = fp = 0
    best_t = min(1.0, ordered[0][0] + 1e-6) if ordered else current
    best = (0.0, -abs(best_t - current))  # nothing predicted yes: F is 0
    i = 0
    while i < len(ordered):
        p = ordered[i][0]
        while i < len(ordered) and ordered[i][0] == p:  # a group of equal probabilities
            tp, fp = tp + ordered[i][1], fp + (not ordered[i][1])
            i += 1
        t = (p + ordered[i][0]) / 2 if i < len(ordered) else max(0.0, p - 1e-6)
        fn = total_yes - tp
        f = (1 + beta2) * tp / ((1 + beta2) * tp + beta2 * fn + fp) if tp else 0.0
        if (f, -abs(t - current)) > best:
            best, best_t = (f, -abs(t - current)), t
    return best_t


def _percentiles(values: list[float]) -> Interval:
    values = sorted(values)
    n = len(values)
    return Interval(values[int(0.025 * (n - 1))], values[int(round(0.975 * (n - 1)))])


def _judge(judge: Judge, points: list[Point], target: Target, current: float) -> JudgeCalibration:
    yes = sum(1 for _, y in points if y)
    beta = _BETA[target]
    base = JudgeCalibration(
        judge, len(points), yes, current, _scores(points, current, beta) if points else None
    )
    short = max(MIN_REVIEWS - len(points), 0)
    few = min(yes, len(points) - yes)
    if short or few < MIN_EACH:
        why = f"{len(points)} decision(s) with a probability, {MIN_REVIEWS} needed"
        if not short:
            why = f"{yes} yes and {len(points) - yes} no; at least {MIN_EACH} of each needed"
        needed = max(short, MIN_EACH - few)
        return JudgeCalibration(**{**base.__dict__, "needed": needed, "why": why})
    t = choose_threshold(points, target, current)
    rng = random.Random(SEED)
    ts, precisions, recalls = [], [], []
    for _ in range(BOOTSTRAP_SAMPLES):
        sample = [points[rng.randrange(len(points))] for _ in points]
        at = _scores(sample, t, beta)
        precisions.append(at.precision)
        recalls.append(at.recall)
        ts.append(choose_threshold(sample, target, current))
    return JudgeCalibration(
        **{
            **base.__dict__,
            "threshold": t,
            "at_threshold": _scores(points, t, beta),
            "threshold_interval": _percentiles(ts),
            "precision_interval": _percentiles(precisions),
            "recall_interval": _percentiles(recalls),
        }
    )


def calibrate(
    reviews: Iterable[ReviewRecord],
    current: Thresholds,
    *,
    target: Target = "f1",
    run: dict[str, str] | None = None,
) -> Calibration:
    """Each judge's threshold from the decisions in force ``reviews`` on the output of ``run``
    (see the module docstring), beside ``current``, the thresholds that run used."""
    points, other = labelled_points(reviews, run)
    judges = tuple(_judge(j, points[j], target, current.of(j)) for j in JUDGES)
    return Calibration(target, dict(run or {}), judges, other)
