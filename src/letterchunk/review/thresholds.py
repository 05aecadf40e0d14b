"""The thresholds that turn the judges' yes-probabilities into decisions, per model.

Two judges decide with a threshold (:mod:`letterchunk.enrich.judges`): the confession
paragraph question (``confession_paragraph``) and the rule sentence question
(``rule_sentence``).  The built-in values were chosen for the embedded 1.5B model on the dev
letters; another model's probabilities mean other things, so ``letterchunk calibrate --write``
stores thresholds chosen from the analysts' reviews of that model in a settings file
(``LETTERCHUNK_THRESHOLDS``, default ``$XDG_CONFIG_HOME/letterchunk/thresholds.json``)::

    {"thresholds": [
      {"model": "gpt-4o-mini", "prompts_sha256": "…",
       "confession_paragraph": 0.62,            # a judge calibrate had too few reviews for
       "rule_sentence": 0.81,                   # is left out: its built-in value stays
       "written_at": "2026-11-29T01:00:00Z", "reviews": {"rule_sentence": 57}, "folder": "out"}
    ]}

An entry applies to a run whose identity has the same ``model`` and ``prompts_sha256`` (the
prompts are the questions: a changed prompt needs a new calibration).  :func:`thresholds_for`
gives the thresholds in force; a run records them in ``run.json`` under ``"thresholds"``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from letterchunk.errors import ConfigError
from letterchunk.io import atomic_write_text, parse_json, read_utf8
from letterchunk.settings import Settings

__all__ = [
    "BUILT_IN",
    "JUDGES",
    "Judge",
    "Thresholds",
    "read_settings_file",
    "thresholds_for",
    "thresholds_of_run",
    "write_thresholds",
]

Judge = Literal["confession_paragraph", "rule_sentence"]
JUDGES: tuple[Judge, ...] = get_args(Judge)


@dataclass(frozen=True)
class Thresholds:
    """The threshold of each judge and where each came from (``"built-in"`` or the settings
    file's path)."""

    confession_paragraph: float
    rule_sentence: float
    source: Mapping[str, str] | None = None

    def of(self, judge: str) -> float:
        return self.rule_sentence if judge == "rule_sentence" else self.confession_paragraph

    def to_dict(self) -> dict[str, object]:
        """The ``"thresholds"`` block of ``run.json``."""
        source = dict(self.source or {j: "built-in" for j in JUDGES})
        return {
            "confession_paragraph": self.confession_paragraph,
            "rule_sentence": self.rule_sentence,
            "source": source,
        }


# chosen for the embedded model on the dev letters' hand labels (bench/judge_quality.py sweeps
# them from the recorded probabilities).  confession paragraph: of 0.4-0.85, 0.5 gave the best
# chunk-level F1 (0.63) on bench/gold/confessions_dev.json.  rule sentence: the highest
# threshold whose mean cited recall on the dev principles (bench/gold/principles_dev.json)
# stays >= 0.75: with up to 25 rule questions a chunk, 0.7 kept 600 rule candidates of the six
# dev letters and cited 0.80 of their gold sentences; 0.75 kept 337 for a recall of 0.65, 0.65
# kept 840 for 0.87
BUILT_IN = Thresholds(confession_paragraph=0.5, rule_sentence=0.7)


def _entries(path: Path) -> list[dict[str, object]]:
    value, error = parse_json(read_utf8(path, "the thresholds file calibrate --write writes"))
    entries = value.get("thresholds") if isinstance(value, dict) else None
    if error or not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(
            f"{path}: not a thresholds file ({error or 'no list under thresholds'}); fix it, "
            "delete it (the built-in thresholds are used then) or point LETTERCHUNK_THRESHOLDS "
            "at another file"
        )
    for e in entries:
        for judge in JUDGES:
            t = e.get(judge)
            if t is not None and (not isinstance(t, int | float) or not 0.0 <= t <= 1.0):
                raise ConfigError(
                    f"{path}: {judge} {t!r} of model {e.get('model')!r} is not a threshold "
                    "between 0 and 1; fix or delete that entry"
                )
    return entries


def read_settings_file(path: Path | None = None) -> list[dict[str, object]]:
    """The entries of the thresholds file ([] when there is none)."""
    path = path or Settings.from_env().thresholds_file
    return _entries(path) if path.exists() else []


def thresholds_for(identity: Mapping[str, object], path: Path | None = None) -> Thresholds:
    """The thresholds in force for a run of ``identity`` (``run.json``'s identity block, or
    ``{"model", "prompts_sha256"}``): the settings file's entry for its model and prompts,
    judge by judge, else :data:`BUILT_IN`."""
    path = path or Settings.from_env().thresholds_file
    found: dict[str, float] = {}
    source: dict[str, str] = {j: "built-in" for j in JUDGES}
    for e in read_settings_file(path):
        if e.get("model") == identity.get("model") and e.get("prompts_sha256") == identity.get(
            "prompts_sha256"
        ):
            for judge in JUDGES:
                value = e.get(judge)
                if isinstance(value, int | float):
                    found[judge], source[judge] = float(value), str(path)
    return Thresholds(
        confession_paragraph=found.get("confession_paragraph", BUILT_IN.confession_paragraph),
        rule_sentence=found.get("rule_sentence", BUILT_IN.rule_sentence),
        source=source,
    )


def thresholds_of_run(run_json: Mapping[str, object] | None) -> Thresholds:
    """The thresholds a finished run recorded (``run.json``'s ``"thresholds"``), else the
    built-in ones (a run written before they were recorded)."""
    block = (run_json or {}).get("thresholds")
    if not isinstance(block, Mapping):
        return BUILT_IN
    values = {j: block.get(j) for j in JUDGES}
    source = block.get("source")
    return Thresholds(
        confession_paragraph=_number(values["confession_paragraph"], BUILT_IN.confession_paragraph),
        rule_sentence=_number(values["rule_sentence"], BUILT_IN.rule_sentence),
        source={str(k): str(v) for k, v in source.items()} if isinstance(source, dict) else None,
    )


def _number(value: object, default: float) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else default  # type: ignore[arg-type]


def write_thresholds(
    identity: Mapping[str, object],
    chosen: Mapping[str, float],
    *,
    reviews: Mapping[str, int],
    folder: str,
    path: Path | None = None,
) -> Path:
    """Store ``chosen`` (judge -> threshold) for ``identity``'s model and prompts in the
    settings file (atomically), replacing those judges of an earlier entry; returns its path."""
    path = path or Settings.from_env().thresholds_file
    entries = read_settings_file(path)
    key = {
        "model": str(identity.get("model")),
        "prompts_sha256": str(identity.get("prompts_sha256")),
    }
    entry: dict[str, object] = next(
        (e for e in entries if all(e.get(k) == v for k, v in key.items())), {}
    )
    if not entry:
        entries.append(entry)
    entry.update(key)
    entry.update({j: round(float(t), 4) for j, t in chosen.items()})
    counted = entry.get("reviews") if isinstance(entry.get("reviews"), dict) else {}
    entry["reviews"] = {**counted, **dict(reviews)}  # type: ignore[dict-item]
    entry["written_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    entry["folder"] = folder
    atomic_write_text(path, json.dumps({"thresholds": entries}, indent=2) + "\n")
    return path
