"""A chunk's history across runs: ``letterchunk report DIR --compare OTHER ...``.

Given the output folder ``DIR`` and earlier (or later) runs over the same letters, the report
page of ``DIR`` gains

* a *runs* table: every run given, oldest first by the start time its ``run.json`` records
  (:func:`letterchunk.report.runs.run_order`; runs with no recorded time first, in the order
  given, ``DIR`` after the others), with its model and prompt hash;
* on each chunk card an *as-of* table: the chunk's fields in each run (matched by file and
  ``chunk_id``), one column per run, only the fields that are not the same in all of them (and
  its span when that moved); "absent" where a run does not have the chunk;

and a second page, ``<report>.diff.html`` beside it: for each run and the next one, the
:class:`~letterchunk.report.diff.RunDiff` of the two (identities side by side, a table per
field, every changed chunk with a word diff of rewritten texts).

Escaping: the report page carries the as-of data in its embedded JSON and its script puts every
text in through ``textContent`` (:mod:`letterchunk.report.html`); the diff page is static HTML
in which every text passes through :func:`html.escape` (:func:`_t`), attribute values included.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from letterchunk.contract.jsontypes import JSONObject, JSONValue
from letterchunk.io import write_output
from letterchunk.layout import HTML_NAME
from letterchunk.report.diff import ChunkDiff, FieldChange, RunDiff, diff_runs, identity_rows
from letterchunk.report.html import build_html, word_diff
from letterchunk.report.runs import RunFolder, chunk_fields, field_text, read_run, run_order

__all__ = ["DIFF_SUFFIX", "asof_data", "build_history", "diff_page", "diff_page_path"]

DIFF_SUFFIX = ".diff.html"  # the diff page: report.html -> report.diff.html


def diff_page_path(report: Path) -> Path:
    """``DIR/report.html`` -> ``DIR/report.diff.html`` (any page name: its stem + suffix)."""
    return report.with_name(report.name.removesuffix(".html") + DIFF_SUFFIX)


def _run_label(run: RunFolder) -> JSONObject:
    ident = run.identity
    return {
        "folder": run.folder,
        "started_at": ident.started_at,
        "stage": ident.stage,
        "model": ident.model,
        "prompts_sha256": ident.prompts_sha256,
        "letterchunk_version": ident.letterchunk_version,
    }


def _values(run: RunFolder, stem: str, chunk_id: str) -> dict[str, str] | None:
    """The chunk's fields in ``run`` as display text, with its span as ``chars``; None when
    the run does not have it."""
    chunk = next((c for c in run.letters.get(stem, ()) if c.chunk_id == chunk_id), None)
    if chunk is None:
        return None
    span = chunk.metadata.source_span
    out = {"chars": f"{span.start_char}-{span.end_char_exclusive}"}
    out.update({name: field_text(f.value) for name, f in chunk_fields(chunk).items()})
    return out


def asof_data(runs: Sequence[RunFolder], stem: str, chunk_id: str) -> JSONObject:
    """The as-of view of one chunk over ``runs`` (in the order given): ``present`` per run,
    ``rows`` [{field, values (None: absent)}] of the fields not the same in every run that has
    the chunk, ``same`` the number of fields that are."""
    per_run = [_values(run, stem, chunk_id) for run in runs]
    names = list(dict.fromkeys(n for v in per_run if v for n in v))
    rows: list[JSONValue] = []
    for name in names:
        values: list[JSONValue] = [None if v is None else v.get(name) for v in per_run]
        if len({x for x, v in zip(values, per_run, strict=True) if v is not None}) > 1:
            rows.append({"field": name, "values": values})
    return {
        "present": [v is not None for v in per_run],
        "rows": rows,
        "same": len(names) - len(rows),
    }


def build_history(
    out_dir: str | Path, others: Sequence[str | Path], path: str | Path | None = None
) -> tuple[Path, Path]:
    """Write ``DIR``'s report page with the runs table and the as-of view over ``DIR`` and
    ``others``, and the diff page beside it; return both paths.  Every folder is read first, so
    an unusable one (:class:`~letterchunk.errors.InputError`) stops before anything is
    written."""
    folder = Path(out_dir)
    current = read_run(folder)
    # untimed runs keep this order: the runs compared as given, the report's own folder last
    runs = run_order([*(read_run(o) for o in others), current])
    target = Path(path) if path is not None else folder / HTML_NAME
    diff_path = diff_page_path(target)

    def extend(data: JSONObject) -> None:
        data["runs"] = [{**_run_label(r), "current": r is current} for r in runs]
        data["diff_page"] = "./" + diff_path.name  # relative: never read as a URL scheme
        chunks = data["chunks"]
        for chunk in chunks if isinstance(chunks, list) else []:
            if isinstance(chunk, dict):  # the report's chunk cards, as build_html makes them
                chunk["asof"] = asof_data(runs, str(chunk["file"]), str(chunk["chunk_id"]))

    diffs = diff_page(runs)  # made before either page is written: a failure writes neither
    page = build_html(folder, target, extend=extend)
    write_output(diff_path, diffs)
    return page, diff_path


# --------------------------------------------------------------------------- the diff page


def _t(value: JSONValue) -> str:
    """Any value as escaped HTML text (quotes too, so it is safe in an attribute)."""
    return html.escape("null" if value is None else field_text(value), quote=True)


_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 1.5em 3em;color:#222;background:#fafafa}
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.6em}h3{font-size:1em;margin:.2em 0}
table{border-collapse:collapse;font-size:.92em;margin:.4em 0}
th,td{border:1px solid #ccc;padding:.15em .5em;text-align:left;vertical-align:top}
tr.differs td{background:#fff6d8}
.chunk{background:#fff;border:1px solid #ccc;border-radius:4px;margin:.8em 0;padding:.5em 1em}
.badge{display:inline-block;padding:0 .45em;border-radius:3px;font-size:.85em;background:#eee}
ins{background:#dfd;color:#060;text-decoration:none}del{background:#fdd;color:#900}
.diff{white-space:pre-wrap;background:#f6f6f6;padding:.3em}.muted{color:#777}
"""


def _identity_table(d: RunDiff) -> list[str]:
    out = ["<table class='identity'><tr><th>run</th><th>A (before)</th><th>B (after)</th></tr>"]
    for name, va, vb in identity_rows(d.a, d.b):
        cls = " class='differs'" if va != vb and name != "folder" else ""
        cells = "".join(f"<td>{'unknown' if v is None else _t(v)}</td>" for v in (va, vb))
        out.append(f"<tr{cls} data-row='{_t(name)}'><td>{_t(name)}</td>{cells}</tr>")
    out.append("</table>")
    return out


def _fields_table(d: RunDiff) -> list[str]:
    fields = d.fields()
    if not fields:
        return ["<p class='muted'>no field changed</p>"]
    out = [
        "<table class='fields'><tr><th>field</th><th>kind</th><th>chunks</th><th>added</th>"
        "<th>removed</th><th>changes</th></tr>"
    ]
    for f in fields:
        notes = [f"{_t(b)} → {_t(a)} ×{n}" for b, a, n in f.transitions]
        if f.mean_similarity is not None:
            notes.append(f"mean similarity {f.mean_similarity:.2f}")
        out.append(
            f"<tr data-field='{_t(f.field)}'><td>{_t(f.field)}</td><td>{f.kind}</td>"
            f"<td>{f.chunks}</td><td>{f.added if f.kind == 'set' else ''}</td>"
            f"<td>{f.removed if f.kind == 'set' else ''}</td><td>{'; '.join(notes)}</td></tr>"
        )
    out.append("</table>")
    return out


def _word_diff_html(before: JSONValue, after: JSONValue) -> str:
    tags = {"del": "del", "ins": "ins", "eq": "span"}
    return "".join(f"<{tags[op]}>{_t(text)}</{tags[op]}>" for op, text in word_diff(before, after))


def _change_html(c: FieldChange) -> str:
    head = f"<b>{_t(c.field)}</b>: "
    if c.kind == "set":
        parts = [f"<ins>+{_t(v)}</ins>" for v in c.added]
        parts += [f"<del>−{_t(v)}</del>" for v in c.removed]
        body = " ".join(parts)
    elif c.kind == "text" and c.similarity is not None:
        body = (
            f"rewritten (similarity {c.similarity:.2f})"
            f"<div class='diff'>{_word_diff_html(c.before, c.after)}</div>"
        )
    else:
        body = f"<del>{_t(c.before)}</del> → <ins>{_t(c.after)}</ins>"
    return f"<li data-field='{_t(c.field)}' data-kind='{c.kind}'>{head}{body}</li>"


def _chunk_html(c: ChunkDiff) -> str:
    head = f"{_t(c.chunk_id)} <span class='badge'>{c.status}</span>"
    if c.id_in_a:
        head += f" <span class='muted'>was {_t(c.id_in_a)}</span>"
    spans = [f"{s[0]}–{s[1]}" if s else "none" for s in (c.span_a, c.span_b)]
    if c.span_a != c.span_b:
        head += f" <span class='muted'>chars {spans[0]} → {spans[1]}</span>"
    if c.overlaps:
        head += f" <span class='muted'>overlaps {_t(', '.join(c.overlaps))}</span>"
    items = "".join(_change_html(ch) for ch in c.changes)
    return (
        f"<section class='chunk' data-chunk='{_t(c.chunk_id)}' data-status='{c.status}'>"
        f"<h3>{head}</h3>{f'<ul>{items}</ul>' if items else ''}</section>"
    )


def _pair_html(d: RunDiff) -> list[str]:
    n = d.counts()
    letters = [f"{len(d.compared)} letter(s) in both"]
    letters += [f"only in A: {_t(', '.join(d.only_in_a))}"] if d.only_in_a else []
    letters += [f"only in B: {_t(', '.join(d.only_in_b))}"] if d.only_in_b else []
    if d.cleaned_changed:
        letters.append(f"cleaned text differs: {_t(', '.join(d.cleaned_changed))}")
    counts = ", ".join(f"{n[k]} {k}" for k in n if k not in ("chunks_a", "chunks_b"))
    attrs = " ".join(f"data-{k}='{v}'" for k, v in n.items())
    out = [
        f"<section class='pair' data-identical='{'yes' if d.identical else 'no'}'>",
        f"<h2>{_t(d.a.folder)} → {_t(d.b.folder)}</h2>",
        *_identity_table(d),
        f"<p>{'; '.join(letters)}</p>",
        *(
            f"<p class='duplicate' data-chunk='{_t(x.chunk_id)}'>{_t(x.chunk_id)}: duplicate id, "
            f"{x.in_a} chunk(s) carry it in A, {x.in_b} in B"
            f"{'' if x.same else ', not the same chunks'}; only the first is compared</p>"
            for x in d.duplicates
        ),
        f"<p class='counts' {attrs}>chunks: {n['chunks_a']} in A, {n['chunks_b']} in B: "
        f"{counts}</p>",
        *_fields_table(d),
        *(_chunk_html(c) for c in d.chunks),
        "</section>",
    ]
    return out


def diff_page(runs: Sequence[RunFolder]) -> str:
    """The diff page of ``runs`` (oldest first): each run against the next."""
    title = _t("letterchunk diff: " + " → ".join(r.folder for r in runs))
    body = []
    for a, b in zip(runs, runs[1:], strict=False):
        body += _pair_html(diff_runs(a, b))
    return "\n".join(
        [
            "<!DOCTYPE html>",
            "<html lang='en'><head><meta charset='utf-8'>",
            f"<title>{title}</title><style>{_STYLE}</style></head><body>",
            f"<h1>{title}</h1>",
            *body,
            "</body></html>",
            "",
        ]
    )
