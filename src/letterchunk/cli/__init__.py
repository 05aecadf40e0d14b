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
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from ..errors import BudgetExceeded, LetterchunkError, RepairExhausted

__all__ = ["main", "EXIT_OK", "EXIT_INVALID", "EXIT_USAGE", "EXIT_HALTED", "EXIT_BUDGET"]

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_HALTED, EXIT_BUDGET, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130

# One module per command, in the order `letterchunk --help` lists them.
COMMANDS = ["segment", "validate", "run", "enrich", "repair", "report", "budget", "analyze"]

EPILOG = """exit codes:
  0   success
  1   validation found error-level violations
  2   unusable input or configuration (the message names the file or option)
  3   halted: a chunk stayed invalid after the last repair attempt (--on-failure halt)
  4   stopped by a budget cap (--max-tokens-total / --max-cost); rerun with a higher cap
  130 interrupted; files already written stay valid
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="letterchunk",
        description="Chunk Berkshire Hathaway shareholder letters into the canonical schema.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug output to stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name.replace('-', '_')}").register(sub)
    return parser


def err(message: str) -> None:
    from ..redact import redact

    print(f"letterchunk: {redact(message)}", file=sys.stderr)


class _RedactSecrets(logging.Filter):
    """Log lines pass through the same redaction as error messages (keys, URL passwords)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from ..redact import redact

        text = record.getMessage()
        if record.exc_info:  # a traceback can name the URL with its password
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        if record.stack_info:
            text += "\n" + record.stack_info
        record.msg, record.args = redact(text), None
        record.exc_info = record.exc_text = record.stack_info = None
        return True


_REDACT = _RedactSecrets()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
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
