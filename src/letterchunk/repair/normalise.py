"""Normalisation of other tools' chunk records: fix the shape before the strict model sees it.

``letterchunk repair`` reads files other tools wrote; :func:`normalize_record` turns one raw JSON
object into something :class:`~letterchunk.contract.schema.Chunk` can load (spec §0: "use
defaults") and records every change it made.
"""

from __future__ import annotations

import copy

from pydantic import BaseModel

from letterchunk.contract.jsontypes import JSONObject, JSONValue
from letterchunk.contract.schema import Metadata
from letterchunk.layout import cleaned_name
from letterchunk.repair.fixers import CHUNK_ID_RE, Change, diff_fields
from letterchunk.tokens import count_tokens

__all__ = ["normalize_record"]


def normalize_record(raw: JSONValue) -> tuple[JSONValue, list[Change]]:
    """Fix the shape of one raw JSON chunk so the strict schema can load it (§0: "use defaults").

    Fills missing keys with the §0.2 defaults, turns ``null``/dict where a list belongs into a
    list, numeric strings into ints, "true"/"false" into bools, and removes unknown keys — each
    recorded as a Change, so nothing is dropped silently.  Fields that cannot be derived stay
    missing and the schema error names them.
    """
    if not isinstance(raw, dict):
        return raw, []
    before = copy.deepcopy(raw)
    d = copy.deepcopy(raw)
    for key in list(d):
        if key not in ("chunk_id", "content", "metadata"):
            del d[key]
    md = d.get("metadata")
    if not isinstance(md, dict):
        return d, diff_fields(before, d)
    m = CHUNK_ID_RE.match(str(d.get("chunk_id", "")))
    year = int(m.group(1)) if m else md.get("letter_year")
    tier = int(m.group(3)) if m else md.get("chunk_tier")
    text = d.get("content")
    content = text if isinstance(text, str) else None
    _fill_missing(md, year, tier, content)
    _coerce(md, year)
    for key in list(md):
        if key not in Metadata.model_fields:
            del md[key]
    return d, diff_fields(before, d)


def _fill_missing(md: JSONObject, year: JSONValue, tier: JSONValue, content: str | None) -> None:
    """Missing metadata keys: the model's defaults, else what the id and content determine."""
    defaults: JSONObject = {
        "letter_year": year,
        "chunk_tier": tier,
        "source_file": cleaned_name(str(year)) if year else None,
        "content_type": "financial_table" if tier == 3 else "narrative",
        "section_hierarchy": [],
        "temporal_references": {"primary_year": year} if year else None,
        "char_count": len(content) if content is not None else None,
        "token_count": count_tokens(content) if content is not None else None,
    }
    for key, fld in Metadata.model_fields.items():
        if key in md:
            continue
        if not fld.is_required():
            default = fld.get_default(call_default_factory=True)
            md[key] = default.model_dump(mode="json") if isinstance(default, BaseModel) else default
        elif defaults.get(key) is not None:
            md[key] = defaults[key]
    if "letter_date" not in md:
        md["letter_date"] = "0000-00-00"
        if not md.get("boundary_note"):
            md["boundary_note"] = "letter date unknown"


def _coerce(md: JSONObject, year: JSONValue) -> None:
    """``null`` or a dict where a list belongs, numbers and booleans written as strings, and the
    missing parts of the nested objects."""
    for key in (
        "child_chunk_ids",
        "themes",
        "buffett_concepts",
        "principles",
        "merged_from",
        "section_hierarchy",
        "table_data",
    ):
        if md.get(key) is None and key in md:
            md[key] = []
    table = md.get("table_data")
    if isinstance(table, dict):
        md["table_data"] = [table]
    for key in ("letter_year", "chunk_tier", "token_count", "char_count"):
        number = md.get(key)
        if isinstance(number, str) and number.strip().isdigit():
            md[key] = int(number)
    for key in ("has_table", "has_financial_data", "standalone_exception"):
        flag = md.get(key)
        if isinstance(flag, str) and flag.strip().lower() in ("true", "false"):
            md[key] = flag.strip().lower() == "true"
    for key, sub in (
        ("entities", ("companies", "people", "metrics")),
        ("cross_references", ("related_sections_same_letter", "related_years")),
    ):
        nested = md.get(key)
        if isinstance(nested, dict):
            for s in sub:
                if nested.get(s) is None:
                    nested[s] = []
    tr = md.get("temporal_references")
    if isinstance(tr, dict):
        tr.setdefault("primary_year", year)
        if tr.get("comparison_years") is None:
            tr["comparison_years"] = []
        tr.setdefault("future_outlook", False)
