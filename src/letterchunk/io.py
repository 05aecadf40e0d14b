"""Crash-safe file writes and JSONL reading shared by every stage.

Nothing letterchunk writes is ever half-written: content goes to a temporary file in the same
folder, is flushed and fsynced, then renamed over the target (atomic on POSIX).  Logs that keep
their history (the repair report) are appended to instead, whole lines at a time
(:func:`append_lines`).

Reading: :func:`read_utf8` is the one door to a file the user gave us (a regular file of UTF-8
text, or an :class:`~letterchunk.errors.InputError` naming it: a FIFO or device is refused before
it is opened, so nothing blocks), and :func:`jsonl_lines` the one reader of JSONL: every line
comes back parsed or with the reason it is not usable JSON, whatever Python's parser raised (an
integer over the int-string limit, nesting past the recursion limit, a lone surrogate), so no
command sees a parser exception.

Output paths the user names go through :func:`write_output`: a regular file (or a new path) is
written atomically as above, while a device, FIFO or other stream is opened and written as
``cat > PATH`` would (never replaced by a renamed file); a folder is refused.

The temporary file is created the way ``open(path, "w")`` creates a file (mode 0666 less the
umask: 0644 under the usual umask 022), not 0600 as ``tempfile.mkstemp`` would, so the outputs
are as readable as any file the user writes; a file being replaced keeps its own mode.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from letterchunk.errors import InputError

__all__ = [
    "CHUNK_FILE_HINT",
    "JsonLine",
    "append_lines",
    "atomic_write_lines",
    "atomic_write_text",
    "create_temp_beside",
    "jsonl_lines",
    "parse_json",
    "read_json_objects",
    "read_jsonl",
    "read_utf8",
    "silence",
    "write_output",
    "write_stream",
]

#: what to pass instead, in the message about an unusable chunk file
CHUNK_FILE_HINT = (
    "a chunk JSONL file (YYYY.jsonl, one JSON object per line, as `letterchunk segment` writes it)"
)

_OPEN_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)


def create_temp_beside(path: str | Path, suffix: str = ".tmp") -> tuple[int, Path]:
    """A new empty file ``.NAME.XXXXXXXX<suffix>`` in ``path``'s folder, open for writing.

    Returns ``(fd, temp path)``.  Its mode is the one ``path`` has when it exists (a replaced
    file keeps its mode), else the one ``open(path, "w")`` would give (0666 less the umask,
    applied by the OS).  The caller writes, then ``os.replace``s it over ``path``.
    """
    path = Path(path)
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}{suffix}"
        try:
            fd = os.open(tmp, _OPEN_FLAGS, 0o666)
        except FileExistsError:  # another writer picked the same name: draw again
            continue
        if mode is not None:
            try:
                os.chmod(tmp, mode)
            except BaseException:
                os.close(fd)
                tmp.unlink(missing_ok=True)
                raise
        return fd, tmp
    raise FileExistsError(
        f"no free temporary name beside {path}; remove the .{path.name}.* files there"
    )


def atomic_write_text(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_temp_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_with(path: str | Path, write: Callable[[Path], None]) -> None:
    """Make ``path`` whole or not at all when another library writes it: ``write`` fills a
    temporary file beside it (:func:`create_temp_beside`), which is flushed to disk and renamed
    over ``path``; on any error it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = create_temp_beside(path, ".part")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_lines(path: str | Path, lines: list[str]) -> None:
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def append_lines(path: str | Path, lines: list[str], *, lock: bool = False) -> None:
    """Append ``lines`` (each without its newline) to ``path`` as whole lines, then fsync.

    One ``write`` per call on an ``O_APPEND`` descriptor, so lines of concurrent writers do not
    interleave.  When a killed writer left the file ending mid-line, a newline is written first:
    the torn line stays one unreadable line (readers skip it) and never swallows the next one.
    The file is created when missing, even with no lines.  ``lock``: hold an exclusive
    ``fcntl`` lock from the look at the last byte to the fsync, so two writers cannot both
    mend the same torn line (POSIX only; elsewhere ``O_APPEND`` alone keeps lines whole).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # less the umask
    try:
        if lock:
            _lock(fd)
        size = os.fstat(fd).st_size
        if data and size:
            with open(path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    data = b"\n" + data
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock


def _lock(fd: int) -> None:
    try:
        import fcntl  # deferred: a POSIX-only module; elsewhere O_APPEND alone keeps lines whole
    except ImportError:
        return
    fcntl.flock(fd, fcntl.LOCK_EX)


# ----------------------------------------------------------------------------- output paths


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "folder"),
        (stat.S_ISFIFO, "FIFO (named pipe)"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return name
    return "special file"


def _cannot_write(path: Path, exc: OSError, *, replaced: bool) -> InputError:
    kept = (
        "nothing was written (a file already there is unchanged)"
        if replaced
        else "what was written there is incomplete"
    )
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        fix = "free some space or pass another output path"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "pass a path in a folder you can write to, or fix the folder's permissions"
    else:
        fix = "pass another output path"
    return InputError(path, f"cannot write it ({exc.strerror or exc}); {kept}; {fix}")


def write_output(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to the output path the user named.

    A regular file or a new path is written atomically (:func:`atomic_write_text`; a symlink to
    a file is followed, so the link stays a link).  A device, FIFO or socket is written as a
    stream, in place: renaming a file over ``/dev/null`` would replace the device.  A folder is
    refused.  Every OS error becomes an :class:`InputError` naming ``path``; a reader that
    closes a FIFO early ends the write quietly, as for stdout.
    """
    path = Path(path)
    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None  # new file (a dangling symlink is replaced by the file)
    except OSError as exc:  # a parent that is a file, a symlink loop, no permission
        raise _cannot_write(path, exc, replaced=True) from None
    if mode is not None and stat.S_ISDIR(mode):
        raise InputError(
            path,
            "is a folder; pass a file path to write to (for example "
            f"{path / 'out.jsonl'}), not the folder itself",
        )
    if mode is None or stat.S_ISREG(mode):
        target = Path(os.path.realpath(path)) if mode is not None else path
        try:
            atomic_write_text(target, text)
        except OSError as exc:
            raise _cannot_write(path, exc, replaced=True) from None
        return
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as stream:
            write_stream(stream, text)
    except OSError as exc:
        raise _cannot_write(path, exc, replaced=False) from None


def write_stream(stream: TextIO, text: str) -> bool:
    """Write ``text`` to an open stream (stdout, a FIFO) and flush it; False when its reader
    has gone (``letterchunk validate … | head -1``).

    The stream's descriptor then points at ``/dev/null``, so the interpreter's last flush at
    exit does not fail again ("Exception ignored … BrokenPipeError").  Other OS errors (a full
    disk behind ``/dev/full``) are raised for the caller to name the path.
    """
    try:
        stream.write(text)
        stream.flush()
        return True
    except BrokenPipeError:
        pass
    silence(stream)
    return False


def silence(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at ``/dev/null`` (its reader has gone), so the
    interpreter's last flush prints no "Exception ignored … BrokenPipeError"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real descriptor (a test's capture)
        pass


# ----------------------------------------------------------------------------- reading


def read_utf8(path: str | Path, hint: str = CHUNK_FILE_HINT, *, lenient: bool = False) -> str:
    """The exact text of the regular file ``path``, decoded as UTF-8.

    :class:`InputError` naming ``path`` and what to pass instead (``hint``) when it is not a
    regular file (a FIFO would block the read forever, a device never end it), cannot be read,
    or holds a NUL byte or bytes that are not UTF-8.  With ``lenient`` such bytes become U+FFFD
    instead (for logs, where one torn line must not hide the rest).
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(
                path, f"not a regular file but a {_kind(mode)}, which is not read; pass {hint}"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(
            path, f"cannot read it ({exc.strerror or exc}); check the path and its permissions"
        ) from None
    if lenient:
        return data.decode("utf-8", errors="replace")
    bad = data.find(b"\x00")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.start if bad < 0 else min(bad, exc.start)
    else:
        if bad < 0:
            return text
    raise InputError(
        path,
        f"not UTF-8 text (byte 0x{data[bad]:02x} at offset {bad}): a binary file or another "
        f"encoding; pass {hint}, or convert the file to UTF-8",
    )


@dataclass(frozen=True)
class JsonLine:
    """One line of a JSONL text: its 1-based number, its text (without the newline), the JSON
    value it holds, and ``error``, why it holds none (None for a blank line or a parsed one)."""

    number: int
    text: str
    value: Any = None
    error: str | None = None

    @property
    def blank(self) -> bool:
        return not self.text.strip()


# a \uD800-\uDFFF escape: half of a UTF-16 pair, which only a check after parsing can judge
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def parse_json(text: str) -> tuple[Any, str | None]:
    """``(value, None)`` for JSON text, ``(None, reason)`` for anything Python's parser rejects:
    bad syntax, an integer longer than the int-string limit (ValueError), nesting deeper than
    the recursion limit (RecursionError), or a lone surrogate escape, which parses but can never
    be written back as UTF-8."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:
        return None, "not usable JSON: nested too deeply for the JSON parser"
    except ValueError as exc:  # int-string conversion limit, and any other value the parser refuses
        detail = str(exc).split(";")[0]
        return None, f"not usable JSON ({detail})"
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return None, "not usable JSON: a \\uD800-\\uDFFF escape that is half a character"
        except (RecursionError, ValueError):
            return None, "not usable JSON: nested too deeply for the JSON parser"
    return value, None


def jsonl_lines(text: str) -> list[JsonLine]:
    """Every line of a JSONL text, parsed.  Lines end at ``\\n`` only (a trailing ``\\r`` is
    dropped): U+2028, U+0085 and the like are text inside a JSON string, never line ends."""
    lines = text.removeprefix("\ufeff").split("\n")  # a BOM from an editor is not content
    if lines and lines[-1] == "":
        lines.pop()
    out: list[JsonLine] = []
    for n, line in enumerate(lines, 1):
        line = line.removesuffix("\r")
        if not line.strip():
            out.append(JsonLine(n, line))
            continue
        value, error = parse_json(line)
        out.append(JsonLine(n, line, value, error))
    return out


def read_jsonl(path: str | Path, hint: str = CHUNK_FILE_HINT) -> list[JsonLine]:
    """:func:`jsonl_lines` of the file ``path`` read with :func:`read_utf8`."""
    return jsonl_lines(read_utf8(path, hint))


def read_json_objects(
    path: str | Path, *, lenient: bool = False
) -> tuple[list[dict], list[tuple[int, str]]]:
    """The JSON objects of a JSONL file, and ``(line number, reason)`` for each unusable line.

    Blank lines are ignored; a line that is not usable JSON or not an object is reported, never
    raised.  The file itself must be readable UTF-8 (:func:`read_utf8`) unless ``lenient``.
    """
    objects: list[dict] = []
    bad: list[tuple[int, str]] = []
    for line in jsonl_lines(read_utf8(path, lenient=lenient)):
        if line.error:
            bad.append((line.number, line.error))
        elif isinstance(line.value, dict):
            objects.append(line.value)
        elif not line.blank:
            bad.append((line.number, "not a JSON object"))
    return objects, bad
