"""Token counting with tiktoken's o200k_base, loaded offline from package data.

tiktoken normally downloads its BPE file at run time; letterchunk never lets it.  The file ships
in ``letterchunk/data/`` and its sha256 is checked against the hash tiktoken itself expects.
"""

from __future__ import annotations

import base64
import hashlib
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources

import tiktoken

from .errors import ConfigError

__all__ = [
    "encoding", "count_tokens", "SpanCounter", "span_counter", "clear_memos", "O200K_SHA256"
]

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


# --------------------------------------------------------------------------------------------
# exact token counts of many spans of one text, from one tokenizer pass

_SAFE_CUT = re.compile(r"(?<=\S) ")
_STRIDE = 2048  # a cut at least every ~2 KB, so any span's unshared head and tail stay short
_REACH = 256  # how far from a span edge a cut is looked for (none near: head/tail get longer)


class SpanCounter:
    """``count(a, b) == count_tokens(text[a:b])`` for any span, from one pass over ``text``.

    o200k's pre-tokenizer always splits *before a space that follows a non-space character*
    (no pattern continues a word, number or punctuation run with a space; a whitespace run never
    ends right before one), and BPE never merges across pre-tokenizer pieces.  So at such a
    "safe cut" the tokens of the whole text, of any span, and of the text between two safe cuts
    all agree.

    The text is cut at the first safe cut at or after each of ``starts`` and the last one at or
    before each of ``ends`` (the offsets spans will start and end at, e.g. block edges), and
    every ~2 KB; the pieces between consecutive cuts are encoded once (together: one pass over
    the text) and their counts summed into a prefix table.  A span is counted as: its head up
    to the first cut inside it (encoded), the prefix-table count between its first and last
    cut, and its tail after the last cut (encoded).  With cuts next to the span's ends, head
    and tail are a word each.  tests/test_segment.py checks the identity.
    """

    def __init__(self, text: str, starts: Iterable[int] = (), ends: Iterable[int] = ()) -> None:
        self.text = text
        self._encode = encoding().encode_ordinary
        n = len(text)
        cuts = set()
        find_safe = _SAFE_CUT.search
        rfind = text.rfind
        for x in set(starts):
            if 0 <= x <= n:
                m = find_safe(text, x, x + _REACH)  # first safe cut >= x
                if m is not None:
                    cuts.add(m.start())
        for x in set(ends):
            if 0 <= x <= n:
                lo = max(1, x - _REACH)
                c = rfind(" ", lo, x + 1)  # last safe cut <= x
                while c > 0 and text[c - 1].isspace():
                    c = rfind(" ", lo, c)
                if c > 0:
                    cuts.add(c)
        x = _STRIDE
        while x < n:
            m = find_safe(text, x)
            if m is None:
                break
            cuts.add(m.start())
            x = m.start() + _STRIDE
        self.cuts = sorted(cuts)
        prefix = [0]
        total = 0
        encode = self._encode
        k = self.cuts
        for i in range(len(k) - 1):
            total += len(encode(text[k[i] : k[i + 1]]))
            prefix.append(total)
        self._prefix = prefix

    def _n(self, a: int, b: int) -> int:
        return len(self._encode(self.text[a:b])) if b > a else 0

    def count(self, a: int, b: int) -> int:
        """Exact token count of ``text[a:b]``."""
        if b - a < 64:
            return self._n(a, b)
        k = self.cuts
        i = bisect_left(k, a)  # first cut >= a
        j = bisect_right(k, b) - 1  # last cut <= b
        if i >= len(k) or j < i:
            return self._n(a, b)
        return self._n(a, k[i]) + self._prefix[j] - self._prefix[i] + self._n(k[j], b)


_last: SpanCounter | None = None


def span_counter(text: str, starts: Iterable[int] = (), ends: Iterable[int] = ()) -> SpanCounter:
    """A :class:`SpanCounter` for ``text``; the one built last is reused when asked for the same
    text again (a letter is segmented, then validated, in one process: one tokenizer pass
    serves both).  Only the last text is kept, so memory stays flat over a corpus."""
    global _last
    last = _last
    if last is not None and (last.text is text or last.text == text):
        return last
    counter = SpanCounter(text, starts, ends)
    _last = counter
    return counter


def clear_memos() -> None:
    """Forget every memoised count (``count_tokens``' LRU and the last :func:`span_counter`).

    For benchmarks: a timed run must not reuse counts a previous run of the same texts left
    behind.  The tokenizer itself (:func:`encoding`) stays loaded.
    """
    global _last
    _last = None
    count_tokens.cache_clear()
