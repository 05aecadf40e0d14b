"""Recording modes of ``letterchunk.llm.replay.recorder`` against a scripted local server:
``"all"`` records every request, ``"update"`` replays what the cassette still answers, records
only new requests and drops the recorded ones nobody asked for."""

from __future__ import annotations

import json

import httpx
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.fake_openai import FakeOpenAI

from letterchunk.llm.replay import recorder

pytest.importorskip("vcr")


def _ask(base_url: str, text: str) -> str:
    body = {"model": "m", "messages": [{"role": "user", "content": text}]}
    response = httpx.post(f"{base_url}/chat/completions", json=body, timeout=10)
    return response.json()["choices"][0]["message"]["content"]


def _recorded_questions(path) -> list[str]:
    data = yaml.safe_load(path.read_text())
    questions = []
    for interaction in data["interactions"]:
        body = interaction["request"]["body"]
        questions.append(yaml.safe_load(body)["messages"][0]["content"])
    return questions


def test_update_mode_keeps_what_is_still_asked_and_records_only_new_requests(tmp_path):
    path = tmp_path / "letter.yaml"
    with FakeOpenAI(default=lambda body: "first " + body["messages"][0]["content"]) as server:
        with recorder("all").use_cassette(str(path)):
            assert _ask(server.base_url, "a") == "first a"
            assert _ask(server.base_url, "b") == "first b"
        assert server.chat_count == 2
        assert sorted(_recorded_questions(path)) == ["a", "b"]

        # the server now answers differently: a replayed answer shows as "first ..."
        server.default = lambda body: "second " + body["messages"][0]["content"]
        with recorder("update").use_cassette(str(path), allow_playback_repeats=False):
            assert _ask(server.base_url, "a") == "first a"  # replayed, not asked
            assert _ask(server.base_url, "c") == "second c"  # new: asked and recorded
        assert server.chat_count == 3
        assert sorted(_recorded_questions(path)) == ["a", "c"]  # "b" nobody asked: dropped

        with recorder("none").use_cassette(str(path), allow_playback_repeats=False) as played:
            assert _ask(server.base_url, "c") == "second c"
            assert _ask(server.base_url, "a") == "first a"
            assert played.all_played
        assert server.chat_count == 3


def test_update_mode_leaves_an_unchanged_cassette_untouched(tmp_path):
    path = tmp_path / "letter.yaml"
    with FakeOpenAI(default=lambda body: "x") as server:
        with recorder("all").use_cassette(str(path)):
            _ask(server.base_url, "a")
        before = path.read_bytes()
        with recorder("update").use_cassette(str(path), allow_playback_repeats=False):
            _ask(server.base_url, "a")
        assert server.chat_count == 1
        assert path.read_bytes() == before


# -- the JSON body matcher decides as vcrpy's own ``body`` matcher ---------------------------

_JSON = {"Content-Type": "application/json"}
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


def _request(body: bytes, headers: dict[str, str] | None = None):
    from vcr.request import Request

    return Request("POST", "http://127.0.0.1:8080/v1/chat/completions", body, headers or _JSON)


def _decides(matcher, r1, r2) -> bool:
    try:
        matcher(r1, r2)
    except AssertionError:
        return False
    return True


@settings(max_examples=200, deadline=None)
@given(
    a=_json_values,
    b=_json_values,
    same=st.booleans(),
    indent=st.sampled_from([None, 1]),
    sort=st.booleans(),
)
def test_json_body_matches_exactly_when_vcrpys_body_matcher_does(a, b, same, indent, sort):
    import vcr.matchers

    from letterchunk.llm.replay import json_body

    b = a if same else b
    # the same document may be written differently (key order, spacing): equal all the same
    r1 = _request(json.dumps(a).encode())
    r2 = _request(json.dumps(b, indent=indent, sort_keys=sort).encode())
    assert _decides(json_body, r1, r2) == _decides(vcr.matchers.body, r1, r2)
    assert _decides(json_body, r2, r1) == _decides(vcr.matchers.body, r2, r1)


@pytest.mark.parametrize(
    ("b1", "b2", "headers"),
    [
        (b"not json", b"not json", None),  # invalid JSON sent as JSON: compared as bytes
        (b"not json", b"not json!", None),
        (b"a=1&b=2", b"b=2&a=1", {"Content-Type": "application/x-www-form-urlencoded"}),
        (b'{"a": 1}', b'{"a":1}', {"Content-Type": "text/plain"}),
        (b"", b"", None),
    ],
)
def test_json_body_hands_other_bodies_to_vcrpy(b1, b2, headers):
    import vcr.matchers

    from letterchunk.llm.replay import json_body

    r1, r2 = _request(b1, headers), _request(b2, headers)
    assert _decides(json_body, r1, r2) == _decides(vcr.matchers.body, r1, r2)


def test_json_body_names_the_differing_message():
    from letterchunk.llm.replay import json_body

    new = {"model": "m", "messages": [{"role": "system", "content": "s"}, {"content": "q1"}]}
    old = {"model": "m", "messages": [{"role": "system", "content": "s"}, {"content": "q2"}]}
    with pytest.raises(AssertionError, match=r"differ in 'messages' \(message 1 differs\)"):
        json_body(_request(json.dumps(new).encode()), _request(json.dumps(old).encode()))


@settings(max_examples=150, deadline=None)
@given(
    a=_json_values,
    b=_json_values,
    same_body=st.booleans(),
    uris=st.tuples(
        st.sampled_from(
            ["http://127.0.0.1:8080/v1/chat/completions", "https://h/v1/x", "http://h"]
        ),
        st.sampled_from(["http://127.0.0.1:9/v1/chat/completions", "https://h/v1/x", "http://h/"]),
    ),
    methods=st.tuples(st.sampled_from(["POST", "GET"]), st.sampled_from(["POST", "GET"])),
)
def test_same_request_decides_as_vcrpys_five_matchers(a, b, same_body, uris, methods):
    import vcr.matchers
    from vcr.request import Request

    from letterchunk.llm.replay import same_request

    b = a if same_body else b
    r1 = Request(methods[0], uris[0], json.dumps(a).encode(), _JSON)
    r2 = Request(methods[1], uris[1], json.dumps(b, indent=1).encode(), _JSON)
    five = (vcr.matchers.method, vcr.matchers.scheme, vcr.matchers.host, vcr.matchers.path)
    expected = all(_decides(m, r1, r2) for m in (*five, vcr.matchers.body))
    assert _decides(same_request, r1, r2) == expected
    assert _decides(same_request, r1, r2) == expected  # the second time from the kept parts
    r2.body = json.dumps(a).encode()  # a changed body is parsed again, not taken from before
    expected = all(_decides(m, r1, r2) for m in (*five, vcr.matchers.body))
    assert _decides(same_request, r1, r2) == expected


# -- a cassette's index finds the recordings vcrpy's linear scan finds, in the same order ----

# numbers that are equal across types (1 == 1.0 == True) and huge ones no float equals
_numbers = st.sampled_from([0, 1, 1.0, True, False, 0.0, -0.0, 2**53 + 1, float(2**53), 10**400])
_index_values = st.recursive(
    st.none() | _numbers | st.floats(allow_nan=True) | st.text(max_size=2),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner, max_size=2)
    ),
    max_leaves=6,
)
_bodies = st.one_of(
    _index_values.map(lambda v: (json.dumps(v).encode(), _JSON)),
    _index_values.map(lambda v: (json.dumps(v, indent=1, sort_keys=True).encode(), _JSON)),
    st.sampled_from(
        [
            (b"not json", _JSON),
            (b"", _JSON),
            (b'{"a": 1}', {"Content-Type": "text/plain"}),
            (b"a=1&b=2", {"Content-Type": "application/x-www-form-urlencoded"}),
            (b'{"a": 1}', {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}),
        ]
    ),
)
_paths = st.sampled_from(["/v1/chat/completions", "/v1/completions", ""])


def _stored(body_headers, path):
    from vcr.request import Request

    body, headers = body_headers
    return Request("POST", f"http://127.0.0.1:8080{path}", body, headers)


@settings(max_examples=300, deadline=None)
@given(
    recorded=st.lists(st.tuples(_bodies, _paths), max_size=8),
    asked=st.lists(st.tuples(_bodies, _paths), min_size=1, max_size=4),
    picks=st.lists(st.integers(0, 7), max_size=4),
)
def test_the_cassette_index_finds_what_vcrpys_scan_finds(tmp_path_factory, recorded, asked, picks):
    from vcr.cassette import Cassette

    from letterchunk.llm.replay import recorder

    path = tmp_path_factory.mktemp("index") / "c.yaml"
    requests = [_stored(b, p) for b, p in recorded]
    # a request asked again as recorded (same bytes), as a replay does
    questions = [_stored(b, p) for b, p in asked] + [
        _stored((requests[i].body, dict(requests[i].headers)), requests[i].path)
        for i in picks
        if i < len(requests)
    ]
    with recorder("none").use_cassette(str(path), allow_playback_repeats=True) as cassette:
        cassette.data = [(r, {"status": {"code": 200}, "n": n}) for n, r in enumerate(requests)]
        cassette.play_counts.clear()
        for question in questions:
            indexed = [(i, r["n"]) for i, r in cassette._responses(question)]
            scanned = [(i, r["n"]) for i, r in Cassette._responses(cassette, question)]
            assert indexed == scanned
            assert (question in cassette) == bool(scanned)
        # a recording added later (update mode) is found too
        extra = _stored(recorded[0][0] if recorded else (b"{}", _JSON), "/v1/chat/completions")
        cassette.data.append((extra, {"status": {"code": 200}, "n": len(requests)}))
        indexed = [i for i, _ in cassette._responses(extra)]
        assert indexed == [i for i, _ in Cassette._responses(cassette, extra)]
        assert len(requests) in indexed
