"""A bridge to Label Studio for teams already reviewing there.

:func:`export_label_studio` writes one task per yes/no question the judges put (each confession
paragraph, each candidate rule sentence: those the principle cap left out included), in Label
Studio's JSON import format, with the model's answer as a prediction::

    [{"data": {"text": <the sentence judged>, "chunk": <its paragraph>, "question": ...,
               "letter", "chunk_id", "text_sha256", "field", "target", "model_p",
               "threshold", "run_model", "run_prompts_sha256"},
      "predictions": [{"model_version": <model>, "score": <confidence in the prediction>,
                       "result": [{"from_name": "decision", "to_name": "text",
                                   "type": "choices", "value": {"choices": ["Yes"|"No"]}}]}]}]

The prediction is "Yes" when the recorded probability reaches the threshold in force, and its
score is the model's confidence in it (``p`` for Yes, ``1 - p`` for No).  The project's
labelling configuration is :data:`LABEL_CONFIG`.

:func:`import_label_studio` reads Label Studio's JSON export of those tasks (each with its
``annotations``) and appends one decision a task to ``reviews.jsonl``: the last annotation that
was not cancelled, Yes -> accept (true), No -> reject (false).  The reviewer is the one given,
else the annotator's e-mail (``completed_by``), else ``label-studio``.  A decision's id is
derived from the task and annotation ids, so importing the same export twice adds nothing.
A decision the validator refuses is not written (logged with its reason).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from pathlib import Path
from typing import Any

from letterchunk.contract.predicates import normalise_ws
from letterchunk.errors import InputError
from letterchunk.io import parse_json, read_utf8, write_output
from letterchunk.review.apply import validate_review
from letterchunk.review.folder import letter_keys, read_letter, read_run, run_identity_of
from letterchunk.review.records import (
    ReviewRecord,
    append_review,
    new_record,
    read_reviews,
    text_sha256,
)
from letterchunk.review.thresholds import thresholds_of_run

__all__ = ["LABEL_CONFIG", "QUESTIONS", "export_label_studio", "import_label_studio"]

log = logging.getLogger(__name__)

LABEL_CONFIG = """<View>
  <Header value="$question"/>
  <Text name="text" value="$text"/>
  <Choices name="decision" toName="text" choice="single" showInline="true">
    <Choice value="Yes"/>
    <Choice value="No"/>
  </Choices>
  <Text name="chunk" value="$chunk"/>
</View>
"""

QUESTIONS = {
    "confession": "In this paragraph, does Buffett confess that he or Berkshire made a mistake?",
    "rule": "Does this sentence state a general, reusable rule or principle of Buffett's?",
}


def _tasks(folder: Path) -> list[dict[str, Any]]:
    run = read_run(folder)
    identity = run_identity_of(run)
    thresholds = thresholds_of_run(run)
    tasks: list[dict[str, Any]] = []
    for key in letter_keys(folder):
        letter = read_letter(folder, key)
        for chunk in letter.chunks:
            record = letter.evidence.get(chunk.chunk_id)
            judged = record.get("judgements") if record is not None else None
            if not judged:
                continue
            items = [("confession", j) for j in judged.get("confession_paragraphs", [])]
            items += [("rule", j) for j in judged.get("rule_p_yes", [])]
            for field, item in items:
                p = item["p_yes"]
                if p is None:
                    continue
                t = (
                    thresholds.confession_paragraph
                    if field == "confession"
                    else (thresholds.rule_sentence)
                )
                yes = p >= t
                tasks.append(
                    {
                        "data": {
                            "text": item["sentence"],
                            "chunk": _paragraph_of(chunk.content, item["sentence"]),
                            "question": QUESTIONS[field],
                            "letter": key,
                            "chunk_id": chunk.chunk_id,
                            "text_sha256": text_sha256(chunk.content),
                            "field": field,
                            "target": item["sentence"],
                            "model_p": p,
                            "threshold": t,
                            "run_model": identity["model"],
                            "run_prompts_sha256": identity["prompts_sha256"],
                        },
                        "predictions": [
                            {
                                "model_version": identity["model"] or "unknown",
                                "score": round(p if yes else 1 - p, 4),
                                "result": [_choice("Yes" if yes else "No")],
                            }
                        ],
                    }
                )
    return tasks


def _paragraph_of(content: str, sentence: str) -> str:
    """The paragraph of ``content`` that holds ``sentence`` (whitespace collapsed), as the
    task's context: the whole chunk in every task would make a corpus export hundreds of MB."""
    wanted = normalise_ws(sentence)
    for paragraph in re.split(r"\n\s*\n", content):
        if wanted in normalise_ws(paragraph):
            return paragraph.strip()
    return sentence


def _choice(label: str) -> dict[str, Any]:
    return {
        "from_name": "decision",
        "to_name": "text",
        "type": "choices",
        "value": {"choices": [label]},
    }


def export_label_studio(folder: Path, out: Path) -> int:
    """Write the yes/no questions of ``folder`` as Label Studio tasks to ``out``; returns how
    many tasks were written."""
    tasks = _tasks(Path(folder))
    write_output(out, json.dumps(tasks, ensure_ascii=False, indent=1) + "\n")
    return len(tasks)


def _annotator(annotation: dict[str, Any]) -> str | None:
    who = annotation.get("completed_by")
    if isinstance(who, dict):
        found = who.get("email") or who.get("username")
        return str(found) if found else None
    return None


def _record(task: dict[str, Any], n: int, reviewer: str | None) -> ReviewRecord | None:
    """The decision of task ``n`` (None: no annotation that decides)."""
    data = task.get("data")
    annotations = task.get("annotations") or task.get("completions") or []
    if not isinstance(data, dict) or not isinstance(annotations, list):
        raise ValueError("a task has a data object and a list of annotations")
    usable = [a for a in annotations if isinstance(a, dict) and not a.get("was_cancelled")]
    if not usable:
        return None
    last = usable[-1]
    choices = [
        c
        for r in last.get("result") or []
        if isinstance(r, dict) and r.get("from_name") == "decision"
        for c in (r.get("value") or {}).get("choices") or []
    ]
    if not choices or choices[0] not in ("Yes", "No"):
        return None
    field = data.get("field")
    if field not in ("confession", "rule"):
        raise ValueError(f"field {field!r} is not a yes/no question (confession, rule)")
    yes = choices[0] == "Yes"
    p = data.get("model_p")
    t = data.get("threshold")
    seed = f"label-studio:{task.get('id', n)}:{last.get('id', len(usable))}:{data.get('target')}"
    when = last.get("updated_at") or last.get("created_at")
    return new_record(
        id=uuid.uuid5(uuid.NAMESPACE_URL, seed).hex,
        chunk_id=str(data["chunk_id"]),
        letter=str(data["letter"]),
        text_sha256=str(data["text_sha256"]),
        quote=data.get("target"),
        field=field,
        target=data.get("target"),
        model_value=None if p is None or t is None else p >= t,
        model_p=p,
        threshold=t,
        decision="accept" if yes else "reject",
        value=yes,
        reviewer=reviewer or _annotator(last) or "label-studio",
        **({"time": str(when)} if when else {}),
        run={
            "model": str(data.get("run_model") or ""),
            "prompts_sha256": str(data.get("run_prompts_sha256") or ""),
        },
    )


def import_label_studio(folder: Path, source: Path, reviewer: str | None) -> int:
    """Append the decisions of Label Studio's JSON export ``source`` to ``folder``'s
    ``reviews.jsonl``; returns how many were added.  InputError naming the file and task when
    it is not such an export (nothing is written then)."""
    folder, source = Path(folder), Path(source)
    value, error = parse_json(read_utf8(source, "Label Studio's JSON export (a list of tasks)"))
    if error or not isinstance(value, list):
        raise InputError(
            source, f"{error or 'not a list of tasks'}; export the project as JSON in Label Studio"
        )
    records: list[ReviewRecord] = []
    for n, task in enumerate(value, 1):
        try:
            found = _record(task, n, reviewer) if isinstance(task, dict) else None
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(
                source, f"task {n}: {exc}; export the tasks letterchunk wrote, with annotations"
            ) from None
        if found is not None:
            records.append(found)
    known = {r.id for r in read_reviews(folder)}
    added = 0
    for r in records:
        if r.id in known:
            continue
        problem = validate_review(folder, r)
        if problem:
            log.warning("%s: %s %s not imported: %s", source, r.chunk_id, r.field, problem)
            continue
        append_review(folder, r)
        known.add(r.id)
        added += 1
    return added
