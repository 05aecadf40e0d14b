"""The review page's server: ``letterchunk review DIR`` on 127.0.0.1.

One :class:`ReviewServer` serves one enriched output folder with the standard library's
``ThreadingHTTPServer``:

* ``GET /?t=TOKEN`` the page (``templates/review.html``, one self-contained file: inline CSS
  and JS, no network);
* ``GET /api/queue`` the queue (:mod:`letterchunk.review.queue`, kept between starts by
  :mod:`letterchunk.review.queuecache`, written when the page first asks for the warnings)
  as compact JSON, with the status of every item read
  from ``reviews.jsonl`` at that moment (so a reload shows what another tab or another
  ``review`` of the same folder decided);
* ``GET /api/warnings`` the validator's warned chunks, computed once in another process, at
  the lowest priority, after the queue is first served (validating every file takes longer
  than the page may take to open, and would hold this process's interpreter while decisions
  are posted);
* ``POST /api/decide`` accept / reject / skip an item, ``POST /api/edit`` a summary, concepts
  (only from the vocabulary) or a principle statement, ``POST /api/undo`` a record: each one
  line appended to ``reviews.jsonl`` (locked, crash-safe: ``review.records.append_review``).
  An edit is checked first (``review.apply.validate_review``: the chunk with the edit applied
  must still validate): one that would break the chunk is refused (422) with the validator's
  message.  An accept or reject is stored at once; the next run applies it, or lists it as
  refused when the validator rejects the chunk it makes.

What is refused, and why: the server listens on loopback only.  Every request must carry a
Host header naming ``127.0.0.1:PORT`` or ``localhost:PORT`` (a page of another site that
rebinds its name to 127.0.0.1 sends its own name: DNS rebinding).  Every request but the page
itself carries the token in ``X-Review-Token`` (the page's URL carries it as ``?t=``),
compared in constant time; a POST must also be JSON and, when the browser sends an Origin,
come from this server's own origin.  Anything else is answered 403 and nothing is written.
Every response forbids framing and sniffing, and the page's scripts may only talk to the
server they came from (Content-Security-Policy).

Two ``review`` processes on one folder both work: each has its own port and token, their
appends are serialised by the file lock, and each page load reads the file afresh.
"""

from __future__ import annotations

import hmac
import json
import logging
import multiprocessing
import os
import re
import secrets
import socket
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from letterchunk.contract.jsontypes import JSONValue
from letterchunk.review.apply import validate_review
from letterchunk.review.queue import (
    Chunk,
    Item,
    Queue,
    statuses,
    warning_items,
    warning_notes,
)
from letterchunk.review.queuecache import queue_and_keeper
from letterchunk.review.records import (
    AnchorKey,
    ReviewRecord,
    append_review,
    effective_reviews,
    new_record,
    read_reviews,
)

__all__ = ["ReviewServer", "Validator", "HOST", "MAX_BODY"]

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
MAX_BODY = 256 * 1024  # the largest edit is a summary or a list of concepts
MAX_REVIEWER = 80
PAGE_NAME = "review.html"
EDIT_FIELDS = ("summary", "concepts", "principle_statement")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# the page needs its own inline script and style, and may talk only to this server
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)

#: a check of a correction before it is stored: the validator's message, or None
Validator = Callable[[Path, ReviewRecord], "str | None"]


class Refused(Exception):
    """A request answered with ``status`` and ``message`` (nothing written)."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """Log (never print) a request that failed: a page closed or reloaded before its
        answer came is routine; anything else is logged with its traceback."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            log.debug("%s left before its answer", client_address)
        else:
            log.exception("a request from %s failed", client_address)


def _template() -> str:
    page = resources.files("letterchunk.review") / "templates" / PAGE_NAME
    return page.read_text(encoding="utf-8")


def _compact(data: object) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class ReviewServer:
    """The review page of ``folder``, served on ``127.0.0.1:port`` (0: a free port)."""

    def __init__(
        self,
        folder: str | Path,
        *,
        port: int = 0,
        reviewer: str = "analyst",
        token: str | None = None,
        validate: Validator | None = validate_review,
    ) -> None:
        self.folder = Path(folder)
        self.queue: Queue
        self.queue, self._keep_queue = queue_and_keeper(self.folder)
        self.reviewer = _reviewer(reviewer)
        self.token = token or secrets.token_urlsafe(24)
        self.validate = validate
        self._lock = threading.Lock()
        self._base_items = len(self.queue.items)
        self._warned = threading.Event()
        self._warnings_started = False
        self._warnings: list[Item] = []
        self._records: list[ReviewRecord] = read_reviews(self.folder)
        self._chunk_rows: list[bytes] | None = None  # each chunk's JSON without edits
        self._item_rows: list[bytes] = []  # the items' JSON rows, comma-separated, in parts
        self._items_encoded = 0  # how many items _item_rows holds
        self._items_of: dict[AnchorKey, list[int]] = {}  # the items' numbers by their key
        self._httpd = _Server((HOST, port), _handler(self))
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self._page = _template().encode("utf-8")
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ life cycle

    @property
    def url(self) -> str:
        """The page's address, token included: the one thing to open."""
        return f"http://{HOST}:{self.port}/?t={self.token}"

    def start(self) -> ReviewServer:
        """Serve in a background thread; returns self."""
        thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def serve_forever(self) -> None:
        """Serve until interrupted (the CLI's way)."""
        self._httpd.serve_forever()

    def start_warnings(self) -> None:
        """Start validating once, when the page has its queue or asks for the warnings: not
        before, so the validator does not compete with the page's opening for the CPU (and
        then at the lowest priority, so the browser parsing and drawing the queue goes
        first)."""
        with self._lock:
            if self._warnings_started:
                return
            self._warnings_started = True
        threading.Thread(target=self._compute_warnings, daemon=True).start()

    def _keep(self) -> None:
        """Keep the queue for the next start, once: when the page asks for the warnings, so
        after it has drawn the queue (encoding the whole queue would slow its opening)."""
        with self._lock:
            keep, self._keep_queue = self._keep_queue, _nothing
        try:
            keep()
        except Exception:  # the page works without it; the next start builds it again
            log.exception("keeping the review queue of %s failed", self.folder)

    def close(self) -> None:
        """Stop serving (from another thread than the one serving) and free the port."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def close_socket(self) -> None:
        """Free the port after :meth:`serve_forever` returned."""
        self._httpd.server_close()

    def __enter__(self) -> ReviewServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _compute_warnings(self) -> None:
        # in another process: validating every file holds the interpreter for seconds, which
        # in this one would stall the requests served meanwhile
        context = multiprocessing.get_context("spawn")
        try:
            try:
                with ProcessPoolExecutor(1, context, _lowest_priority) as pool:
                    job = pool.submit(warning_notes, str(self.folder), self.queue.letters)
                    notes = job.result()
            except (BrokenProcessPool, OSError):
                # no child process here (e.g. a main module spawn cannot import): in this one
                log.debug("validating %s in this process", self.folder, exc_info=True)
                notes = warning_notes(self.folder, self.queue.letters)
            found = warning_items(self.queue, notes)
        except Exception:  # the page still works without them; say why in the log
            log.exception("validating %s for the review page failed", self.folder)
            found = []
        with self._lock:
            self._warnings = found
            self.queue.items.extend(found)
        self._warned.set()

    # ------------------------------------------------------------------ requests

    def check_host(self, host: str | None) -> None:
        allowed = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        if host not in allowed:
            raise Refused(HTTPStatus.FORBIDDEN, "Host must be 127.0.0.1:PORT or localhost:PORT")

    def check_token(self, given: str | None) -> None:
        if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
            raise Refused(HTTPStatus.FORBIDDEN, "missing or wrong token: open the URL printed")

    def check_origin(self, origin: str | None, site: str | None) -> None:
        allowed = {f"http://127.0.0.1:{self.port}", f"http://localhost:{self.port}"}
        if origin is not None and origin not in allowed:
            raise Refused(HTTPStatus.FORBIDDEN, "cross-origin write refused")
        if site is not None and site not in ("same-origin", "none"):
            raise Refused(HTTPStatus.FORBIDDEN, "cross-site write refused")

    def page(self) -> bytes:
        return self._page

    def queue_json(self) -> bytes:
        """The queue and the status of each item, from ``reviews.jsonl`` as it is now."""
        records = read_reviews(self.folder)
        with self._lock:
            self._records = records
            data = self._queue_bytes(records)
        self.start_warnings()
        return data

    def warnings_json(self, timeout: float = 120.0) -> bytes:
        self.start_warnings()
        self._keep()
        self._warned.wait(timeout)
        with self._lock:
            first = self._base_items
            items = list(self._warnings)
            status = self._status_rows(self._records, first, first + len(items))
            return _compact(
                {
                    "ready": self._warned.is_set(),
                    "first": first,
                    "items": [_item_row(i) for i in items],
                    "status": status,
                }
            )

    def _grown(self) -> None:
        """Extend the encoded item rows and the key index to the items there are now (the
        validator's warnings are added after the start); each item is encoded once, in one
        encoding of all the new ones."""
        q, first = self.queue, self._items_encoded
        if first == len(q.items):
            return
        anchors = [c.anchor for c in q.chunks]
        for n, item in enumerate(q.items[first:], start=first):
            self._items_of.setdefault((anchors[item.chunk], item.kind, item.target), []).append(n)
        self._item_rows.append(_compact([_item_row(i) for i in q.items[first:]])[1:-1])
        self._items_encoded = len(q.items)

    def _status_rows(
        self, records: list[ReviewRecord], first: int, end: int
    ) -> dict[str, list[JSONValue]]:
        """``"n" -> [status, reviewer, value, record id]`` of the items ``first`` to ``end``
        (excluded) some record decided, by item number."""
        self._grown()
        decided = []
        for key, (status, rec) in statuses(records).items():
            for n in self._items_of.get(key, ()):
                if first <= n < end:
                    decided.append((n, [status, rec.reviewer, rec.value, rec.id]))
        return {str(n): row for n, row in sorted(decided, key=lambda found: found[0])}

    def _chunk_row(self, c: Chunk, edits: dict[AnchorKey, ReviewRecord]) -> list[JSONValue]:
        summary = edits.get((c.anchor, "summary", None))
        concepts = edits.get((c.anchor, "concepts", None))
        principles: list[JSONValue] = []
        for statement, quote in c.principles:
            edited = edits.get((c.anchor, "principle_statement", quote or statement))
            principles.append([_edited(edited, statement), quote])
        return [
            c.letter,
            c.chunk_id,
            c.content,
            _edited(summary, c.summary),
            _edited(concepts, list(c.concepts)),
            principles,
        ]

    def _queue_bytes(self, records: list[ReviewRecord]) -> bytes:
        """The queue's JSON: each chunk and item is encoded once, on the first request; a
        chunk some record edits is encoded again with the edits, on each request."""
        q = self.queue
        if self._chunk_rows is None:
            self._chunk_rows = [_compact(self._chunk_row(c, {})) for c in q.chunks]
        self._grown()
        edits = effective_reviews(records)
        touched = {key[0] for key in edits}
        chunks = [
            _compact(self._chunk_row(c, edits)) if c.anchor in touched else row
            for c, row in zip(q.chunks, self._chunk_rows, strict=True)
        ]
        head = _compact(
            {
                "folder": self.folder.name,
                "reviewer": self.reviewer,
                "thresholds": {"confession": q.thresholds.confession, "rule": q.thresholds.rule},
                "run": q.run,
                "vocabulary": q.vocabulary,
                "letters": q.letters,
            }
        )
        status = _compact(self._status_rows(records, 0, len(q.items)))
        ready = _compact(self._warned.is_set())
        return b"".join(
            [head[:-1], b',"chunks":[', b",".join(chunks), b'],"items":[']
            + [b",".join(self._item_rows), b'],"status":', status]
            + [b',"warnings_ready":', ready, b"}"]
        )

    def decide(self, body: dict[str, Any]) -> dict[str, Any]:
        """Accept, reject or skip an item; the record's id and the item's new status."""
        decision = body.get("decision")
        if decision not in ("accept", "reject", "skip"):
            raise Refused(HTTPStatus.BAD_REQUEST, "decision must be accept, reject or skip")
        with self._lock:
            item = self._item(body.get("item"))
            value = _decided_value(item, decision)
            record = self._record(
                chunk_index=item.chunk,
                field=item.kind,
                target=item.target,
                quote=item.quote,
                model_value=item.model_value,
                model_p=item.p,
                threshold=item.threshold,
                decision=decision,
                value=value,
                reviewer=body.get("reviewer"),
            )
            self._append(record)
        return {"id": record.id, "status": _status_of(decision), "reviewer": record.reviewer}

    def edit(self, body: dict[str, Any]) -> dict[str, Any]:
        """Store an edit of a chunk's summary, concepts or a principle's statement."""
        field = body.get("field")
        if field not in EDIT_FIELDS:
            raise Refused(HTTPStatus.BAD_REQUEST, f"field must be one of {', '.join(EDIT_FIELDS)}")
        with self._lock:
            index = self._chunk_index(body.get("chunk"))
            chunk = self.queue.chunks[index]
            value, target, model_value, quote = self._edit_value(chunk, field, body)
            record = self._record(
                chunk_index=index,
                field=field,
                target=target,
                quote=quote,
                model_value=model_value,
                model_p=None,
                threshold=None,
                decision="edit",
                value=value,
                reviewer=body.get("reviewer"),
            )
            message = self.validate(self.folder, record) if self.validate else None
            if message:
                raise Refused(HTTPStatus.UNPROCESSABLE_ENTITY, message)
            self._append(record)
        return {"id": record.id, "status": "edited", "value": value}

    def _edit_value(
        self, chunk: Any, field: str, body: dict[str, Any]
    ) -> tuple[JSONValue, str | None, JSONValue, str | None]:
        value = body.get("value")
        if field == "concepts":
            known = set(self.queue.vocabulary)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise Refused(HTTPStatus.BAD_REQUEST, "concepts must be a list of names")
            unknown = [v for v in value if v not in known]
            if unknown:
                raise Refused(
                    HTTPStatus.UNPROCESSABLE_ENTITY,
                    f"not in the concept vocabulary: {', '.join(unknown)}",
                )
            return list(dict.fromkeys(value)), None, list(chunk.concepts), None
        if not isinstance(value, str) or not value.strip():
            raise Refused(HTTPStatus.BAD_REQUEST, f"{field} must be a non-empty text")
        value = value.strip()
        if field == "summary":
            return value, None, chunk.summary, None
        at = body.get("principle")
        if not isinstance(at, int) or not 0 <= at < len(chunk.principles):
            raise Refused(HTTPStatus.BAD_REQUEST, "principle must be the index of a principle")
        statement, quote = chunk.principles[at]
        return value, quote or statement, statement, quote

    def undo(self, body: dict[str, Any]) -> dict[str, Any]:
        """Cancel the record ``body["id"]``; the status its item falls back to."""
        target = body.get("id")
        with self._lock:
            found = next((r for r in self._records if r.id == target), None)
            if found is None:
                self._records = read_reviews(self.folder)
                found = next((r for r in self._records if r.id == target), None)
            if found is None or found.decision == "undo":
                raise Refused(HTTPStatus.NOT_FOUND, "no such decision to undo")
            index = self._chunk_by_anchor(found)
            record = self._record(
                chunk_index=index,
                field=found.field,
                target=found.target,
                quote=found.quote,
                model_value=found.model_value,
                model_p=found.model_p,
                threshold=found.threshold,
                decision="undo",
                value=None,
                reviewer=body.get("reviewer"),
                undoes=found.id,
            )
            self._append(record)
            now = statuses(self._records).get(found.key)
        status, back = now if now is not None else ("open", None)
        return {
            "id": record.id,
            "undone": found.id,
            "status": status,
            "value": back.value if back else None,
            "reviewer": back.reviewer if back else None,
        }

    # ------------------------------------------------------------------ helpers

    def _item(self, number: object) -> Item:
        if not isinstance(number, int) or not 0 <= number < len(self.queue.items):
            raise Refused(HTTPStatus.BAD_REQUEST, "item must be the number of a queue item")
        return self.queue.items[number]

    def _chunk_index(self, number: object) -> int:
        if not isinstance(number, int) or not 0 <= number < len(self.queue.chunks):
            raise Refused(HTTPStatus.BAD_REQUEST, "chunk must be the number of a chunk")
        return number

    def _chunk_by_anchor(self, record: ReviewRecord) -> int:
        for i, c in enumerate(self.queue.chunks):
            if c.chunk_id == record.chunk_id and c.letter == record.letter:
                return i
        raise Refused(HTTPStatus.NOT_FOUND, "the chunk of that decision is not in this folder")

    def _record(self, *, chunk_index: int, reviewer: object, **fields: Any) -> ReviewRecord:
        chunk = self.queue.chunks[chunk_index]
        try:
            return new_record(
                chunk_id=chunk.chunk_id,
                letter=chunk.letter,
                text_sha256=chunk.sha256,
                reviewer=_reviewer(reviewer) if reviewer is not None else self.reviewer,
                run=dict(self.queue.run),
                **fields,
            )
        except (ValueError, TypeError) as exc:
            raise Refused(HTTPStatus.BAD_REQUEST, str(exc)) from None

    def _append(self, record: ReviewRecord) -> None:
        append_review(self.folder, record)
        self._records.append(record)


def _nothing() -> None:
    """Keeping a queue read from the kept one, or kept already."""


def _lowest_priority() -> None:
    """In the validator's process: yield the CPU to the browser and to this server."""
    if hasattr(os, "nice"):
        os.nice(19)


def _reviewer(name: object) -> str:
    if not isinstance(name, str):
        raise Refused(HTTPStatus.BAD_REQUEST, "reviewer must be a name")
    name = _CONTROL.sub(" ", name).strip()[:MAX_REVIEWER]
    if not name:
        raise Refused(HTTPStatus.BAD_REQUEST, "reviewer must not be empty")
    return name


def _decided_value(item: Item, decision: str) -> JSONValue:
    """The analyst's value of an accept or reject (None for a skip).  A yes/no question: the
    analyst's answer (accepting a yes is yes, rejecting it no).  Concepts: accepted, the
    model's list; rejected, None (no replacement: an edit gives one).  A flagged chunk:
    whether it is right as it stands."""
    if decision == "skip":
        return None
    accept = decision == "accept"
    if item.kind in ("confession", "rule") and isinstance(item.model_value, bool):
        return item.model_value if accept else not item.model_value
    if item.kind == "concepts":
        return item.model_value if accept else None
    return accept


def _edited(record: ReviewRecord | None, original: JSONValue) -> JSONValue:
    return record.value if record is not None and record.decision == "edit" else original


def _status_of(decision: str) -> str:
    return {"accept": "accepted", "reject": "rejected", "skip": "skipped"}[decision]


def _item_row(item: Item) -> list[JSONValue]:
    """One item as the page reads it: [kind, chunk, start, end, model value, p, threshold,
    uncertainty, text]; text is the target when its offsets were not found, else the note."""
    text = item.note if item.kind == "chunk" else (item.target if item.start is None else None)
    flag = item.target if item.kind == "chunk" else None
    return [
        item.kind,
        item.chunk,
        item.start,
        item.end,
        item.model_value,
        item.p,
        item.threshold,
        item.uncertainty,
        text,
        flag,
    ]


class _Handler(BaseHTTPRequestHandler):
    """One request to the review page; ``review`` is the server it answers for."""

    review: ReviewServer
    protocol_version = "HTTP/1.1"
    server_version = "letterchunk-review"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        # headers and body go out as two writes: without this, Nagle's algorithm holds
        # the body until the client's delayed ACK (~40 ms a request on Linux)
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", CSP)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: object) -> None:
        self._send(status, _compact(data), "application/json; charset=utf-8")

    def _guarded(self, work: Callable[[], None]) -> None:
        try:
            self.review.check_host(self.headers.get("Host"))
            work()
        except Refused as exc:
            self._json(exc.status, {"error": str(exc)})

    def do_GET(self) -> None:  # noqa: N802
        self._guarded(self._get)

    def do_POST(self) -> None:  # noqa: N802
        self._guarded(self._post)

    def _get(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/":
            self.review.check_token(parse_qs(url.query).get("t", [None])[0])
            self._send(200, self.review.page(), "text/html; charset=utf-8")
            return
        self.review.check_token(self.headers.get("X-Review-Token"))
        if url.path == "/api/queue":
            self._send(200, self.review.queue_json(), "application/json; charset=utf-8")
        elif url.path == "/api/warnings":
            self._send(200, self.review.warnings_json(), "application/json; charset=utf-8")
        else:
            raise Refused(HTTPStatus.NOT_FOUND, "no such page")

    def _post(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        # read the body first, so a refused request leaves the connection usable
        body = self.rfile.read(length) if 0 < length <= MAX_BODY else b""
        self.review.check_token(self.headers.get("X-Review-Token"))
        self.review.check_origin(self.headers.get("Origin"), self.headers.get("Sec-Fetch-Site"))
        if length > MAX_BODY:
            self.close_connection = True
            raise Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "request too large")
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if kind != "application/json":
            raise Refused(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send application/json")
        try:
            data = json.loads(body)
        except ValueError:
            raise Refused(HTTPStatus.BAD_REQUEST, "the body is not JSON") from None
        if not isinstance(data, dict):
            raise Refused(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
        actions = {"/api/decide": self.review.decide, "/api/edit": self.review.edit}
        actions["/api/undo"] = self.review.undo
        action = actions.get(urlsplit(self.path).path)
        if action is None:
            raise Refused(HTTPStatus.NOT_FOUND, "no such action")
        self._json(200, action(data))


def _handler(server: ReviewServer) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"review": server})
