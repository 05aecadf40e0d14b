"""Token counting with tiktoken's o200k_base, loaded offline from package data.

tiktoken normally downloads its BPE file at run time; letterchunk never lets it.  The file ships
in ``letterchunk/data/`` and its sha256 is checked against the hash tiktoken itself expects.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from importlib import resources

import tiktoken

from .errors import ConfigError

__all__ = ["encoding", "count_tokens", "O200K_SHA256"]

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
# Same special tokens and split pattern as tiktoken_ext.openai_public.o200k_base.
_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    """The o200k_base encoding, built from the shipped BPE file (no network)."""
    data = resources.files("letterchunk").joinpath("data", "o200k_base.tiktoken").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        raise ConfigError(
            f"letterchunk/data/o200k_base.tiktoken has sha256 {digest}, expected {O200K_SHA256}; "
            "reinstall letterchunk (pip install -e .) to restore the shipped tokenizer file"
        )
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }
    return tiktoken.Encoding(
        name="o200k_base",
        pat_str=_PAT,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    )


@lru_cache(maxsize=512)
def count_tokens(text: str) -> int:
    """Number of o200k_base tokens in ``text`` (special-token text is counted as plain text).

    Memoised (bounded LRU, 512 texts): a letter's chunks are counted when segmented and again
    when validated in the same process; the bound keeps memory flat over a whole corpus.
    """
    return len(encoding().encode_ordinary(text))
