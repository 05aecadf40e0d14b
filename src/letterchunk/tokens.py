"""Token counting with tiktoken's o200k_base, loaded offline from package data.

tiktoken normally downloads its BPE file at run time; letterchunk never lets it.  The file ships
in ``letterchunk/data/`` and its sha256 is checked against the hash tiktoken itself expects.
"""

from __future__ import annotations

import binascii
import hashlib
import re
from bisect import bisect_left, bisect_right
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache
from importlib import resources
from itertools import accumulate
from operator import itemgetter
from typing import TYPE_CHECKING

from letterchunk.errors import ConfigError
from letterchunk.install import pip_install

if TYPE_CHECKING:
    import tiktoken

__all__ = ["encoding", "count_tokens", "SpanCounter", "span_counter", "clear_memos", "O200K_SHA256"]

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


def encoding() -> tiktoken.Encoding:
    """The o200k_base encoding, built from the shipped BPE file (no network)."""
    return _load()[0]


@lru_cache(maxsize=1)
def _load() -> tuple[tiktoken.Encoding, list[int]]:
    """The encoding, and the length in bytes of each of its tokens (indexed by token)."""
    import tiktoken  # deferred: building the encoding is most of a short command's start-up

    data = resources.files("letterchunk").joinpath("data", "o200k_base.tiktoken").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != O200K_SHA256:
        raise ConfigError(
            f"letterchunk/data/o200k_base.tiktoken has sha256 {digest}, expected {O200K_SHA256}; "
            f"reinstall letterchunk ({pip_install(reinstall=True)}) "
            "to restore the shipped tokenizer file"
        )
    # binascii and bytes.split at C speed: a third of the time of b64decode per line, and this
    # load is most of a short command's start-up (200,000 lines)
    ranks = {
        binascii.a2b_base64(token): int(rank)
        for token, rank in map(bytes.split, filter(None, data.splitlines()))
    }
    lengths = [0] * (max(ranks.values()) + 1)
    for token, rank in ranks.items():
        lengths[rank] = len(token)
    enc = tiktoken.Encoding(
        name="o200k_base",
        pat_str=_PAT,
        mergeable_ranks=ranks,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    )
    return enc, lengths


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
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_REACH = 256  # how far from a span edge a safe cut is looked for (none near: encode the span)


def _token_ends(text: str) -> list[int]:
    """The byte offset in ``text`` (UTF-8) where each of its o200k_base tokens ends."""
    enc, lengths = _load()
    tokens = enc.encode_ordinary(text)
    if len(tokens) < 2:  # itemgetter of one index gives the item, not a tuple
        return list(accumulate(lengths[t] for t in tokens))
    # itemgetter gathers every token's length in one C call (this runs holding the GIL)
    return list(accumulate(itemgetter(*tokens)(lengths)))


@lru_cache(maxsize=1)
def _worker() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="letterchunk-tokens")


class SpanCounter:
    """``count(a, b) == count_tokens(text[a:b])`` for any span, from one pass over ``text``.

    o200k's pre-tokenizer always splits *before a space that follows a non-space character*
    (no pattern continues a word, number or punctuation run with a space; a whitespace run never
    ends right before one), and BPE never merges across pre-tokenizer pieces.  So at such a
    "safe cut" (and at either end of the text) the tokens of the whole text, of any span, and of
    the text between two safe cuts all agree: a safe cut is a token boundary of the whole text.

    The whole text is encoded once and the byte offset where each token ends is kept.  A span
    is counted as: its head up to the first safe cut inside it (encoded on its own, a word or
    so), the number of the text's tokens between its first and last safe cut (two bisections),
    and its tail after the last safe cut (encoded).  tests/test_segment.py checks the identity.
    """

    def __init__(self, text: str, *, background: bool = True) -> None:
        self.text = text
        self._encode = encoding().encode_ordinary
        # the tokenizer releases the GIL: the whole-text pass runs in a worker thread while the
        # caller goes on (e.g. detecting blocks); the first count that needs it waits for it.
        # A caller with nothing to do meanwhile (``background=False``) encodes in its own thread.
        self._pending: Future[list[int]] | None = None
        self._ends: list[int] = []
        if background:
            self._pending = _worker().submit(_token_ends, text)
        else:
            self._ends = _token_ends(text)
        # char offset -> byte offset: every non-ASCII char adds its extra UTF-8 bytes (an ASCII
        # text, told in one C call, has none to look for)
        self._wide = [] if text.isascii() else [m.start() for m in _NON_ASCII.finditer(text)]
        self._extra = list(accumulate(len(text[i].encode("utf-8")) - 1 for i in self._wide))
        self._memo: dict[str, int] = {}  # piece -> count, for heads and tails
        self._spans: dict[tuple[int, int], int] = {}  # (a, b) -> count: spans asked again

    def _n(self, a: int, b: int) -> int:
        if b <= a:
            return 0
        piece = self.text[a:b]
        n = self._memo.get(piece)
        if n is None:
            n = self._memo[piece] = len(self._encode(piece))
        return n

    def _token_index(self, c: int) -> int:
        """Number of the text's tokens before char offset ``c`` (a token boundary)."""
        if self._pending is not None:
            self._ends = self._pending.result()
            self._pending = None
        k = bisect_left(self._wide, c)
        return bisect_right(self._ends, c + (self._extra[k - 1] if k else 0))

    def count(self, a: int, b: int) -> int:
        """Exact token count of ``text[a:b]``; a span asked again (a section's count is asked
        when merging, splitting and building its chunk, then when validating) is remembered."""
        n = self._spans.get((a, b))
        if n is None:
            n = self._spans[(a, b)] = self._count(a, b)
        return n

    def _count(self, a: int, b: int) -> int:
        if b - a < 64:
            return self._n(a, b)
        head, tail = self.head(a), self.tail(b)
        if head is None or tail is None or tail[0] < head[0]:
            return self._n(a, b)
        return head[1] + tail[1]

    def head(self, a: int) -> tuple[int, int] | None:
        """``(ca, n)``: the first safe cut ``ca`` at or after ``a`` and the tokens of
        ``text[a:ca]`` less the text's tokens before ``ca``; None when no cut is near.

        A span ``(a, b)`` of 64 chars or more whose head and tail are both found, the tail's
        cut not before the head's, has ``head(a)[1] + tail(b)[1]`` tokens: each part depends
        on one end only, so a caller can keep them per point and count spans without the
        tokenizer (:mod:`letterchunk.retrieval.marks`)."""
        if a <= 0:
            return 0, -self._token_index(0)
        m = _SAFE_CUT.search(self.text, a, a + _REACH)  # first safe cut >= a
        if m is None:
            return None
        ca = m.start()
        return ca, self._n(a, ca) - self._token_index(ca)

    def tail(self, b: int) -> tuple[int, int] | None:
        """``(cb, n)``: the last safe cut ``cb`` at or before ``b`` and the tokens of
        ``text[cb:b]`` plus the text's tokens before ``cb``; None when no cut is near."""
        text = self.text
        if b >= len(text):
            cb = len(text)
        else:
            lo = max(1, b - _REACH)
            cb = text.rfind(" ", lo, b + 1)  # last safe cut <= b
            while cb > 0 and text[cb - 1].isspace():
                cb = text.rfind(" ", lo, cb)
            if cb <= 0:
                return None
        return cb, self._n(cb, b) + self._token_index(cb)


_recent: list[SpanCounter] = []  # the last few counters built, newest last
_RECENT = 3


def span_counter(text: str) -> SpanCounter:
    """A :class:`SpanCounter` for ``text``; one of the last three built is reused when asked
    for the same text again (a letter is segmented, then validated, in one process: one
    tokenizer pass serves both; the next letter's pass may already be under way).  Only three
    texts are kept, so memory stays flat over a corpus."""
    for counter in _recent:
        if counter.text is text or counter.text == text:
            return counter
    counter = SpanCounter(text)
    _recent.append(counter)
    del _recent[:-_RECENT]
    return counter


def clear_memos() -> None:
    """Forget every memoised count (``count_tokens``' LRU and the recent :func:`span_counter`).

    For benchmarks: a timed run must not reuse counts a previous run of the same texts left
    behind.  The tokenizer itself (:func:`encoding`) stays loaded.
    """
    _recent.clear()
    count_tokens.cache_clear()
