"""The repair report: ``DIR/YYYY.report.jsonl`` (one record per attempt) and ``DIR/report.html``.

:class:`RepairReport` collects the records :mod:`letterchunk.repair` produces and rewrites its
JSONL file atomically after every chunk, so a halted or interrupted run still leaves a complete
report of everything done so far.

:func:`build_html` turns every ``*.report.jsonl`` of a folder (with the chunk files
``X.jsonl`` and evidence sidecars ``X.evidence.jsonl`` beside them) into one self-contained
static page: inline CSS and JS, no network.  The data travels as JSON inside the page; the
page's script computes the totals (by rule, letter and outcome), draws one card per chunk (text
with evidence quotes highlighted, violations, a word-level before/after diff of each change,
computed here with :mod:`difflib`) and filters the cards by letter, rule and outcome — also
from the URL fragment (``report.html#letter=1977&outcome=failed``), so filters can be linked
and tested.  Nothing is inserted as HTML by the script: every text goes through
``textContent``, and the embedded JSON escapes ``<``, ``>`` and ``&``.
"""

from __future__ import annotations

import difflib
import html
import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .io import atomic_write_text, read_json_objects

__all__ = ["RepairReport", "chunk_records", "write_letter_report", "report_path", "load_records", "collect", "build_html", "word_diff",
           "evidence_marks", "REPORT_SUFFIX", "HTML_NAME"]

log = logging.getLogger(__name__)

REPORT_SUFFIX = ".report.jsonl"
HTML_NAME = "report.html"


def report_path(chunk_file: str | Path) -> Path:
    """``DIR/YYYY.jsonl`` -> ``DIR/YYYY.report.jsonl`` (any ``X.jsonl`` -> ``X.report.jsonl``)."""
    p = Path(chunk_file)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    return p.with_name(stem + REPORT_SUFFIX)


class RepairReport:
    """Per-attempt records of one chunk file, rewritten atomically on every :meth:`add`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.records: list[dict] = []

    @classmethod
    def for_letter(cls, out_dir: str | Path, year: int) -> RepairReport:
        return cls(Path(out_dir) / f"{year}{REPORT_SUFFIX}")

    def add(self, records: Iterable[dict]) -> None:
        self.records.extend(records)
        self.flush()

    def flush(self) -> None:
        lines = [json.dumps(r, ensure_ascii=False) for r in self.records]
        atomic_write_text(self.path, "".join(line + "\n" for line in lines))

    @property
    def usage(self) -> dict:
        """Tokens over every recorded attempt."""
        return {
            "prompt_tokens": sum(r.get("usage", {}).get("prompt_tokens", 0) for r in self.records),
            "completion_tokens": sum(
                r.get("usage", {}).get("completion_tokens", 0) for r in self.records
            ),
        }


def chunk_records(outcome: Any, year: int | None = None, source: str | None = None) -> list[dict]:
    """Report records of one pipeline ``ChunkOutcome``.

    A chunk whose first answer was valid never entered the repair loop and has no records of its
    own; it gets one ``enrich`` record (usage, source) so the totals count every chunk.
    """
    records = list(getattr(outcome, "records", None) or [])
    if records:
        return [_relabel(r, source) for r in records]
    chunk = getattr(outcome, "chunk", None)
    usage = getattr(outcome, "usage", None)
    span = None
    if chunk is not None:
        ss = chunk.metadata.source_span
        span = [ss.start_char, ss.end_char_exclusive]
        year = chunk.metadata.letter_year
    return [{
        "chunk_id": outcome.chunk_id,
        "letter_year": year if year is not None else int(outcome.chunk_id[:4]),
        "attempt": 1,
        "kind": "enrich",
        "asked_fields": [],
        "violations": [],
        "changes": [],
        "usage": {"prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
                  "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0)},
        "latency_s": None,
        "source": "cache" if getattr(outcome, "cache_hits", 0) else (source or "live"),
        "error": None,
        "outcome": "valid" if chunk is not None else "failed",
        "span": span,
    }]


def _relabel(record: dict, source: str | None) -> dict:
    if source and record.get("source") == "live":
        return {**record, "source": source}
    return record


def write_letter_report(out_dir: str | Path, year: int, outcome: Any = None,
                        failure: BaseException | None = None, *,
                        source: str | None = None) -> Path:
    """Write ``DIR/YYYY.report.jsonl`` for one letter of a pipeline run (atomic).

    ``outcome`` is the ``pipeline.LetterOutcome`` (or the ``partial`` one a halt carries);
    ``failure`` the ``RepairExhausted`` that halted the letter, whose ``records`` name the chunk
    that stopped it.  ``source="cassette"`` labels answers that the HTTP layer calls live but
    a vcrpy cassette really served.
    """
    report = RepairReport.for_letter(out_dir, year)
    records: list[dict] = []
    for chunk_outcome in getattr(outcome, "outcomes", None) or []:
        records += chunk_records(chunk_outcome, year, source)
    records += [_relabel(r, source) for r in getattr(failure, "records", None) or []]
    report.add(records)
    return report.path


# --------------------------------------------------------------------------- reading


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    objects, bad = read_json_objects(path)
    for n, reason in bad:
        log.warning("%s:%d: skipped, %s", path, n, reason)
    return objects
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            log.warning("%s:%d: skipped, not JSON (%s)", path, n, exc)
            continue
        if isinstance(obj, dict):
            out.append(obj)
        else:
            log.warning("%s:%d: skipped, not a JSON object", path, n)
    return out


def load_records(path: str | Path) -> list[dict]:
    """The records of one ``*.report.jsonl`` (bad lines are skipped with a warning)."""
    return _read_jsonl(Path(path))


# --------------------------------------------------------------------------- diff + marks

_TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)


def _as_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def word_diff(before: Any, after: Any) -> list[list[str]]:
    """Word-level diff of two values as ``[[op, text], ...]`` with op in eq / del / ins."""
    a, b = _TOKEN.findall(_as_text(before)), _TOKEN.findall(_as_text(after))
    out: list[list[str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(["eq", "".join(a[i1:i2])])
            continue
        if i2 > i1:
            out.append(["del", "".join(a[i1:i2])])
        if j2 > j1:
            out.append(["ins", "".join(b[j1:j2])])
    return out


def evidence_marks(content: str, quotes: dict[str, list[str]]) -> list[list]:
    """``[[start, end, kind], ...]`` of each quote in ``content`` (whitespace-insensitive).

    Sorted, non-overlapping (the earlier quote wins); quotes not found are left out.
    """
    found: list[list] = []
    for kind, items in quotes.items():
        for quote in items:
            words = quote.split()
            if not words:
                continue
            m = re.search(r"\s+".join(re.escape(w) for w in words), content)
            if m:
                found.append([m.start(), m.end(), kind])
    found.sort()
    out: list[list] = []
    for mark in found:
        if not out or mark[0] >= out[-1][1]:
            out.append(mark)
    return out


# --------------------------------------------------------------------------- collecting


def _rules() -> dict[str, dict]:
    out: dict[str, dict] = {}
    try:
        from .validate import RULES
    except ImportError:  # pragma: no cover - validate is part of the package
        RULES = {}
    for code, entry in RULES.items():
        out[code] = {"severity": entry[0], "description": entry[1], "kind": entry[2]}
    from .repair import RESPONSE_RULES

    for code, description in RESPONSE_RULES.items():
        out.setdefault(code, {"severity": "error", "description": description, "kind": "semantic"})
    return out


def collect(out_dir: str | Path) -> dict:
    """Everything the page shows, as one JSON-able dict."""
    folder = Path(out_dir)
    chunks: list[dict] = []
    for rpath in sorted(folder.glob(f"*{REPORT_SUFFIX}")):
        stem = rpath.name[: -len(REPORT_SUFFIX)]
        written = {c.get("chunk_id"): c for c in _read_jsonl(folder / f"{stem}.jsonl")}
        evidence = {e.get("chunk_id"): e for e in _read_jsonl(folder / f"{stem}.evidence.jsonl")}
        cleaned_path = folder / f"{stem}_cleaned.txt"
        cleaned = cleaned_path.read_text(encoding="utf-8") if cleaned_path.is_file() else None
        by_chunk: dict[str, list[dict]] = {}
        for rec in load_records(rpath):
            by_chunk.setdefault(str(rec.get("chunk_id")), []).append(rec)
        for chunk_id, recs in by_chunk.items():
            recs.sort(key=lambda r: r.get("attempt", 0))
            chunks.append(_chunk_view(chunk_id, stem, recs, written.get(chunk_id),
                                      evidence.get(chunk_id), cleaned))
    return {"dir": folder.name, "rules": _rules(), "chunks": chunks}


def _chunk_view(chunk_id: str, stem: str, recs: list[dict], written: dict | None,
                evidence: dict | None, cleaned: str | None) -> dict:
    last = recs[-1]
    content = None
    title = None
    if written:
        content = written.get("content")
        title = (written.get("metadata") or {}).get("section_title")
    if content is None:
        content = next((r["content"] for r in reversed(recs) if isinstance(r.get("content"), str)), None)
    if content is None and cleaned is not None and isinstance(last.get("span"), list):
        start, end = last["span"][:2]
        content = cleaned[start:end]
    quotes: dict[str, list[str]] = {}
    if evidence:
        quotes["confession-or-principle"] = [str(q) for q in evidence.get("content_type_evidence", [])]
        quotes["principle"] = [str(q) for q in evidence.get("principle_evidence", [])]
    letter = str(last.get("letter_year") or (chunk_id[:4] if chunk_id[:4].isdigit() else stem))
    attempts = []
    for r in recs:
        attempts.append({
            "attempt": r.get("attempt"),
            "kind": r.get("kind"),
            "source": r.get("source"),
            "latency_s": r.get("latency_s"),
            "usage": r.get("usage") or {},
            "error": r.get("error"),
            "outcome": r.get("outcome"),
            "asked_fields": r.get("asked_fields") or [],
            "violations": r.get("violations") or [],
            "changes": [
                {"field": c.get("field"), "by": c.get("by"),
                 "diff": word_diff(c.get("before"), c.get("after"))}
                for c in r.get("changes") or []
            ],
        })
    return {
        "chunk_id": chunk_id,
        "letter": letter,
        "file": stem,
        "outcome": last.get("outcome"),
        "written": written is not None,
        "section_title": title,
        "content": content or "",
        "marks": evidence_marks(content or "", quotes) if quotes else [],
        "attempts": attempts,
    }


# --------------------------------------------------------------------------- HTML


def _json_for_script(data: Any) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def build_html(out_dir: str | Path, path: str | Path | None = None) -> Path:
    """Write the self-contained ``DIR/report.html``; return its path."""
    folder = Path(out_dir)
    data = collect(folder)
    target = Path(path) if path is not None else folder / HTML_NAME
    page = _PAGE.replace("{{title}}", html.escape(f"letterchunk repair report: {folder.name}"))
    page = page.replace("{{css}}", _CSS).replace("{{js}}", _JS)
    page = page.replace("{{data}}", _json_for_script(data))  # last: data may contain "{{"
    atomic_write_text(target, page)
    return target


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}}</title>
<style>{{css}}</style>
</head>
<body data-ready="no">
<header>
<h1>{{title}}</h1>
<p id="summary">Loading… (this page needs JavaScript)</p>
</header>
<nav id="filters">
<label>Letter <select id="f-letter"><option value="">all</option></select></label>
<label>Rule <select id="f-rule"><option value="">all</option></select></label>
<label>Outcome <select id="f-outcome"><option value="">all</option></select></label>
<span id="shown"></span>
</nav>
<section class="totals">
<div><h2>By outcome</h2><table id="totals-outcome"><thead><tr><th>outcome</th><th>chunks</th></tr></thead><tbody></tbody></table></div>
<div><h2>By letter</h2><table id="totals-letter"><thead><tr><th>letter</th><th>chunks</th><th>valid</th><th>repaired</th><th>failed</th><th>model calls</th><th>prompt tokens</th><th>completion tokens</th></tr></thead><tbody></tbody></table></div>
<div><h2>By rule</h2><table id="totals-rule"><thead><tr><th>rule</th><th>kind</th><th>violations</th><th>chunks</th><th>repaired</th><th>failed</th><th>description</th></tr></thead><tbody></tbody></table></div>
</section>
<main id="chunks"></main>
<script id="report-data" type="application/json">{{data}}</script>
<script>{{js}}</script>
</body>
</html>
"""

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 1.5em 3em;color:#222;background:#fafafa}
h1{font-size:1.3em}h2{font-size:1.05em;margin:.6em 0 .3em}
nav{position:sticky;top:0;background:#fafafa;padding:.5em 0;border-bottom:1px solid #ddd;z-index:1}
nav label{margin-right:1em}
.totals{display:flex;flex-wrap:wrap;gap:2em}
table{border-collapse:collapse;font-size:.92em}
th,td{border:1px solid #ccc;padding:.15em .5em;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.chunk{background:#fff;border:1px solid #ccc;border-radius:4px;margin:1em 0;padding:.6em 1em}
.chunk h3{margin:.1em 0;font-size:1em}
.badge{display:inline-block;padding:0 .45em;border-radius:3px;font-size:.85em;margin-left:.5em}
.o-valid{background:#d8f0d8}.o-repaired{background:#d8e6fb}.o-failed{background:#f8d0d0}
.o-needs-llm{background:#fbeccb}.o-retry{background:#eee}
pre.content{white-space:pre-wrap;max-height:22em;overflow:auto;background:#f6f6f6;padding:.5em;border:1px solid #e3e3e3}
mark{background:#fff08a}mark.principle{background:#c9f2d0}
.attempt{border-left:3px solid #bbb;margin:.5em 0;padding-left:.7em}
.diff{white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.9em;background:#f6f6f6;padding:.3em}
.diff del{background:#fdd;color:#900}.diff ins{background:#dfd;color:#060;text-decoration:none}
.muted{color:#777}
li.fixed{color:#666}
"""

_JS = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var rules = data.rules || {};
  var chunks = data.chunks || [];

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    if (attrs) { Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); }); }
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    return node;
  }
  function cell(row, text, numeric) {
    var td = el("td", numeric ? {"class": "n"} : null, text);
    row.appendChild(td);
    return td;
  }
  function rulesOf(c) {
    var seen = {};
    c.attempts.forEach(function (a) { a.violations.forEach(function (v) { seen[v.code] = true; }); });
    return Object.keys(seen).sort();
  }
  function tokens(c, key) {
    return c.attempts.reduce(function (s, a) { return s + ((a.usage || {})[key] || 0); }, 0);
  }
  function modelCalls(c) {
    return c.attempts.filter(function (a) { return a.kind === "enrich" || a.kind === "reask"; }).length;
  }

  // ---- totals, computed here from the embedded records
  var byOutcome = {}, byLetter = {}, byRule = {};
  var total = {chunks: 0, prompt: 0, completion: 0, calls: 0};
  chunks.forEach(function (c) {
    var o = c.outcome || "unknown";
    byOutcome[o] = (byOutcome[o] || 0) + 1;
    var L = byLetter[c.letter] || (byLetter[c.letter] = {chunks: 0, valid: 0, repaired: 0, failed: 0, calls: 0, prompt: 0, completion: 0});
    L.chunks += 1;
    if (o === "valid" || o === "repaired") { L[o] += 1; } else { L.failed += 1; }
    L.calls += modelCalls(c);
    L.prompt += tokens(c, "prompt_tokens");
    L.completion += tokens(c, "completion_tokens");
    total.chunks += 1; total.calls += modelCalls(c);
    total.prompt += tokens(c, "prompt_tokens"); total.completion += tokens(c, "completion_tokens");
    var counted = {};
    c.attempts.forEach(function (a) {
      a.violations.forEach(function (v) {
        var R = byRule[v.code] || (byRule[v.code] = {violations: 0, chunks: 0, repaired: 0, failed: 0, kind: v.rule_kind});
        R.violations += 1;
        if (!counted[v.code]) {
          counted[v.code] = true;
          R.chunks += 1;
          if (o === "repaired" || o === "valid") { R.repaired += 1; } else { R.failed += 1; }
        }
      });
    });
  });

  var tb = document.querySelector("#totals-outcome tbody");
  Object.keys(byOutcome).sort().forEach(function (o) {
    var tr = el("tr", {"data-outcome": o});
    cell(tr, o); cell(tr, byOutcome[o], true).setAttribute("data-count", byOutcome[o]);
    tb.appendChild(tr);
  });
  tb = document.querySelector("#totals-letter tbody");
  Object.keys(byLetter).sort().forEach(function (k) {
    var L = byLetter[k], tr = el("tr", {"data-letter": k});
    cell(tr, k);
    [L.chunks, L.valid, L.repaired, L.failed, L.calls, L.prompt, L.completion].forEach(function (n) { cell(tr, n, true); });
    tr.setAttribute("data-prompt-tokens", L.prompt);
    tr.setAttribute("data-completion-tokens", L.completion);
    tb.appendChild(tr);
  });
  tb = document.querySelector("#totals-rule tbody");
  Object.keys(byRule).sort().forEach(function (k) {
    var R = byRule[k], tr = el("tr", {"data-rule": k, "data-violations": R.violations, "data-chunks": R.chunks});
    cell(tr, k); cell(tr, (rules[k] || {}).kind || R.kind || "");
    [R.violations, R.chunks, R.repaired, R.failed].forEach(function (n) { cell(tr, n, true); });
    cell(tr, (rules[k] || {}).description || "");
    tb.appendChild(tr);
  });
  var summary = document.getElementById("summary");
  summary.textContent = total.chunks + " chunks; " +
    Object.keys(byOutcome).sort().map(function (o) { return byOutcome[o] + " " + o; }).join(", ") +
    "; " + total.calls + " model calls; " + total.prompt + " prompt + " + total.completion + " completion tokens";
  summary.setAttribute("data-chunks", total.chunks);
  summary.setAttribute("data-prompt-tokens", total.prompt);
  summary.setAttribute("data-completion-tokens", total.completion);

  // ---- one card per chunk
  function contentNode(c) {
    var pre = el("pre", {"class": "content"});
    var pos = 0;
    (c.marks || []).forEach(function (m) {
      if (m[0] > pos) { pre.appendChild(document.createTextNode(c.content.slice(pos, m[0]))); }
      pre.appendChild(el("mark", {"class": m[2]}, c.content.slice(m[0], m[1])));
      pos = m[1];
    });
    pre.appendChild(document.createTextNode(c.content.slice(pos)));
    return pre;
  }
  function diffNode(change) {
    var box = el("div", {"class": "change"});
    box.appendChild(el("div", null, change.field + " (changed by " + (change.by || "?") + ")"));
    var d = el("div", {"class": "diff"});
    change.diff.forEach(function (seg) {
      var tag = seg[0] === "del" ? "del" : seg[0] === "ins" ? "ins" : "span";
      d.appendChild(el(tag, null, seg[1]));
    });
    box.appendChild(d);
    return box;
  }
  var main = document.getElementById("chunks");
  chunks.forEach(function (c) {
    var card = el("section", {"class": "chunk", "data-letter": c.letter, "data-outcome": c.outcome || "unknown",
                              "data-rules": " " + rulesOf(c).join(" ") + " ", "id": "chunk-" + c.chunk_id});
    var h = el("h3", null, c.chunk_id);
    h.appendChild(el("span", {"class": "badge o-" + (c.outcome || "unknown")}, c.outcome));
    card.appendChild(h);
    card.appendChild(el("div", {"class": "muted"}, (c.section_title || "") +
      (c.written ? "" : " — not written to the output")));
    card.appendChild(contentNode(c));
    c.attempts.forEach(function (a) {
      var box = el("div", {"class": "attempt"});
      var u = a.usage || {};
      box.appendChild(el("div", null, "attempt " + a.attempt + " · " + a.kind + " · " + (a.source || "") +
        " · " + (u.prompt_tokens || 0) + "+" + (u.completion_tokens || 0) + " tokens · " +
        (a.latency_s || 0) + " s · " + a.outcome +
        (a.asked_fields && a.asked_fields.length ? " · asked: " + a.asked_fields.join(", ") : "")));
      if (a.error) { box.appendChild(el("div", {"class": "muted"}, "error: " + a.error)); }
      if (a.violations.length) {
        var ul = el("ul", {"class": "violations"});
        a.violations.forEach(function (v) {
          ul.appendChild(el("li", {"data-rule": v.code, "class": v.fixed ? "fixed" : "open"},
            v.code + " [" + (v.field || "-") + "] " + v.message + (v.fixed ? " (fixed by code)" : "")));
        });
        box.appendChild(ul);
      }
      a.changes.forEach(function (ch) { box.appendChild(diffNode(ch)); });
      card.appendChild(box);
    });
    main.appendChild(card);
  });

  // ---- filters (also read from the URL fragment: #letter=1977&rule=x&outcome=failed)
  function fill(id, values) {
    var sel = document.getElementById(id);
    values.forEach(function (v) { sel.appendChild(el("option", {"value": v}, v)); });
    return sel;
  }
  var fl = fill("f-letter", Object.keys(byLetter).sort());
  var fr = fill("f-rule", Object.keys(byRule).sort());
  var fo = fill("f-outcome", Object.keys(byOutcome).sort());
  function apply() {
    var shown = 0;
    Array.prototype.forEach.call(main.children, function (card) {
      var ok = (!fl.value || card.getAttribute("data-letter") === fl.value) &&
               (!fo.value || card.getAttribute("data-outcome") === fo.value) &&
               (!fr.value || card.getAttribute("data-rules").indexOf(" " + fr.value + " ") >= 0);
      card.hidden = !ok;
      if (ok) { shown += 1; }
    });
    var s = document.getElementById("shown");
    s.textContent = shown + " of " + chunks.length + " chunks shown";
    s.setAttribute("data-shown", shown);
  }
  function fromHash() {
    var params = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) { params[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1)); }
    });
    [[fl, "letter"], [fr, "rule"], [fo, "outcome"]].forEach(function (p) {
      if (params[p[1]] !== undefined) { p[0].value = params[p[1]]; }
    });
    apply();
  }
  [fl, fr, fo].forEach(function (s) { s.addEventListener("change", apply); });
  window.addEventListener("hashchange", fromHash);
  fromHash();
  document.body.setAttribute("data-ready", "yes");
})();
"""
