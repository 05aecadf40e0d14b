"""The chat messages for one chunk: the fixed instructions, then everything taken from the letter
quoted as data, then what is asked of the chunk.

Every piece of letter text in a prompt (the section titles, the chunk's own title, its text, the
candidate sentences, the paragraphs the yes/no questions quote) stands between the lines
``<<<CHUNK TEXT>>>`` and ``<<<END CHUNK TEXT>>>`` (``prompts/enrich_user.md``) and passes through
:func:`neutralise_fences` first: a letter line that reads as either marker would close the
quoted block early and leave what follows it outside the data, where the model takes it for
instructions.  It changes only text that holds such a marker (no shipped letter does).
The system message is the same for every chunk of a run, so every request (structured call,
re-ask, yes/no question) starts with the same cached prefix.
"""

from __future__ import annotations

import re
import unicodedata
from typing import get_args

from letterchunk.contract.schema import UNTITLED, Chunk, PrincipleCategory
from letterchunk.enrich.answers import concept_choices, rule_checks
from letterchunk.enrich.context import PromptContext
from letterchunk.llm import prompts

# --------------------------------------------------------------------------------------------
# Fence markers in letter text

#: What a fence marker inside letter text becomes in a prompt: it names what was there and
#: cannot itself be read as a marker.
FENCE_PLACEHOLDER = "[fence marker removed]"

# characters read as "<" or ">" (NFKD already folds the fullwidth and small forms)
_LT = (
    "<\u2039\u00ab\u3008\u300a\u27e8\u27ea\u226a\u22d8"
    "\u276e\u2770\u02c2\u29fc\u2329\u25c1\u25c0\u22b2\u276c"
)
_GT = (
    ">\u203a\u00bb\u3009\u300b\u27e9\u27eb\u226b\u22d9"
    "\u276f\u2771\u02c3\u29fd\u232a\u25b7\u25b6\u22b3\u276d"
)
# Cyrillic and Greek letters (casefolded) drawn like Latin letters
_HOMOGLYPHS = {
    "\u0430": "a", "\u0441": "c", "\u0435": "e", "\u043d": "h", "\u043a": "k", "\u0442": "t",
    "\u0445": "x", "\u0443": "y", "\u043e": "o", "\u0440": "p", "\u0501": "d", "\u0455": "s",
    "\u0456": "i", "\u03b1": "a", "\u03b5": "e", "\u03b7": "h", "\u03ba": "k", "\u03bd": "n",
    "\u03c4": "t", "\u03c7": "x", "\u03c5": "u", "\u03bf": "o", "\u03c1": "p", "\u03b9": "i",
}  # fmt: skip


class _Skeleton(dict[int, str]):
    """``str.translate`` table to the form the marker pattern reads: each character casefolded
    to its base letters (NFKD without combining marks: fullwidth, mathematical and accented
    letters become ASCII), Cyrillic/Greek look-alikes to the Latin letter, ``<``/``>`` look-alikes
    to ``<``/``>``, invisible characters (format and combining marks) to nothing.  Filled on
    demand, one entry per distinct character."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        if char in _LT:
            out = "<"
        elif char in _GT:
            out = ">"
        elif unicodedata.category(char) in ("Cf", "Mn", "Me"):
            out = ""
        else:
            base = "".join(
                c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c)
            ).casefold()
            out = "".join(_HOMOGLYPHS.get(c, c) for c in base)
        self[code] = out
        return out


_SKELETON = _Skeleton()
# Between the letters of the marker words any run of characters that are not letters or digits
# of any script (spaces, punctuation, brackets, "_") may stand, except a line break: "CHUNK
# TEXT", "chunk_text", "C-H-U-N-K  T E X T", "CHUNK.TEXT" all read as the marker.  The word
# before it that fences use (end, begin, ...) and the bracket runs on either side belong to the
# marker, so the whole of it goes, not only its middle.
_GAP = r"(?:[^\w\n]|_)*"
_BRACKETS = r"(?:(?:[<>]|&[lg]t;?)" + _GAP + r")*"


def _spaced(word: str) -> str:
    return _GAP.join(re.escape(c) for c in word)


_LEAD = "|".join(_spaced(w) for w in ("end", "begin", "start", "open", "close", "stop"))
_MARKER = re.compile(
    _BRACKETS
    + rf"(?:(?:{_LEAD}){_GAP}(?:{_spaced('of')}{_GAP})?)?"
    + _spaced("chunk")
    + _GAP
    + _spaced("text")
    + r"(?:s(?!\w))?"
    + rf"(?:{_GAP}(?:[<>]|&[lg]t;?))*"
)


def neutralise_fences(text: str) -> str:
    """``text`` with every fence marker replaced by :data:`FENCE_PLACEHOLDER`.

    A marker is the letters "chunk text" within one line, in any case, with anything but letters
    and digits between them (spaces, punctuation, invisible characters), with
    look-alike letters (fullwidth, accented, mathematical, Cyrillic/Greek) and any number of
    ``<``/``>`` (or look-alikes, or ``&lt;``/``&gt;``) around it.  So after it no line of the
    text, read letters and digits only, holds "chunktext".  Text without a marker is returned
    unchanged (the same object), so the prompts of normal letters keep their bytes.
    """
    skeleton = text.translate(_SKELETON)
    found = list(_MARKER.finditer(skeleton))
    if not found:
        return text
    # where each skeleton character came from (a character may fold to 0, 1 or more)
    origin: list[int] = []
    for i, char in enumerate(text):
        origin.extend([i] * len(_SKELETON[ord(char)]))
    origin.append(len(text))
    parts: list[str] = []
    done = 0
    for m in found:  # a match is never empty: it holds the letters of "chunk text"
        start = max(origin[m.start()], done)
        parts += [text[done:start], FENCE_PLACEHOLDER]
        done = max(origin[m.end() - 1] + 1, start)
    parts.append(text[done:])
    return "".join(parts)


# --------------------------------------------------------------------------------------------
# Messages


def _kind(chunk: Chunk) -> str:
    tier = chunk.metadata.chunk_tier
    if tier == 3:
        n = len(chunk.metadata.table_data)
        return (
            f"table chunk with {n} table(s) (answer tables; no rules, principles or content_type)"
        )
    what = "section" if tier == 1 else "paragraph"
    ask = "; also give section_title" if chunk.metadata.section_title == UNTITLED else ""
    return f"narrative {what} chunk{ask}"


def _concept_lines(ctx: PromptContext) -> str:
    meanings = dict(ctx.meanings)
    return "\n".join(
        f"  {c}: {meanings[c]}" if meanings.get(c) else f"  {c}" for c in ctx.vocabulary
    )


def build_messages(chunk: Chunk, ctx: PromptContext) -> list[dict[str, str]]:
    """The chat messages for one chunk: the fixed instructions (the same for every chunk of a
    run, so every request shares them as a cached prefix), then the letter's quoted text, the
    letter's own parts first, and last what is asked of this chunk."""
    system = prompts.render(
        "enrich_system",
        concepts=_concept_lines(ctx),
        categories=", ".join(get_args(PrincipleCategory)),
    )
    titles = "\n".join(f"- {neutralise_fences(t)}" for t in ctx.section_titles) or "- (none)"
    user = prompts.render(
        "enrich_user",
        year=ctx.year,
        section_titles=titles,
        # never show the placeholder: the model copied it back as the title
        section_title=(
            "(untitled)"
            if chunk.metadata.section_title == UNTITLED
            else neutralise_fences(chunk.metadata.section_title)
        ),
        content=neutralise_fences(chunk.content),
        candidates=_candidates(chunk, ctx),
        kind=_kind(chunk),
        checks=_checks(chunk, ctx),
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _candidates(chunk: Chunk, ctx: PromptContext) -> str:
    """Inside the quoted block: the candidate rule sentences (letter text, so quoted).  Under a
    grammar (``grounded_choices``) the schema offers them as the evidence choices instead."""
    sentences = rule_checks(chunk)
    if ctx.grounded_choices or not sentences:
        return ""
    lines = "\n".join(f"- {neutralise_fences(s)}" for s in sentences)
    return f"\n\nCandidate rule sentences (a principle's evidence is one of them):\n{lines}"


def _checks(chunk: Chunk, ctx: PromptContext) -> str:
    """After the quoted block: the candidate concepts (vocabulary names, not letter text)."""
    concepts = concept_choices(chunk, ctx)
    if not concepts:
        return "\nCandidate concepts: none (buffett_concepts: [])"
    return "\nCandidate concepts (buffett_concepts: 0-3 of these): " + "; ".join(concepts)
