"""One output folder read as a *run*: its chunks per letter, its cleaned letters and the identity
its ``run.json`` records, for comparing runs (:mod:`letterchunk.report.diff`,
:mod:`letterchunk.report.history`).

Any output folder is a run: one of ``letterchunk run`` or ``enrich`` (with ``run.json``), or of
``letterchunk segment`` (no ``run.json``: the identity is unknown, the stage ``segmented``).
Chunk files are read only through the strict reader
(:func:`letterchunk.contract.files.load_chunks`), so an unusable one is an
:class:`~letterchunk.errors.InputError` naming the file.  A ``run.json`` that cannot be read does
not stop a comparison: its identity is unknown and :attr:`RunIdentity.problem` says why.

:func:`chunk_fields` flattens a chunk's metadata into named fields of three kinds, the unit every
comparison works in:

* ``set``   members without order: themes, buffett_concepts, entities.*, principles (as
  ``"statement [category]"``), cross_references.*, temporal_references.comparison_years,
  child_chunk_ids, merged_from;
* ``text``  prose the model writes: contextual_summary, table_data[i].summary;
* ``value`` everything else, compared whole: content_type, section_title, section_hierarchy,
  table_data[i].columns / rows, retrieval_priority, token_count, ...

``content`` and ``source_span`` are the chunk's boundary, compared apart from its fields.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from letterchunk.contract.files import load_chunks
from letterchunk.contract.jsontypes import JSONObject, JSONValue
from letterchunk.contract.schema import Chunk
from letterchunk.errors import InputError
from letterchunk.io import parse_json, read_utf8
from letterchunk.layout import CLEANED_SUFFIX, RUN_FILE, chunk_stem, is_chunk_file

_T = TypeVar("_T")

__all__ = [
    "FieldKind",
    "FieldValue",
    "RunFolder",
    "RunIdentity",
    "chunk_fields",
    "field_text",
    "read_identity",
    "read_run",
    "run_order",
]

FieldKind = Literal["set", "text", "value"]

# metadata fields whose lists are compared as sets (order carries no meaning)
_SET_LISTS = {
    "themes",
    "buffett_concepts",
    "child_chunk_ids",
    "merged_from",
    "entities.companies",
    "entities.people",
    "entities.metrics",
    "cross_references.related_sections_same_letter",
    "cross_references.related_years",
    "temporal_references.comparison_years",
}
_TEXTS = {"contextual_summary"}
# the boundary, compared apart (ChunkDiff.status "rebounded")
_BOUNDARY = {"source_span"}


@dataclass(frozen=True)
class FieldValue:
    """One flattened field of a chunk: its kind and its value (a sorted list for a set)."""

    kind: FieldKind
    value: JSONValue


def _set_value(items: list[JSONValue]) -> list[JSONValue]:
    return sorted(set(items), key=lambda v: (str(type(v)), v))


def chunk_fields(chunk: Chunk) -> dict[str, FieldValue]:
    """The chunk's metadata as ``field name -> FieldValue`` (see the module docstring)."""
    md = chunk.metadata.model_dump(mode="json")
    out: dict[str, FieldValue] = {}
    for name, value in md.items():
        if name in _BOUNDARY:
            continue
        if name == "principles":
            out[name] = FieldValue(
                "set", _set_value([f"{p['statement']} [{p['category']}]" for p in value])
            )
        elif name == "table_data":
            for i, table in enumerate(value):
                for key, item in table.items():
                    kind: FieldKind = "text" if key == "summary" else "value"
                    out[f"table_data[{i}].{key}"] = FieldValue(kind, item)
        elif isinstance(value, dict):
            for key, item in value.items():
                path = f"{name}.{key}"
                out[path] = (
                    FieldValue("set", _set_value(item))
                    if path in _SET_LISTS
                    else (FieldValue("value", item))
                )
        elif name in _SET_LISTS:
            out[name] = FieldValue("set", _set_value(value))
        else:
            out[name] = FieldValue("text" if name in _TEXTS else "value", value)
    return out


@dataclass(frozen=True)
class RunIdentity:
    """What made a run, from its ``run.json`` (``"identity"``, written since letterchunk
    recorded it; ``model`` and ``status`` also from older ledgers).  None: not recorded."""

    folder: str
    ledger: bool  # a run.json was read
    stage: str  # segmented | enriched | mixed (some letters enriched, some not)
    started_at: str | None = None
    letterchunk_version: str | None = None
    model: str | None = None
    mode: str | None = None
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    prompts_sha256: str | None = None
    prompt_files: dict[str, str] = field(default_factory=dict)
    schema_sha256: str | None = None
    vocabularies: dict[str, str] = field(default_factory=dict)
    status: str | None = None
    problem: str | None = None  # why run.json could not be read

    def rows(self) -> list[tuple[str, JSONValue]]:
        """``(name, value)`` pairs for a side-by-side table; dict fields one row per entry."""
        rows: list[tuple[str, JSONValue]] = [
            ("folder", self.folder),
            ("run.json", "yes" if self.ledger else "no"),
            ("stage", self.stage),
        ]
        for name in (
            "started_at",
            "status",
            "letterchunk_version",
            "model",
            "mode",
            "temperature",
            "seed",
            "max_tokens",
            "prompts_sha256",
            "schema_sha256",
        ):
            rows.append((name, getattr(self, name)))
        rows += [(f"prompt {k}", v) for k, v in sorted(self.prompt_files.items())]
        rows += [(f"vocabulary {k}", v) for k, v in sorted(self.vocabularies.items())]
        return rows

    def to_dict(self) -> JSONObject:
        return {
            "folder": self.folder,
            "ledger": self.ledger,
            "stage": self.stage,
            "started_at": self.started_at,
            "letterchunk_version": self.letterchunk_version,
            "model": self.model,
            "mode": self.mode,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "prompts_sha256": self.prompts_sha256,
            "prompt_files": dict(sorted(self.prompt_files.items())),
            "schema_sha256": self.schema_sha256,
            "vocabularies": dict(sorted(self.vocabularies.items())),
            "status": self.status,
            "problem": self.problem,
        }


def _typed(value: JSONValue, kind: type[_T] | tuple[type[_T], ...]) -> _T | None:
    """``value`` when it is of ``kind`` (never a bool for a number), else None."""
    if isinstance(value, bool) and kind is not bool:
        return None
    return value if isinstance(value, kind) else None


def _str_map(value: JSONValue) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def read_identity(folder: Path, stage: str) -> RunIdentity:
    """The identity ``folder/run.json`` records; every field None when there is none."""
    path = folder / RUN_FILE
    if not path.exists():
        return RunIdentity(str(folder), False, stage)
    try:
        data, error = parse_json(read_utf8(path, "the run ledger run.json"))
    except InputError as exc:
        data, error = None, exc.reason
    if error is None and not isinstance(data, dict):
        error = "not a JSON object"
    if error is not None or not isinstance(data, dict):
        return RunIdentity(str(folder), False, stage, problem=f"{path}: {error}")
    found = data.get("identity")
    ident: JSONObject = found if isinstance(found, dict) else {}
    return RunIdentity(
        folder=str(folder),
        ledger=True,
        stage=stage,
        started_at=_typed(ident.get("started_at"), str),
        letterchunk_version=_typed(ident.get("letterchunk_version"), str),
        model=_typed(ident.get("model", data.get("model")), str),
        mode=_typed(ident.get("mode"), str),
        temperature=_typed(ident.get("temperature"), (int, float)),
        seed=_typed(ident.get("seed"), int),
        max_tokens=_typed(ident.get("max_tokens"), int),
        prompts_sha256=_typed(ident.get("prompts_sha256"), str),
        prompt_files=_str_map(ident.get("prompt_files")),
        schema_sha256=_typed(ident.get("schema_sha256"), str),
        vocabularies=_str_map(ident.get("vocabularies")),
        status=_typed(data.get("status"), str),
    )


@dataclass(frozen=True)
class RunFolder:
    """An output folder read whole: ``letters`` maps a chunk file's stem (``1977``,
    ``1962-L1``) to its chunks in file order; ``cleaned`` the stem to the sha256 of its cleaned
    letter (None when missing or unreadable)."""

    identity: RunIdentity
    letters: dict[str, tuple[Chunk, ...]]
    cleaned: dict[str, str | None]

    @property
    def folder(self) -> str:
        return self.identity.folder


def _cleaned_digest(folder: Path, stem: str, chunks: tuple[Chunk, ...]) -> str | None:
    source = chunks[0].metadata.source_file if chunks else f"{stem}{CLEANED_SUFFIX}"
    path = folder / (source if "/" not in source else f"{stem}{CLEANED_SUFFIX}")
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None


def read_run(folder: str | Path) -> RunFolder:
    """Read the output folder ``folder``; :class:`InputError` naming the folder or file when it
    is missing, not a folder, holds no chunk file, or holds an unusable one."""
    path = Path(folder)
    what = "pass the --out folder of `letterchunk run`, `enrich` or `segment`"
    if not path.exists():
        raise InputError(path, f"no such folder; {what}")
    if not path.is_dir():
        raise InputError(path, f"not a folder; {what}")
    files = sorted(p for p in path.glob("*.jsonl") if not p.is_dir() and is_chunk_file(p))
    if not files:
        raise InputError(
            path,
            f"not an output folder: it holds no chunk file (YYYY.jsonl); {what}, or run "
            f"`letterchunk segment LETTERS --out {path}` first",
        )
    letters = {chunk_stem(f): tuple(load_chunks(f)) for f in files}
    # a letter is enriched once its chunks have summaries (what `letterchunk report` counts)
    enriched = [any(c.metadata.contextual_summary for c in cs) for cs in letters.values()]
    stage = "enriched" if all(enriched) else "segmented" if not any(enriched) else "mixed"
    return RunFolder(
        identity=read_identity(path, stage),
        letters=letters,
        cleaned={stem: _cleaned_digest(path, stem, cs) for stem, cs in letters.items()},
    )


def run_order(runs: list[RunFolder]) -> list[RunFolder]:
    """``runs`` oldest first by the start time their ledgers record.  A run with no recorded
    time (a segment-only folder, or a ledger older than the identity block) counts as older
    than every timed run; untimed runs keep the order given."""
    indexed = list(enumerate(runs))
    indexed.sort(key=lambda p: (p[1].identity.started_at or "", p[0]))
    return [r for _, r in indexed]


def field_text(value: JSONValue) -> str:
    """A field value as one line of text (JSON for lists and numbers, a string as it is)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
