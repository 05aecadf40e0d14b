"""Bad input tried as a new user would: one command per class, its exit code and first message.

    python bench/bad_input_tour.py

Each case builds its own bad input in a temporary folder, runs ``python -m letterchunk ...`` as a
separate process (a fresh interpreter, as a user's shell would), and prints the exit code, the
first line the user reads on stderr, whether a traceback reached the user, and whether the
files that existed before are unchanged.  The cases needing a model use a small local HTTP
server that answers every request with nonsense or with an HTML page.  The full list of classes,
with the tests that cover each, is docs/bad-input.md; this is the tour a reader can rerun.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LETTER = ROOT / "corpus" / "letters" / "1977.txt"
KEY = "tour-secret-key-0000"  # not shaped like an OpenAI key: masked by value, not by pattern
PASSWORD = "tour-url-password-1"  # in OPENAI_BASE_URL's user:password@, sent as Basic auth
SECRETS = (KEY, PASSWORD, base64.b64encode(f"tour:{PASSWORD}".encode()).decode())


def letterchunk(*args: str, env: dict[str, str] | None = None, cwd: Path) -> tuple[int, str]:
    """(exit code, stderr) of one CLI process; ``env["STDOUT"]``: a file its stdout is written
    to (``/dev/full``), or ``closed`` for a pipe whose reader has gone."""
    env = dict(env or {})
    target = env.pop("STDOUT", None)
    full = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **env}
    command = [sys.executable, "-m", "letterchunk", *args]
    if target == "closed":
        proc = subprocess.Popen(command, cwd=cwd, env=full, stdout=subprocess.PIPE, stderr=-1)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read().decode()
        return proc.wait(timeout=600), err
    with open(target or os.devnull, "w") as out:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=full,
            stdout=out if target else subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
        )
    return done.returncode, done.stderr


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink() and "cache" not in p.parts
    }


@contextmanager
def fake_server(body: Callable[[str], tuple[str, bytes]]) -> Iterator[str]:
    """An OpenAI-compatible base URL whose every POST gets ``body(authorization)`` (content
    type, bytes); a body that is an error object is sent with HTTP 401."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            ctype, data = body(self.headers.get("Authorization", ""))
            self.send_response(401 if data.startswith(b'{"error"') else 200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.shutdown()


def nonsense(_: str) -> tuple[str, bytes]:
    answer = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": '{"nonsense": true}'},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return "application/json", json.dumps(answer).encode()


def html(_: str) -> tuple[str, bytes]:
    return "text/html", b"<html><body>maintenance</body></html>"


def echo(authorization: str) -> tuple[str, bytes]:
    """401 quoting the Authorization header received, as some servers do."""
    message = f"Incorrect API key provided: {authorization}"
    return "application/json", json.dumps({"error": {"message": message}}).encode()


def cases(tmp: Path) -> Iterator[tuple[str, list[str], dict[str, str] | None, Path]]:
    """(class, command arguments, extra environment, folder whose files must stay) per case."""
    two = tmp / "two"
    two.mkdir()
    shutil.copy(LETTER, two / "1977.txt")
    shutil.copy(LETTER, two / "1977 (copy).txt")
    yield "two letters of one year", ["run", str(two), "--out", str(tmp / "o1")], None, two

    enriched = tmp / "enriched"
    enriched.mkdir()  # an enriched run of 1977 kept with the tests
    shutil.copy(ROOT / "tests" / "data" / "runs" / "1977-b827e20" / "1977.jsonl", enriched)
    yield (
        "segment over enriched output",
        ["segment", str(LETTER), "--out", str(enriched)],
        None,
        enriched,
    )

    bad = tmp / "bad"
    bad.mkdir()
    (bad / "1977.jsonl").write_text('{"n": ' + "9" * 5000 + "}\n")
    yield (
        "integer over 4,300 digits",
        ["export", str(bad), "--to", "jsonl-flat", "--out", str(tmp / "x.jsonl")],
        None,
        bad,
    )
    deep = tmp / "deep"
    deep.mkdir()
    (deep / "1977.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    yield (
        "nesting 100,000 deep",
        ["index", str(deep), "--db", str(tmp / "deep.sqlite"), "--no-dense"],
        None,
        deep,
    )
    binary = tmp / "binary"
    binary.mkdir()
    (binary / "1977.jsonl").write_bytes(os.urandom(2048))
    yield "binary chunk file", ["enrich", str(binary)], None, binary

    seg = tmp / "seg"
    code, _ = letterchunk("segment", str(LETTER), "--out", str(seg), cwd=tmp)
    assert code == 0
    yield "report -o an existing folder", ["report", str(seg), "-o", str(tmp)], None, seg
    yield (
        "export to /dev/full",
        ["export", str(seg), "--to", "jsonl-flat", "--out", "/dev/full"],
        None,
        seg,
    )
    yield (
        "export to /dev/full on stdout",
        ["export", str(seg), "--to", "langchain"],
        {"STDOUT": "/dev/full"},
        seg,
    )
    yield (
        "validate into a closed pipe",
        ["validate", str(seg), "--stage", "enriched"],
        {"STDOUT": "closed"},
        seg,
    )
    ran = tmp / "ran"
    shutil.copytree(seg, ran)  # the same chunks, with a run.json naming its prompt files
    (ran / "run.json").write_text(json.dumps({"identity": {"prompt_files": {"enrich_user": "0"}}}))
    yield "diff, run.json on one side only", ["diff", str(seg), str(ran)], None, seg
    dup = tmp / "dup"
    shutil.copytree(seg, dup)
    lines = (dup / "1977.jsonl").read_text().splitlines(keepends=True)
    (dup / "1977.jsonl").write_text("".join([*lines, lines[2]]))
    yield "diff, a chunk line duplicated", ["diff", str(seg), str(dup)], None, dup
    frozen = tmp / "frozen"
    shutil.copytree(seg, frozen)
    made = _read_only(frozen / "1977.jsonl")
    yield (
        "run over a read-only output file",
        ["run", str(LETTER), "--out", str(frozen), "--cache", "off"],
        {"OPENAI_BASE_URL": "nonsense", "OPENAI_API_KEY": KEY, "LETTERCHUNK_MODEL": "m"},
        frozen,
    )
    if made:
        subprocess.run(["chattr", "-i", str(frozen / "1977.jsonl")], check=True)
    yield (
        "server echoing Basic auth of the URL's password",
        ["run", str(LETTER), "--out", str(tmp / "o4"), "--retries", "1", "--cache", "off"],
        {"OPENAI_BASE_URL": "echo", "OPENAI_API_KEY": KEY, "LETTERCHUNK_MODEL": "m"},
        seg,
    )
    yield (
        "export to /dev/null",
        ["export", str(seg), "--to", "jsonl-flat", "--out", "/dev/null"],
        None,
        seg,
    )

    dbs = tmp / "dbs"
    dbs.mkdir()
    (dbs / "folder.sqlite").mkdir()
    (dbs / "random.sqlite").write_bytes(os.urandom(4096))
    (dbs / "empty.sqlite").write_bytes(b"")
    with sqlite3.connect(dbs / "other.sqlite") as con:
        con.execute("create table users (id integer)")
    for name in ("folder", "random", "empty", "other"):
        yield (
            f"index --db {name}",
            ["index", str(seg), "--db", str(dbs / f"{name}.sqlite"), "--no-dense"],
            None,
            dbs,
        )
    yield (
        "search --year 10**20",
        ["search", "float", "--db", str(tmp / "none.sqlite"), "--year", "9" * 20],
        None,
        seg,
    )

    fifo = tmp / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "1977.jsonl")
    yield "validate a FIFO", ["validate", str(fifo / "1977.jsonl")], None, seg
    yield (
        "--timeout nan",
        ["run", str(LETTER), "--out", str(tmp / "o2"), "--timeout", "nan"],
        None,
        seg,
    )

    halted = tmp / "halted"
    yield (
        "server answers nonsense",
        ["run", str(LETTER), "--out", str(halted), "--max-attempts", "1", "--cache", "off"],
        {"OPENAI_BASE_URL": "nonsense", "OPENAI_API_KEY": KEY, "LETTERCHUNK_MODEL": "m"},
        seg,
    )
    yield (
        "HTTP 200 with an HTML body",
        ["run", str(LETTER), "--out", str(tmp / "o3"), "--retries", "1", "--cache", "off"],
        {"OPENAI_BASE_URL": "html", "OPENAI_API_KEY": KEY, "LETTERCHUNK_MODEL": "m"},
        seg,
    )


def _read_only(path: Path) -> bool:
    """Make ``path`` read-only (immutable as root, whom modes do not stop); True when chattr
    was used and must be undone."""
    if os.geteuid() != 0:
        path.chmod(0o444)
        return False
    return subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0


def main() -> int:
    rows = []
    with (
        tempfile.TemporaryDirectory() as t,
        fake_server(nonsense) as bad_url,
        fake_server(html) as html_url,
        fake_server(echo) as echo_url,
    ):
        tmp = Path(t)
        for name, args, env, keep in cases(tmp):
            urls = {
                "nonsense": bad_url,
                "html": html_url,
                "echo": echo_url.replace("http://", f"http://tour:{PASSWORD}@"),
            }
            if env and env.get("OPENAI_BASE_URL") in urls:
                env = {**env, "OPENAI_BASE_URL": urls[env["OPENAI_BASE_URL"]]}
            before = digest(keep)
            code, err = letterchunk(*args, env=env, cwd=tmp)
            lines = [ln for ln in err.splitlines() if ln.strip()]
            first = next(
                (ln for ln in lines if "error" in ln.lower()),
                next(
                    (ln for ln in lines if ln.startswith("letterchunk")), lines[-1] if lines else ""
                ),
            )
            kept = all(digest(keep).get(k) == v for k, v in before.items())
            leaked = any(secret in err for secret in SECRETS)
            rows.append(
                (
                    name,
                    " ".join(["letterchunk", *[a.replace(str(tmp), "T") for a in args]]),
                    code,
                    first.replace(str(tmp), "T")[:150],
                    "Traceback" in err,
                    kept,
                    leaked,
                )
            )
    print("| class | command | exit | first message | traceback | files kept | key leaked |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        flags = ("yes" if r[4] else "no", "yes" if r[5] else "NO", "YES" if r[6] else "no")
        print(f"| {r[0]} | `{r[1]}` | {r[2]} | {r[3]} | " + " | ".join(flags) + " |")
    return 1 if any(r[4] or not r[5] or r[6] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
