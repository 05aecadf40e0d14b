"""letterchunk's version, on the ground floor: any module can name it without importing the
package itself, whose ``__init__`` names every stage (importing it from a stage would close an
import circle through that ``__init__``)."""

from __future__ import annotations

__all__ = ["__version__", "installed_version"]

__version__ = "0.1.0"


def installed_version() -> str:
    """The installed distribution's version; ``__version__`` when run from a checkout."""
    from importlib import metadata  # deferred: slow to load, and asked only by --version

    try:
        return metadata.version("letterchunk")
    except metadata.PackageNotFoundError:
        return __version__
