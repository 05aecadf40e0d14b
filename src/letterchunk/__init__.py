"""letterchunk: Berkshire Hathaway shareholder letters → canonical retrieval chunks."""

from .errors import (
    BackendError,
    BudgetExceeded,
    CacheMiss,
    ConfigError,
    InputError,
    LetterchunkError,
    RepairExhausted,
)
from .schema import Chunk, Metadata, TableData
from .tokens import count_tokens

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "BudgetExceeded",
    "CacheMiss",
    "Chunk",
    "ConfigError",
    "InputError",
    "LetterchunkError",
    "Metadata",
    "RepairExhausted",
    "TableData",
    "count_tokens",
    "__version__",
]
