"""Which files are letters: the one discovery every command that takes letters uses.

A path given by the user is either a letter file (taken as a letter whatever its name) or a
folder, whose ``*.txt`` files are its letters, in name order (``1977.txt``, ``1978.txt``, ...).
Other files in a folder (``TRAPS.md``, ``notes.pdf``) are not letters: they are skipped and
passed to ``on_skip`` so the CLI can say so; hidden files and sub-folders are ignored silently.
A path that does not exist, or a folder without one letter, is an :class:`InputError` before any
work starts (no server started, no file written).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from letterchunk.errors import ConfigError, InputError

__all__ = ["LETTER_SUFFIX", "find_letters"]

LETTER_SUFFIX = ".txt"


def find_letters(
    paths: Iterable[str | Path],
    on_skip: Callable[[Path], None] | None = None,
) -> list[Path]:
    """The letter files named by ``paths`` (files and folders), in order, each once.

    Raises :class:`InputError` naming the path for a path that does not exist or a folder that
    holds no ``*.txt`` letter, :class:`ConfigError` when ``paths`` is empty.
    """
    letters: list[Path] = []
    seen: set[Path] = set()

    def add(path: Path) -> None:
        key = path.resolve()
        if key not in seen:  # a letter named twice (a folder and a file in it) is read once
            seen.add(key)
            letters.append(path)

    given = [Path(p) for p in paths]
    if not given:
        raise ConfigError("no letter given; pass letter files (YYYY.txt) or a folder of them")
    for path in given:
        if path.is_dir():
            found = 0
            for entry in sorted(path.iterdir()):
                if entry.name.startswith(".") or not entry.is_file():
                    continue
                if entry.suffix.lower() == LETTER_SUFFIX:
                    add(entry)
                    found += 1
                elif on_skip is not None:
                    on_skip(entry)
            if not found:
                raise InputError(
                    path,
                    f"this folder holds no letter files (*{LETTER_SUFFIX}); pass a folder of "
                    "letters such as corpus/letters, or the letter files themselves",
                )
        elif path.is_file():
            add(path)
        elif path.exists():
            raise InputError(path, "not a regular file or folder; pass a letter file (YYYY.txt)")
        else:
            raise InputError(path, "no such file or folder; check the path")
    return letters
