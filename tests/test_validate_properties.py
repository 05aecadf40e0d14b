"""Property tests: nothing fed to the validator makes it raise; it always answers Violations.

Inputs: random bytes as a JSONL file, random JSON values as lines, and valid chunks with random
values written into random fields (types, enums and ranges the schema forbids included).
"""

from __future__ import annotations

import copy
import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from letterchunk.contract.predicates import entity_found, entity_text, has_text
from letterchunk.contract.rules import VALIDATOR_RULES
from letterchunk.contract.schema import Chunk
from letterchunk.contract.validate import (
    LetterContext,
    Violation,
    validate_chunk,
    validate_letter,
    validate_path,
)

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


def _check(violations) -> None:
    assert isinstance(violations, list)
    for v in violations:
        assert isinstance(v, Violation)
        assert v.code in VALIDATOR_RULES
        assert v.severity == VALIDATOR_RULES[v.code].severity
        assert v.message
        json.dumps(v.to_dict())


@SETTINGS
@given(data=st.binary(max_size=400))
def test_random_bytes_never_raise(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("bytes") / "x.jsonl"
    path.write_bytes(data)
    for stage in ("segmented", "enriched"):
        _check(validate_path(path, stage=stage))


@SETTINGS
@given(lines=st.lists(json_values, min_size=1, max_size=5))
def test_random_json_lines_never_raise(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("json") / "x.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in lines), encoding="utf-8")
    _check(validate_path(path, stage="enriched"))


def _paths(obj, prefix=()):
    """Every (path) into a nested JSON object, containers included."""
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


@SETTINGS
@given(data=st.data())
def test_mutated_chunk_files_never_raise(tmp_path_factory, data, enriched_letter, write_letter):
    folder = tmp_path_factory.mktemp("mut")
    jsonl = write_letter(enriched_letter, folder)
    objs = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines()]
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(objs) - 1))
        paths = [p for p in _paths(objs[i]) if p]
        path = data.draw(st.sampled_from(paths))
        action = data.draw(st.sampled_from(["set", "delete", "int", "neg"]))
        target = objs[i]
        for p in path[:-1]:
            target = target[p]
        key = path[-1]
        if action == "delete":
            del target[key]
        elif action == "int":
            target[key] = data.draw(st.integers(-(10**12), 10**12))
        elif action == "neg":
            target[key] = data.draw(
                st.sampled_from([-1, 0, "", [], {}, None, "0000-00-00", "1987-S1-T1-001"])
            )
        else:
            target[key] = data.draw(json_values)
    jsonl.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    for stage in ("segmented", "enriched"):
        _check(validate_path(folder, stage=stage))


# Valid-by-schema chunks with arbitrary values: exercise the rule code, not the parser.
_ints = st.integers(-(10**6), 10**6)
_text = st.text(max_size=80)


@SETTINGS
@given(data=st.data())
def test_schema_valid_but_inconsistent_chunks_never_raise(data, enriched_letter):
    chunks = []
    for chunk in enriched_letter.chunks:
        obj = copy.deepcopy(chunk.model_dump(mode="json"))
        md = obj["metadata"]
        md["token_count"] = data.draw(_ints)
        md["char_count"] = data.draw(_ints)
        md["source_span"] = {"start_char": data.draw(_ints), "end_char_exclusive": data.draw(_ints)}
        md["chunk_tier"] = data.draw(st.sampled_from([1, 2, 3]))
        md["parent_chunk_id"] = data.draw(
            st.none() | st.sampled_from([c.chunk_id for c in enriched_letter.chunks]) | _text
        )
        md["child_chunk_ids"] = data.draw(
            st.lists(
                _text | st.sampled_from([c.chunk_id for c in enriched_letter.chunks]), max_size=3
            )
        )
        md["contextual_summary"] = data.draw(_text)
        md["entities"]["companies"] = data.draw(st.lists(_text, max_size=3))
        md["temporal_references"]["comparison_years"] = data.draw(st.lists(_ints, max_size=3))
        md["cross_references"]["related_sections_same_letter"] = data.draw(
            st.lists(_text, max_size=2)
        )
        md["letter_date"] = data.draw(st.from_regex(r"\A\d{4}-\d{2}-\d{2}\Z"))
        md["standalone_exception"] = data.draw(st.booleans())
        md["exception_reason"] = data.draw(st.none() | _text)
        md["content_type"] = data.draw(
            st.sampled_from(
                ["narrative", "financial_table", "mistake_confession", "principle_statement"]
            )
        )
        if data.draw(st.booleans()):
            obj["content"] = data.draw(st.text(max_size=200))
        chunks.append(Chunk.model_validate(obj))
    evidence = data.draw(
        st.dictionaries(
            st.sampled_from([c.chunk_id for c in chunks]),
            st.fixed_dictionaries(
                {
                    "content_type_evidence": st.lists(_text, max_size=2),
                    "principle_evidence": st.lists(_text, max_size=2),
                }
            ),
            max_size=3,
        )
    )
    cleaned = data.draw(st.none() | st.just(enriched_letter.text) | st.text(max_size=50))
    ctx = LetterContext(cleaned_text=cleaned, evidence=evidence)
    for stage in ("segmented", "enriched"):
        _check(validate_letter(chunks, stage=stage, context=ctx))
        for c in chunks:
            _check(validate_chunk(c, stage=stage, context=ctx))


# whitespace as str.isspace sees it (ASCII, the file/group/record separators, no-break and em
# spaces), a zero-width space (not whitespace) and letters
_spacey = st.text(alphabet=" \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2003\u3000\u200bab.")


@given(_spacey)
def test_has_text_is_strip_without_the_copy(text):
    # the validator's test for an empty chunk: exactly what ``text.strip()`` says
    assert has_text(text) == bool(text.strip())


# names and texts from pieces that sit at word boundaries or not: letters (ASCII, accented,
# Greek, a CJK ideograph), digits (ASCII, Arabic-Indic, superscript, Roman numeral), "_", "&",
# punctuation, spaces, a combining accent, curly quotes and casefold-changing letters
_entity_pieces = st.text(
    alphabet="ab AB_&.-'\u2019\u00e9\u00c9\u03c3\u4e2d1\u0663\u00b2\u2167\u0301\u00df\u0130\u00a0",
    max_size=6,
)


def _entity_found_by_regex(name: str, folded: str) -> bool:
    """The rule as a regex: the reference the validator's scan must agree with."""
    key = entity_text(name)
    return bool(key) and re.search(r"(?<!\w)" + re.escape(key) + r"(?!\w)", folded) is not None


@given(name=_entity_pieces, before=_entity_pieces, after=_entity_pieces, more=_entity_pieces)
def test_entity_found_agrees_with_the_word_boundary_regex(name, before, after, more):
    # the name planted in a text (and a text without it): found exactly where the regex finds it
    for text in (before + name + after, before + name + after + name + more, before + more):
        folded = entity_text(text)
        assert entity_found(name, folded) == _entity_found_by_regex(name, folded), (name, text)
