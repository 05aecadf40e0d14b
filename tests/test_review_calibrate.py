"""calibrate: the threshold with the best score from reviewed yes/no decisions, its bootstrap
interval, the refusal below the minimum, and --write storing it per model identity."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from letterchunk.cli import main
from letterchunk.review.calibrate import (
    MIN_EACH,
    MIN_REVIEWS,
    calibrate,
    choose_threshold,
)
from letterchunk.review.records import append_review, new_record
from letterchunk.review.thresholds import BUILT_IN, thresholds_for

RUN = {"model": "gpt-4o-mini", "prompts_sha256": "abc"}


def _decision(p: float, yes: bool, field: str = "rule", run=RUN, i: int = 0):
    return new_record(
        chunk_id="1977-S1-T1-001",
        letter="1977",
        text_sha256="h",
        quote=f"Sentence {i}.",
        field=field,
        target=f"Sentence {i}.",
        model_value=p >= 0.7,
        model_p=p,
        threshold=0.7,
        decision="accept" if yes else "reject",
        value=yes,
        reviewer="ann",
        run=run,
    )


GAP = 0.03


def _separable(n: int, cut: float, seed: int = 1, noise: float = 0.0) -> list[tuple[float, bool]]:
    """``n`` probabilities, none within GAP of ``cut``, whose label is yes exactly above it
    (``noise``: the share of labels flipped)."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        p = round(rng.random(), 4)
        if abs(p - cut) < GAP:
            continue
        yes = p >= cut
        out.append((p, (not yes) if rng.random() < noise else yes))
    return out


@settings(max_examples=10, deadline=None)
@given(cut=st.floats(0.2, 0.8), seed=st.integers(0, 10_000))
def test_the_known_best_threshold_is_found_within_its_interval(cut, seed):
    points = _separable(80, cut, seed, noise=0.05)
    reviews = [_decision(p, y, i=i) for i, (p, y) in enumerate(points)]
    result = calibrate(reviews, BUILT_IN, run=RUN)
    rule = next(j for j in result.judges if j.judge == "rule_sentence")
    assert rule.ok and rule.threshold_interval is not None
    # the data place the best threshold anywhere in the gap around the cut
    assert rule.threshold_interval.low <= cut + GAP and cut - GAP <= rule.threshold_interval.high
    assert rule.precision_interval.low <= rule.at_threshold.precision <= 1.0


def test_a_clean_cut_is_found_exactly_between_its_neighbours():
    points = [(p / 100, p >= 60) for p in range(10, 100, 2)]
    assert choose_threshold(points, "f1", 0.7) == pytest.approx(0.59)
    assert choose_threshold([(0.5, True), (0.5, False)], "f1", 0.7) == pytest.approx(0.5 - 1e-6)


def test_precision_and_recall_targets_move_the_threshold_each_way():
    points = _separable(200, 0.5, noise=0.2)
    t_f1 = choose_threshold(points, "f1", 0.5)
    assert (
        choose_threshold(points, "precision", 0.5)
        >= t_f1
        >= choose_threshold(points, "recall", 0.5)
    )


def test_below_the_minimum_a_judge_says_how_many_more_and_has_no_threshold():
    few = [_decision(p, y, i=i) for i, (p, y) in enumerate(_separable(MIN_REVIEWS - 7, 0.5))]
    [conf, rule] = calibrate(few, BUILT_IN, run=RUN).judges
    assert conf.needed == MIN_REVIEWS and rule.needed == 7 and not rule.ok
    one_sided = [_decision(0.9, True, i=i) for i in range(MIN_REVIEWS)]
    [_, rule] = calibrate(one_sided, BUILT_IN, run=RUN).judges
    assert not rule.ok and rule.needed == MIN_EACH and "no" in (rule.why or "")


def test_decisions_on_another_models_output_are_not_used():
    mine = [_decision(p, y, i=i) for i, (p, y) in enumerate(_separable(50, 0.5))]
    theirs = [_decision(0.9, False, run={"model": "other", "prompts_sha256": "abc"})]
    result = calibrate(mine + theirs, BUILT_IN, run=RUN)
    assert result.other_runs == 1 and result.judges[1].reviews == 50


def _folder(tmp_path, n: int, cut: float):
    out = tmp_path / "out"
    out.mkdir()
    (out / "run.json").write_text(
        json.dumps({"model": RUN["model"], "identity": RUN}), encoding="utf-8"
    )
    for i, (p, y) in enumerate(_separable(n, cut)):
        append_review(out, _decision(p, y, field="confession", i=i))
    return out


def test_the_command_refuses_below_the_minimum_and_changes_nothing(tmp_path, capsys):
    out = _folder(tmp_path, 12, 0.4)
    assert main(["calibrate", str(out), "--write"]) == 2
    captured = capsys.readouterr()
    assert f"12 decision(s) with a probability, {MIN_REVIEWS} needed" in captured.out
    assert "review 28 more" in captured.out and "nothing was changed" in captured.err
    assert thresholds_for(RUN) == thresholds_for({})  # no file written


def test_the_command_writes_the_threshold_that_the_next_run_uses(tmp_path, capsys):
    out = _folder(tmp_path, 60, 0.4)
    assert main(["calibrate", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    conf = report["judges"][0]
    assert conf["judge"] == "confession_paragraph" and conf["reviews"] == 60
    assert conf["at_current"]["agreement"] < 1.0 and conf["threshold"] == pytest.approx(
        0.4, abs=0.03
    )
    assert report["judges"][1]["threshold"] is None  # no rule decisions
    assert main(["calibrate", str(out), "--write", "--target", "precision"]) == 0
    capsys.readouterr()
    found = thresholds_for(RUN)
    assert found.confession_paragraph == pytest.approx(0.4, abs=GAP)
    assert found.rule_sentence == BUILT_IN.rule_sentence
    assert found.source["rule_sentence"] == "built-in"
    assert thresholds_for({"model": "another"}) == BUILT_IN.__class__(
        BUILT_IN.confession_paragraph,
        BUILT_IN.rule_sentence,
        {"confession_paragraph": "built-in", "rule_sentence": "built-in"},
    )


def test_a_broken_thresholds_file_is_a_clear_error(tmp_path, monkeypatch):
    path = tmp_path / "t.json"
    path.write_text('{"thresholds": [{"model": "m", "rule_sentence": 7}]}', encoding="utf-8")
    monkeypatch.setenv("LETTERCHUNK_THRESHOLDS", str(path))
    from letterchunk.errors import ConfigError

    with pytest.raises(ConfigError, match="rule_sentence 7 of model 'm' is not a threshold"):
        thresholds_for({"model": "m"})
