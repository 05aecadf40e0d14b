"""The canonical schema: committed JSON Schema in sync, exact §0 keys and order, strictness."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from letterchunk.contract.schema import Chunk, Metadata, dump_chunk, json_schema, json_schema_text

REPO = Path(__file__).resolve().parents[1]
SCHEMA_FILE = REPO / "schemas" / "chunk.schema.json"

# Literal copy of the key list of spec §0.1 / §0.2 (docs/spec.md), in its order.
SPEC_TOP_KEYS = ["chunk_id", "content", "metadata"]
SPEC_METADATA_KEYS = [
    "letter_year",
    "letter_date",
    "source_file",
    "section_title",
    "section_hierarchy",
    "chunk_tier",
    "parent_chunk_id",
    "child_chunk_ids",
    "content_type",
    "contextual_summary",
    "has_table",
    "table_data",
    "has_financial_data",
    "entities",
    "themes",
    "buffett_concepts",
    "principles",
    "temporal_references",
    "cross_references",
    "retrieval_priority",
    "abstraction_level",
    "token_count",
    "char_count",
    "source_span",
    "standalone_exception",
    "exception_reason",
    "boundary_note",
    "merged_from",
]
SPEC_NESTED_KEYS = {
    "entities": ["companies", "people", "metrics"],
    "temporal_references": ["primary_year", "comparison_years", "future_outlook"],
    "cross_references": ["related_sections_same_letter", "related_years"],
    "source_span": ["start_char", "end_char_exclusive"],
}
SPEC_TABLE_KEYS = ["table_name", "summary", "columns", "rows", "row_count"]
SPEC_PRINCIPLE_KEYS = ["statement", "category"]


def test_committed_schema_matches_models():
    assert SCHEMA_FILE.read_text(encoding="utf-8") == json_schema_text(), (
        "schemas/chunk.schema.json drifted from letterchunk.contract.schema; regenerate it with "
        "`letterchunk validate --print-schema > schemas/chunk.schema.json`"
    )


def test_schema_file_is_strict_json_schema():
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema["additionalProperties"] is False
    assert sorted(schema["required"]) == sorted(SPEC_TOP_KEYS)
    for name, definition in schema["$defs"].items():
        assert definition.get("additionalProperties") is False, name
    assert schema["properties"]["chunk_id"]["pattern"] == r"^\d{4}-S\d+-T[123]-\d{3}$"


def test_dumped_chunk_has_exact_spec_keys_in_order(good_letter):
    for chunk in good_letter.chunks:
        obj = json.loads(dump_chunk(chunk))
        assert list(obj) == SPEC_TOP_KEYS
        md = obj["metadata"]
        assert list(md) == SPEC_METADATA_KEYS
        for key, nested in SPEC_NESTED_KEYS.items():
            assert list(md[key]) == nested, key
        for table in md["table_data"]:
            assert list(table) == SPEC_TABLE_KEYS


def test_model_field_order_is_spec_order():
    assert list(Chunk.model_fields) == SPEC_TOP_KEYS
    assert list(Metadata.model_fields) == SPEC_METADATA_KEYS
    schema = json_schema()
    defs = schema["$defs"]
    assert list(defs["TableData"]["properties"]) == SPEC_TABLE_KEYS
    assert list(defs["Principle"]["properties"]) == SPEC_PRINCIPLE_KEYS
    for key, nested in SPEC_NESTED_KEYS.items():
        model = Metadata.model_fields[key].annotation
        assert list(model.model_fields) == nested, key


def _set(obj: dict, dotted: str, value) -> dict:
    obj = copy.deepcopy(obj)
    *parents, last = dotted.split(".")
    target = obj
    for p in parents:
        target = target[int(p)] if isinstance(target, list) else target[p]
    target[last] = value
    return obj


def _del(obj: dict, dotted: str) -> dict:
    obj = copy.deepcopy(obj)
    *parents, last = dotted.split(".")
    target = obj
    for p in parents:
        target = target[p]
    del target[last]
    return obj


@pytest.fixture
def t3_obj(good_letter):
    return good_letter.chunks[2].model_dump(mode="json")


STRICTNESS = [
    # (mutation on a valid Tier-3 chunk, expected pydantic error type)
    ("extra top-level key", lambda o: {**o, "embedding": []}, "extra_forbidden"),
    ("extra metadata key", lambda o: _set(o, "metadata.version", 2), "extra_forbidden"),
    ("extra nested key", lambda o: _set(o, "metadata.source_span.length", 3), "extra_forbidden"),
    ("extra table key", lambda o: _set(o, "metadata.table_data.0.unit", "$M"), "extra_forbidden"),
    ('"1" not coerced to int', lambda o: _set(o, "metadata.chunk_tier", "3"), "literal_error"),
    ('"1987" not coerced', lambda o: _set(o, "metadata.letter_year", "1987"), "int_type"),
    ("float not coerced", lambda o: _set(o, "metadata.token_count", 10.0), "int_type"),
    ("bool not coerced", lambda o: _set(o, "metadata.has_table", "true"), "bool_type"),
    (
        "int not a bool",
        lambda o: _set(o, "metadata.temporal_references.future_outlook", 1),
        "bool_type",
    ),
    ("table_data dict rejected", lambda o: _set(o, "metadata.table_data", {}), "list_type"),
    ("table_data null rejected", lambda o: _set(o, "metadata.table_data", None), "list_type"),
    ("content_type enum", lambda o: _set(o, "metadata.content_type", "table"), "literal_error"),
    ("priority enum", lambda o: _set(o, "metadata.retrieval_priority", "urgent"), "literal_error"),
    ("abstraction enum", lambda o: _set(o, "metadata.abstraction_level", "HIGH"), "literal_error"),
    (
        "principle category enum",
        lambda o: _set(o, "metadata.principles", [{"statement": "x", "category": "luck"}]),
        "literal_error",
    ),
    ("tier enum", lambda o: _set(o, "metadata.chunk_tier", 4), "literal_error"),
    ("chunk_id pattern", lambda o: {**o, "chunk_id": "1987-S2-T3-1"}, "string_pattern_mismatch"),
    (
        "letter_date pattern",
        lambda o: _set(o, "metadata.letter_date", "1988/02/29"),
        "string_pattern_mismatch",
    ),
    ("missing required key", lambda o: _del(o, "metadata.source_span"), "missing"),
    (
        "missing nested key",
        lambda o: _del(o, "metadata.temporal_references.primary_year"),
        "missing",
    ),
    (
        "rows must be lists of strings",
        lambda o: _set(o, "metadata.table_data.0.rows", [[1, 2, 3]]),
        "string_type",
    ),
]


@pytest.mark.parametrize(
    ("case", "mutate", "error_type"), STRICTNESS, ids=[c[0] for c in STRICTNESS]
)
def test_strictness(t3_obj, case, mutate, error_type):
    Chunk.model_validate(t3_obj)  # the unmutated chunk is valid
    with pytest.raises(ValidationError) as info:
        Chunk.model_validate(mutate(t3_obj))
    assert error_type in {e["type"] for e in info.value.errors()}
