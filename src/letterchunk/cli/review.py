"""`letterchunk review DIR`: the review page of an enriched folder, served on 127.0.0.1."""

from __future__ import annotations

import argparse
import sys
import webbrowser
from pathlib import Path

from letterchunk.cli import COMMAND_HELP, EXIT_OK, HelpFormatter, err
from letterchunk.errors import ConfigError, InputError
from letterchunk.io import write_stream
from letterchunk.layout import REVIEWS_FILE, is_chunk_file
from letterchunk.review.labelstudio import export_label_studio, import_label_studio
from letterchunk.review.records import default_reviewer
from letterchunk.review.server import ReviewServer

EXAMPLES = """\
Examples:
  letterchunk review out/
  letterchunk review out/ --port 8765 --no-browser --reviewer ana
  letterchunk review out/ --export-label-studio tasks.json
  letterchunk review out/ --import-label-studio export.json --reviewer ana
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "review",
        help=COMMAND_HELP["review"],
        description=(
            "Serve a review page for DIR (the --out folder of `letterchunk run`) on 127.0.0.1 "
            "only, print its URL on stdout and open it in the browser. The URL carries a "
            "random token: a request without it is refused (403). The page lists every "
            "decision, most uncertain first (distance of the probability from the threshold in "
            "force): each confession paragraph and candidate rule sentence the judges rated, "
            "each chunk's concepts, and every chunk repaired, halted or warned about. Keys: y "
            "accept, n reject, s skip, u undo (the last 10). Summaries, concepts (from the "
            "vocabulary) and principle statements can be edited. Every decision is one line "
            "appended to DIR/reviews.jsonl; the next `letterchunk run` over DIR applies them. "
            "Two `review` commands on one folder both work (their own ports; a reload shows "
            "both's decisions). Stop with Ctrl-C."
        ),
        epilog=EXAMPLES,
        formatter_class=HelpFormatter,
    )
    p.add_argument("dir", metavar="DIR", help="output folder of `letterchunk run`")
    p.add_argument(
        "--port",
        type=int,
        default=0,
        metavar="N",
        help="port on 127.0.0.1 (default: a free one)",
    )
    p.add_argument(
        "--no-browser", action="store_true", help="print the URL without opening a browser"
    )
    p.add_argument(
        "--reviewer",
        default=None,
        metavar="NAME",
        help="the name recorded with each decision (default: your login name; the page can "
        "change it)",
    )
    p.add_argument(
        "--export-label-studio",
        metavar="FILE",
        default=None,
        help="write the decisions as Label Studio tasks to FILE and exit (no server)",
    )
    p.add_argument(
        "--import-label-studio",
        metavar="FILE",
        default=None,
        help="append the decisions of a Label Studio export FILE to DIR/reviews.jsonl and "
        "exit (no server)",
    )
    p.set_defaults(func=run)


def _folder(path: str) -> Path:
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(folder, "not a folder; pass the --out folder of `letterchunk run`")
    if not any(is_chunk_file(p) for p in folder.glob("*.jsonl")):
        raise InputError(
            folder,
            f"holds no chunk files (*.jsonl); run `letterchunk run LETTER --out {folder}` first",
        )
    return folder


def _reviewer(name: str | None) -> str:
    if name is None:
        return default_reviewer()
    if not name.strip():
        raise ConfigError("--reviewer must not be empty; pass a name or leave it out")
    return name.strip()


def _label_studio(args: argparse.Namespace, folder: Path) -> int:
    if args.export_label_studio:
        count = export_label_studio(folder, Path(args.export_label_studio))
        err(f"wrote {count} Label Studio tasks to {args.export_label_studio}")
    if args.import_label_studio:
        count = import_label_studio(folder, Path(args.import_label_studio), args.reviewer)
        source, target = args.import_label_studio, folder / REVIEWS_FILE
        err(f"appended {count} decisions from {source} to {target}")
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    folder = _folder(args.dir)
    if args.export_label_studio or args.import_label_studio:
        return _label_studio(args, folder)
    if not 0 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port} is not a port; pass 1-65535 or leave it out")
    try:
        server = ReviewServer(folder, port=args.port, reviewer=_reviewer(args.reviewer))
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on 127.0.0.1:{args.port} ({exc.strerror or exc}); pass another "
            "--port or leave it out for a free one"
        ) from exc
    write_stream(sys.stdout, f"{server.url}\n")
    err(f"reviewing {folder}: decisions go to {folder / REVIEWS_FILE}; Ctrl-C stops")
    if not args.no_browser:
        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        err("stopped")
    finally:
        server.close_socket()
    return EXIT_OK
