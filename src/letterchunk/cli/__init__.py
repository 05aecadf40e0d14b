"""Thin command line: parse options, call the library, map its errors to exit codes.

Only modules in this package import argparse or print for humans.  Each command lives in its own
module exposing ``register(subparsers)``; the module sets ``func`` on its parser, which receives
the parsed namespace and returns an exit code.

Exit codes (also in ``letterchunk --help`` and README):
  0  success
  1  validation found error-level violations
  2  unusable input or configuration (the message names the file / option)
  3  halted: a chunk stayed invalid after the last repair attempt (--on-failure halt)
  4  stopped by a budget cap (--max-tokens-total / --max-cost); rerun with a higher cap to resume
  130 interrupted (Ctrl-C); finished files stay valid on disk
  141 standard output's reader went away (``| head -1``): the command stops quietly, as a
      shell's own tools do (128 + SIGPIPE)
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import logging
import select
import sys
import textwrap
from typing import Any, TextIO

from letterchunk.errors import BudgetExceeded, InputError, LetterchunkError, RepairExhausted
from letterchunk.io import silence
from letterchunk.redact import redact
from letterchunk.version import installed_version

__all__ = [
    "COMMAND_HELP",
    "EXIT_BUDGET",
    "EXIT_HALTED",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_PIPE",
    "EXIT_USAGE",
    "HelpFormatter",
    "build_parser",
    "main",
]

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_HALTED, EXIT_BUDGET, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
EXIT_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader went away

# One module per command, in the order `letterchunk --help` lists them.
COMMANDS = ["segment", "validate", "run", "batch", "enrich", "repair", "report", "budget"]
COMMANDS += ["analyze", "diff", "review"]
COMMANDS += ["export", "index", "link", "search"]  # retrieval: letterchunk.retrieval
COMMANDS += ["calibrate"]  # the analysts' loop: letterchunk.review
# each command's one-line help, as `letterchunk --help` lists it: kept here, so the list is
# printed without importing a command's module (the module's parser uses the same line)
COMMAND_HELP = {
    "segment": "clean letters and cut them into canonical chunks (rule-based, no LLM)",
    "validate": "check chunk JSONL files against the canonical schema and rules",
    "run": "segment, enrich with the LLM, validate and write letters (the main job)",
    "batch": "enrich through the Batch API: submit, status, collect",
    "enrich": "enrich the segmented DIR/YYYY.jsonl files in place with the LLM",
    "repair": "fix an existing chunk file (mechanical fixes; LLM re-asks when a backend is set)",
    "report": "write DIR/report.html: every chunk, what the LLM gave it, validation and repairs",
    "budget": "safe per-chunk token/word size from context, TPM and request-rate limits",
    "analyze": (
        "statistics of an output folder: chunks per letter/tier/type, tokens, top entities, ..."
    ),
    "diff": "what changed between two runs: chunks and fields added, removed, rewritten",
    "review": "serve a local review page: accept, reject or edit the model's decisions",
    "export": "write chunks as LangChain documents, LlamaIndex nodes or flat JSONL",
    "index": "build a SQLite hybrid index (BM25 + vectors) of an output folder",
    "link": "link each chunk of an index to chunks of other letters on the same idea "
    "(--write DIR: their years into the chunks' related_years)",
    "search": "hybrid search of an index, with metadata filters and tier expansion",
    "calibrate": "choose the judges' thresholds for a model from the analysts' reviews",
}

EPILOG = """exit codes:
  0   success
  1   validation found error-level violations
  2   unusable input or configuration (the message names the file or option)
  3   halted: a chunk stayed invalid after the last repair attempt (--on-failure halt)
  4   stopped by a budget cap (--max-tokens-total / --max-cost); rerun with a higher cap
  75  batch collect: a batch is still running; collect again later
  130 interrupted; files already written stay valid
  141 the reader of standard output went away (| head); nothing printed
"""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Wraps prose paragraphs to the terminal width; keeps a paragraph with indented lines
    (an ``Examples:`` block, a table of exit codes) exactly as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for para in text.strip("\n").split("\n\n"):
            lines = para.splitlines()
            if any(line[:1].isspace() for line in lines):
                paragraphs.append("\n".join(indent + line for line in lines))
            else:
                paragraphs.append(
                    textwrap.fill(
                        " ".join(line.strip() for line in lines),
                        width,
                        initial_indent=indent,
                        subsequent_indent=indent,
                    )
                )
        return "\n\n".join(paragraphs)


def version() -> str:
    """The installed distribution's version; ``__version__`` when run from a checkout."""
    return installed_version()


class _Version(argparse._VersionAction):
    """``--version``: the installed version is looked up only when asked for (reading the
    distribution's metadata is a good part of a short command's start-up)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        self.version = f"%(prog)s {version()}"
        super().__call__(parser, *args, **kwargs)


def add_common_options(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """-v/--verbose and -q/--quiet, accepted before the command and after it.

    On a command they default to SUPPRESS, so a flag given before the command is not reset by
    the command's own (absent) flag.
    """
    default = False if top else argparse.SUPPRESS
    g = parser.add_argument_group("output") if not top else parser
    g.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="log debug output to stderr"
    )
    g.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default,
        help="print only errors: no progress, no summary, no notices",
    )


def _chosen(argv: list[str]) -> str | None:
    """The command ``argv`` names: its first word that is not an option (the top-level options
    take no value), when that is a command."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in COMMANDS else None


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given ``argv``, only the command it names is imported and built (the
    others are listed by their help line), so a command starts without loading every stage."""
    chosen = _chosen(argv) if argv is not None else None
    parser = argparse.ArgumentParser(
        prog="letterchunk",
        description="Chunk Berkshire Hathaway shareholder letters into the canonical schema.",
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    add_common_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        if argv is None or name == chosen:
            importlib.import_module(f"{__name__}.{name.replace('-', '_')}").register(sub)
        else:  # listed by `letterchunk --help`; never parsed, since argv does not name it
            sub.add_parser(name, help=COMMAND_HELP[name])
    for command in sub.choices.values():
        add_common_options(command)
    return parser


def err(message: str) -> None:

    print(f"letterchunk: {redact(message)}", file=sys.stderr)


class _RedactSecrets(logging.Filter):
    """Log lines pass through the same redaction as error messages (keys, URL passwords)."""

    def filter(self, record: logging.LogRecord) -> bool:

        text = record.getMessage()
        if record.exc_info:  # a traceback can name the URL with its password
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + record.stack_info
        record.msg, record.args = redact(text), None
        record.exc_info = record.exc_text = record.stack_info = None
        return True


_REDACT = _RedactSecrets()


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (``| head -1``)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0))
    except (OSError, ValueError, AttributeError):  # no real descriptor (a test's capture)
        return False


class _Stdout:
    """Standard output for the length of one command, so every command's output (``print``,
    ``write_stream``) meets one rule:

    * its reader going away (``| head -1``) is remembered and the command ends with
      :data:`EXIT_PIPE` and no message, whatever it would have returned;
    * any other OS error (a full disk behind ``> /dev/full``, a quota, an I/O error) becomes an
      :class:`InputError` naming standard output, exit 2, as ``--out /dev/full`` does.

    Either way the descriptor is pointed at ``/dev/null`` so the interpreter's last flush of
    what is still buffered fails no more ("Exception ignored ...")."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.reader_gone = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def _guard(self, call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except BrokenPipeError:
            self.reader_gone = True
            raise
        except OSError as exc:
            silence(self.stream)
            fix = (
                "free some space or redirect it to another file"
                if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
                else "redirect it to another file"
            )
            raise InputError(
                "standard output",
                f"cannot write it ({exc.strerror or exc}); what was written there is "
                f"incomplete; {fix}",
            ) from None

    def write(self, text: str) -> int:
        return int(self._guard(self.stream.write, text))

    def flush(self) -> None:
        self._guard(self.stream.flush)


def main(argv: list[str] | None = None) -> int:
    stdout = _Stdout(sys.stdout)
    sys.stdout = stdout  # a stand-in that keeps the stream's API
    try:
        try:
            code = _main(argv)
        finally:
            # what is still buffered is written now, where a failure is named, not at exit
            with contextlib.suppress(BrokenPipeError):
                stdout.flush()
    except InputError as exc:  # standard output could not be written
        err(str(exc))
        code = EXIT_USAGE
    except BrokenPipeError:
        if not (stdout.reader_gone or _stdout_closed()):
            raise  # not the reader of our output: a real fault, not to be hidden
        stdout.reader_gone = True
    except SystemExit:  # argparse's --help, --version or usage error
        if not stdout.reader_gone:
            raise
    finally:
        sys.stdout = stdout.stream
    if stdout.reader_gone:
        # the reader took what it wanted (`| head`): like any Unix filter, stop quietly
        silence(sys.stdout)
        return EXIT_PIPE
    return code


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.ERROR if args.quiet else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(_REDACT)  # idempotent: a filter is added once per handler
    try:
        return int(args.func(args) or 0)
    except RepairExhausted as exc:
        err(f"halted: {exc}")
        return EXIT_HALTED
    except BudgetExceeded as exc:
        err(f"stopped: {exc}")
        return EXIT_BUDGET
    except LetterchunkError as exc:
        err(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        err("interrupted; files already written are complete and valid, rerun to resume")
        return EXIT_INTERRUPTED
