"""Replaying recorded model traffic: a cassette (``cassettes/YYYY.yaml``, recorded with vcrpy from
the embedded llama-server answering the real prompts) answers every request a client makes, so
the pipeline runs with no model and no network.

A request matches a recording on method, scheme, host, path and JSON body (the rendered prompt,
response schema, model and generation parameters); the port is left out because the embedded
server listens on a free port chosen at start.  ``Authorization`` and cookies are never written
to a recording.  Each recorded interaction plays at most once, and a request that is not in the
recording fails at once (no transport retry), so a changed prompt or request sequence shows.
The cassette tests, the benchmarks and the retrieval tests replay through here.  Needs vcrpy
(the ``test`` extra).

The request is compared by :func:`same_request`, which decides exactly as vcrpy's own
``method``, ``scheme``, ``host``, ``path`` and ``body`` matchers do together (for a JSON body: the
parsed documents are equal) but parses each body once: vcrpy looks for a request by trying every
recorded one in turn, and its ``body`` matcher parses both documents and writes an indented,
sorted diff of them for every recording that does not match.  On a letter of 600 requests that
diff was most of the replay's time.

vcrpy also finds a request's recordings by comparing it with every recorded interaction in
turn, twice a request, so a replay grows with the square of its requests.  A cassette opened
through :func:`recorder` finds them by an index instead (:class:`_RequestIndex`): the recordings
are grouped by a key that every request equal to them under :func:`same_request` shares, and
only those of the request's group (and any recording whose body is not plain JSON) are compared,
by vcrpy's own loop over the matchers, in recording order.  So the same recordings match, in the
same order, and vcrpy keeps deciding which one plays.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from letterchunk.llm.backend import MODEL_ID
from letterchunk.llm.client import LLMClient
from letterchunk.llm.connect import open_client

__all__ = ["REPLAY_ENV", "json_body", "recorder", "replayed_client", "same_request"]

# never contacted: the recording answers (the port is not matched)
REPLAY_ENV = {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "OPENAI_API_KEY": "sk-replay-dummy"}


# a body that is not JSON: compared by vcrpy's own matcher
_NOT_JSON = object()
# parsed JSON of each body seen, by its bytes (a bytes object keeps its hash, so a recorded body
# is hashed once); bounded, since a long session replays many cassettes
_PARSED: dict[bytes, object] = {}
_PARSED_MAX = 20_000


def _is_plain_json(request: Any) -> bool:
    """Whether vcrpy's ``body`` matcher would parse ``request``'s body as JSON and nothing more
    (JSON content type, not chunked, not a form or XML-RPC body)."""
    headers = request.headers
    content_type = str(headers.get("Content-Type", "")).lower()
    chunked = "chunked" in str(headers.get("Transfer-Encoding", "")).lower()
    return "application/json" in content_type and not chunked and isinstance(request.body, bytes)


def _parsed(body: bytes) -> object:
    try:
        return _PARSED[body]
    except KeyError:
        pass
    try:
        value: object = json.loads(body) if body else None
    except ValueError:
        value = _NOT_JSON
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[body] = value
    return value


def _difference(new: object, recorded: object) -> str:
    """Where two JSON documents differ, in a few words (the first key, the first message)."""
    if not (isinstance(new, dict) and isinstance(recorded, dict)):
        return "the JSON bodies differ"
    key = next((k for k in new if new[k] != recorded.get(k)), None)
    key = next((k for k in recorded if k not in new), None) if key is None else key
    where = f"the JSON bodies differ in {key!r}"
    a, b = new.get("messages"), recorded.get("messages")
    if isinstance(a, list) and isinstance(b, list) and a != b:
        i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        where += (
            f" (message {i} differs)"
            if i is not None
            else f" ({len(a)} message(s) in this request, {len(b)} recorded)"
        )
    return where


def json_body(r1: Any, r2: Any) -> None:
    """vcrpy matcher: the two requests' bodies are equal, as vcrpy's ``body`` matcher decides
    (for JSON requests: the parsed documents are equal), with each body parsed once and a short
    message naming what differs; any other body goes to vcrpy's own matcher."""
    import vcr.matchers  # deferred: vcrpy comes with the test extra, needed only to replay

    if not (_is_plain_json(r1) and _is_plain_json(r2)):
        return vcr.matchers.body(r1, r2)
    if r1.body == r2.body:
        return None
    new, recorded = _parsed(r1.body), _parsed(r2.body)
    if new is _NOT_JSON or recorded is _NOT_JSON:
        return vcr.matchers.body(r1, r2)
    if new != recorded:
        raise AssertionError(_difference(new, recorded))
    return None


_PARTS = ("method", "scheme", "host", "path")


def _parts(request: Any) -> tuple[tuple[str, str, str, str], object]:
    """``request``'s method, scheme, host and path (an empty path is "/", as vcrpy compares
    it), and its parsed JSON body (``_NOT_JSON``: left to vcrpy's matcher); kept on the request
    while its URI, headers and body are the same objects, since vcrpy compares one request with
    every recording in turn."""
    uri, headers, body = request.uri, request.headers, request.body
    cached = request.__dict__.get("_letterchunk_parts")
    if cached is not None and cached[0] is uri and cached[1] is headers and cached[2] is body:
        return cached[3], cached[4]
    head = (request.method, request.scheme, request.host, request.path or "/")
    parsed = _parsed(body) if _is_plain_json(request) else _NOT_JSON
    request.__dict__["_letterchunk_parts"] = (uri, headers, body, head, parsed)
    return head, parsed


def same_request(r1: Any, r2: Any) -> None:
    """vcrpy matcher: vcrpy's ``method``, ``scheme``, ``host``, ``path`` and ``body`` matchers
    in one, deciding as they do (JSON bodies: the parsed documents are equal) from parts kept on
    each request, so a recording is not parsed again for every request it is compared with."""
    import vcr.matchers  # deferred: vcrpy comes with the test extra, needed only to replay

    head1, body1 = _parts(r1)
    head2, body2 = _parts(r2)
    if head1 != head2:
        name, a, b = next((n, x, y) for n, x, y in zip(_PARTS, head1, head2, strict=True) if x != y)
        raise AssertionError(f"{name}: {a} != {b}")
    if body1 is _NOT_JSON or body2 is _NOT_JSON:
        return vcr.matchers.body(r1, r2)
    if body1 is not body2 and body1 != body2:
        raise AssertionError(_difference(body1, body2))
    return None


def _key(value: object) -> object:
    """A hashable form of a parsed JSON value, the same for every value equal to it (``==``,
    as vcrpy's ``body`` matcher compares): a dict by its sorted items, a list as a tuple.
    Numbers stay as they are: Python hashes equal numbers alike (``1``, ``1.0``, ``True``).
    Unequal values may share a key; the matcher still decides."""
    if isinstance(value, dict):
        return ("{", tuple(sorted((str(k), _key(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("[", tuple(_key(v) for v in value))
    return value


def _request_key(request: Any) -> object:
    """The index key of ``request``: its method, scheme, host and path and its JSON body's
    key; ``_NOT_JSON`` for a body vcrpy's own matcher compares."""
    head, body = _parts(request)
    return _NOT_JSON if body is _NOT_JSON else (head, _key(body))


class _RequestIndex:
    """A cassette's recordings by :func:`_request_key`, kept up to date as it records."""

    def __init__(self, cassette: Any) -> None:
        self._cassette = cassette
        self._groups: dict[object, list[int]] = {}
        self._loose: list[int] = []  # recordings with a body that is not plain JSON
        self._seen = 0

    def _update(self) -> None:
        data = self._cassette.data
        for index in range(self._seen, len(data)):
            key = _request_key(data[index][0])
            if key is _NOT_JSON:
                self._loose.append(index)
            else:
                self._groups.setdefault(key, []).append(index)
        self._seen = len(data)

    def _candidates(self, request: Any) -> Iterable[int]:
        self._update()
        key = _request_key(request)
        if key is _NOT_JSON:
            return range(len(self._cassette.data))
        group = self._groups.get(key, [])
        return sorted([*group, *self._loose]) if self._loose else group

    def responses(self, request: Any) -> Iterator[tuple[int, Any]]:
        """What vcrpy's ``Cassette._responses`` yields: (index, response) of every recording
        that matches ``request``, in recording order."""
        import vcr.matchers  # deferred: vcrpy comes with the test extra

        cassette = self._cassette
        request = cassette._before_record_request(request)
        data = cassette.data
        for index in self._candidates(request) if request else range(len(data)):
            stored, response = data[index]
            if vcr.matchers.requests_match(request, stored, cassette._match_on):
                yield index, response


class _Recorder:
    """vcrpy's VCR, whose cassettes look requests up through a :class:`_RequestIndex`."""

    def __init__(self, recording: Any) -> None:
        self._recording = recording

    def __getattr__(self, name: str) -> Any:
        return getattr(self._recording, name)

    @contextlib.contextmanager
    def use_cassette(self, path: str, **kwargs: Any) -> Iterator[Any]:
        with self._recording.use_cassette(path, **kwargs) as cassette:
            if [m.__name__ for m in cassette._match_on] == ["same_request"]:
                # an instance attribute: vcrpy's play_response and __contains__ call it
                cassette._responses = _RequestIndex(cassette).responses
            yield cassette


def recorder(record_mode: str = "none") -> Any:
    """A vcrpy recorder with letterchunk's matching rules: ``"none"`` replays, ``"all"`` records
    everything anew, ``"update"`` replays the recorded interactions that are still requested,
    records only the requests the cassette has no answer for, and drops the recorded ones no
    longer requested (a changed follow-up question re-records that question, not the chunk's
    minute-long structured call, whose recorded answer the same deterministic server gave)."""
    import vcr  # deferred: vcrpy comes with the test extra, needed only to record or replay

    update = record_mode == "update"
    recording = vcr.VCR(
        record_mode="new_episodes" if update else record_mode,
        match_on=["same_request"],
        filter_headers=["authorization", "cookie", "set-cookie"],
        decode_compressed_response=True,
        drop_unused_requests=update,
    )
    recording.register_matcher("same_request", same_request)
    return _Recorder(recording)


@contextlib.contextmanager
def replayed_client(cassette: str | Path) -> Iterator[tuple[LLMClient, Any]]:
    """A client for the embedded model's settings whose requests ``cassette`` answers; yields
    ``(client, played)`` so the caller can check that every recording was asked for
    (``played.all_played``)."""
    with (
        recorder("none").use_cassette(str(cassette), allow_playback_repeats=False) as played,
        open_client(
            env=REPLAY_ENV, cache="off", model=MODEL_ID, mode="JSON_SCHEMA", transport_retries=0
        ) as client,
    ):
        yield client, played
