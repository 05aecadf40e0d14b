"""The analysts' loop: decisions on the model's values (``reviews.jsonl``), applied on every
rerun, re-anchored after a re-segmentation, and turned into thresholds per model.

``records.py`` is the file format; the other modules read it.
"""

from __future__ import annotations

from letterchunk.review.records import (
    REVIEWS_FILE,
    ReviewFileError,
    ReviewRecord,
    append_review,
    effective_reviews,
    new_record,
    read_reviews,
)

__all__ = [
    "REVIEWS_FILE",
    "ReviewFileError",
    "ReviewRecord",
    "append_review",
    "effective_reviews",
    "new_record",
    "read_reviews",
]
