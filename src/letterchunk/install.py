"""Install commands phrased for the way this copy of letterchunk was installed.

A source checkout (an editable install, or ``PYTHONPATH=src``) adds an extra with
``pip install -e "<checkout>[extra]"``; an installed distribution (a wheel, from an index or a
file) with ``pip install "letterchunk[extra]"``, which keeps the installed letterchunk and only
adds the extra's dependencies.  Every message that tells the user to install something takes its
command from here, so it is right for both kinds of user.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

__all__ = ["pip_install", "source_checkout"]

_PROJECT_NAME = re.compile(r'^name\s*=\s*"letterchunk"\s*$', re.MULTILINE)


def source_checkout(package_dir: Path | None = None) -> Path | None:
    """The checkout the package runs from, or None when it runs from an installed distribution.

    The package runs from a checkout when its folder is ``<root>/src/letterchunk`` and
    ``<root>/pyproject.toml`` declares the ``letterchunk`` project: true for ``pip install -e``
    (its path hook points into the checkout) and for ``PYTHONPATH=src``, false for a wheel
    unpacked into site-packages.
    """
    here = (package_dir or Path(__file__).parent).resolve()
    root = here.parent.parent
    if here.parent.name != "src":
        return None
    try:
        pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if _PROJECT_NAME.search(pyproject) else None


def pip_install(
    extra: str | None = None, *, reinstall: bool = False, package_dir: Path | None = None
) -> str:
    """The pip command that installs letterchunk with ``extra`` (or reinstalls it), e.g.
    ``pip install -e ".[local]"`` in a checkout, ``pip install "letterchunk[local]"`` otherwise."""
    suffix = f"[{extra}]" if extra else ""
    checkout = source_checkout(package_dir)
    if checkout is not None:
        here = Path(os.getcwd()).resolve()
        target = "." if checkout == here else str(checkout)
        spec = f'"{target}{suffix}"' if suffix else shlex.quote(target)
        return f"pip install -e {spec}"
    spec = f'"letterchunk{suffix}"' if suffix else "letterchunk"
    return f"pip install --force-reinstall {spec}" if reinstall else f"pip install {spec}"
