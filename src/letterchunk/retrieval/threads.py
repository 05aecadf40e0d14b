"""One BLAS thread for letterchunk's numpy work, unless the user chose otherwise.

The dense index embeds one short window at a time: small matrix products, where a BLAS thread
pool (OpenBLAS starts one per core) spends more CPU handing work out than it saves.  Measured on
the corpus: with the default threads the dense index took 6.4 times the CPU of one thread, and
a hybrid query's p95 went from 92 ms to 1,932 ms.  A BLAS library sizes its pool when numpy is
first imported, so :func:`pin_blas_threads` runs before letterchunk's first numpy import (sqlite-vec
imports numpy too).  A variable the user has set is kept, and nothing changes once numpy is
loaded.
"""

from __future__ import annotations

import sys

from letterchunk.settings import default_env

__all__ = ["BLAS_THREAD_VARS", "pin_blas_threads"]

# the variables OpenBLAS, OpenMP, MKL, BLIS, Accelerate and numexpr read for their pool size
BLAS_THREAD_VARS = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def pin_blas_threads(threads: int = 1) -> bool:
    """Set each BLAS thread variable the user has not set to ``threads``; whether it could
    still take effect (numpy not imported yet)."""
    if "numpy" in sys.modules:
        return False
    default_env(BLAS_THREAD_VARS, str(threads))
    return True
