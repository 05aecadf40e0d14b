"""A scripted backend that gives *varied*, grounded enrichments (for analyze and the bench).

``rich_answer(request)`` answers any enrichment request from its own grammar-narrowed JSON
schema: entity names, concepts, evidence sentences and comparison years are picked from the
enums the schema offers (which come from the chunk's own text and the vocabulary), chosen by a
hash of the request so different chunks get different picks and the same chunk always gets the
same answer.  A chunk offering an evidence sentence that contains "mistake" is tagged
``mistake_confession`` with that sentence as evidence.  Fields without an enum fall back to the
fault matrix's ``valid_for`` values.
"""

from __future__ import annotations

import hashlib
import json
import re

from answers import request_chunk
from fake_openai import answer, response_schema
from test_fault_matrix import valid_for

THEMES = [
    "insurance",
    "capital allocation",
    "textiles",
    "management",
    "investments",
    "acquisitions",
]


def _enum(schema: dict, prop: dict) -> list:
    if "$ref" in prop:
        prop = schema.get("$defs", {}).get(prop["$ref"].rsplit("/", 1)[-1], {})
    items = prop.get("items", {})
    if "$ref" in items:
        return []
    if "enum" in items:
        return list(items["enum"])
    if "const" in items:
        return [items["const"]]
    return []


def _pick(options: list, seed: int, n: int) -> list:
    if not options:
        return []
    start = seed % len(options)
    rotated = options[start:] + options[:start]
    return rotated[:n]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def chunk_text(request: dict) -> str:
    """The chunk as the prompt quotes it (answers.request_chunk); the whole last message when a
    request quotes none."""
    try:
        return request_chunk(request)
    except (ValueError, KeyError, IndexError):
        return str((request.get("messages") or [{}])[-1].get("content") or "")


def rich_values(request: dict) -> dict:
    schema = response_schema(request) or {}
    props = schema.get("properties", {})
    base = valid_for(request)
    seed = int(
        hashlib.sha256(json.dumps(request.get("messages"), sort_keys=True).encode()).hexdigest()[
            :8
        ],
        16,
    )
    out = dict(base)
    if "buffett_concepts" in props:
        out["buffett_concepts"] = _pick(_enum(schema, props["buffett_concepts"]), seed, 2)
    if "themes" in props:
        out["themes"] = _pick(THEMES, seed, 2)
    if "entities" in props:
        ent = props["entities"]
        ref = schema.get("$defs", {}).get(ent.get("$ref", "").rsplit("/", 1)[-1], ent)
        text = _norm(chunk_text(request))
        # only names the chunk really contains (the offered candidates are not always verbatim)
        out["entities"] = {
            name: _pick(
                [
                    x
                    for x in _enum(schema, ref.get("properties", {}).get(name, {}))
                    if _norm(x) in text
                ],
                seed,
                2 if name == "companies" else 1,
            )
            for name in ("companies", "people", "metrics")
        }
    if "content_type" in props and "content_type_evidence" in props:
        sentences = _enum(schema, props["content_type_evidence"])
        confession = [s for s in sentences if "mistake" in s.lower() and len(s.split()) >= 4]
        if confession and "mistake_confession" in props["content_type"].get("enum", []):
            out["content_type"] = "mistake_confession"
            out["content_type_evidence"] = confession[:1]
    if "tables" in props and "has_financial_data" in props:
        out["has_financial_data"] = True  # a table chunk carries figures
    if "comparison_years" in props:
        out["comparison_years"] = _pick(_enum(schema, props["comparison_years"]), seed, 1)
    return {k: out[k] for k in props}


def rich_answer(request: dict):
    return answer(rich_values(request))
