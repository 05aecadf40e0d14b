"""Write an output folder's chunks as LangChain documents, LlamaIndex nodes or flat JSONL.

Every target gets one JSON object per line, in chunk file order, that the target library loads
without letterchunk (shown in each writer's docstring); :func:`load_langchain` and
:func:`load_llamaindex` do exactly that for Python users.

What is embedded: the chunk's content, preceded by its contextual summary unless ``embed`` is
``"content"``.  A summary states what the chunk is about in the words a question uses, and the
content of most chunks is longer than a small embedding model's window, so embedding the summary
first helps retrieval (contextual retrieval).  No other metadata is embedded: LlamaIndex nodes
list every other key in ``excluded_embed_metadata_keys``, and LangChain embeds ``page_content``
only.  The LLM sees the chunk id, year and section title (for citations) besides the text.

Tiers become relationships: a Tier-2/Tier-3 chunk names its Tier-1 parent (LlamaIndex
``PARENT``, LangChain/JSONL ``parent_chunk_id``), a Tier-1 chunk its children, and each node's
``SOURCE`` is its letter (``source_file``); the chunk id is the document / node id.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from letterchunk.errors import ConfigError, InputError
from letterchunk.install import pip_install
from letterchunk.io import read_jsonl, write_output
from letterchunk.retrieval.chunks import ListMode, Record, read_records

if TYPE_CHECKING:  # the optional ``export`` extra; imported only inside the loaders
    from langchain_core.documents import Document
    from llama_index.core.schema import TextNode

__all__ = [
    "EmbedMode",
    "Target",
    "TARGETS",
    "LLM_METADATA_KEYS",
    "embed_text",
    "export_folder",
    "export_lines",
    "load_langchain",
    "load_llamaindex",
]

Target = Literal["langchain", "llamaindex", "jsonl-flat"]
TARGETS: tuple[Target, ...] = ("langchain", "llamaindex", "jsonl-flat")
EmbedMode = Literal["summary+content", "content"]

# the metadata an answering LLM sees beside the text: enough to cite the passage
LLM_METADATA_KEYS = ("chunk_id", "letter_year", "section_title")
# LlamaIndex's and LangChain's values for its relationships and node types
_SOURCE, _PARENT, _CHILD = "1", "4", "5"
_TEXT_NODE, _DOCUMENT_NODE = "1", "4"
# scalar-only stores (Chroma, FAISS docstore filters) are LangChain's common case
_LISTS: dict[Target, ListMode] = {"langchain": "join", "llamaindex": "keep", "jsonl-flat": "keep"}


def embed_text(record: Record, embed: EmbedMode = "summary+content") -> str:
    """The text to embed for a record: summary, blank line, content (or content alone)."""
    if embed == "summary+content" and record.summary:
        return f"{record.summary}\n\n{record.content}"
    return record.content


def _langchain(record: Record, embed: EmbedMode) -> dict[str, Any]:
    """``Document(**obj)``: page_content is the embedded text; ``content_start`` is where the
    chunk's own text starts in it (0 when no summary is prepended)."""
    text = embed_text(record, embed)
    metadata = dict(record.metadata)
    metadata["content_start"] = len(text) - len(record.content)
    return {"id": record.chunk_id, "page_content": text, "metadata": metadata, "type": "Document"}


def _llamaindex(record: Record, embed: EmbedMode) -> dict[str, Any]:
    """``TextNode.model_validate(obj)``: text is the content, the summary is embedded through
    metadata, and start/end_char_idx are the chunk's span in its letter (the SOURCE)."""
    md = record.metadata
    embedded = {"summary"} if embed == "summary+content" and record.summary else set()
    relationships: dict[str, Any] = {
        _SOURCE: {"node_id": str(md["source_file"]), "node_type": _DOCUMENT_NODE, "metadata": {}}
    }
    if md["parent_chunk_id"]:
        relationships[_PARENT] = {
            "node_id": md["parent_chunk_id"],
            "node_type": _TEXT_NODE,
            "metadata": {},
        }
    children = record.chunk.metadata.child_chunk_ids
    if children:
        relationships[_CHILD] = [
            {"node_id": c, "node_type": _TEXT_NODE, "metadata": {}} for c in children
        ]
    return {
        "id_": record.chunk_id,
        "text": record.content,
        "metadata": md,
        "excluded_embed_metadata_keys": [k for k in md if k not in embedded],
        "excluded_llm_metadata_keys": [k for k in md if k not in LLM_METADATA_KEYS],
        "relationships": relationships,
        "start_char_idx": md["start_char"],
        "end_char_idx": md["end_char_exclusive"],
        "class_name": "TextNode",
    }


def _flat(record: Record, embed: EmbedMode) -> dict[str, Any]:
    """A store-neutral line: id, content, the text to embed, flat metadata."""
    return {
        "id": record.chunk_id,
        "text": record.content,
        "embed_text": embed_text(record, embed),
        "metadata": record.metadata,
    }


_WRITERS = {"langchain": _langchain, "llamaindex": _llamaindex, "jsonl-flat": _flat}


def export_lines(
    records: Iterable[Record], target: Target, embed: EmbedMode = "summary+content"
) -> list[str]:
    write = _WRITERS[target]
    return [json.dumps(write(r, embed), ensure_ascii=False) for r in records]


def export_folder(
    folder: str | Path,
    target: Target,
    out: str | Path | None = None,
    *,
    embed: EmbedMode = "summary+content",
) -> list[str]:
    """The export lines of ``folder``'s chunks; written to ``out`` when given
    (:func:`~letterchunk.io.write_output`: atomically to a file, as a stream to a device or
    FIFO, a folder refused)."""
    if target not in _WRITERS:
        raise ConfigError(f"--to {target!r}: choose one of {', '.join(TARGETS)}")
    lines = export_lines(read_records(folder, lists=_LISTS[target]), target, embed)
    if out is not None:
        write_output(out, "".join(line + "\n" for line in lines))
    return lines


def _missing(package: str, exc: ImportError) -> ConfigError:
    return ConfigError(
        f"{package} is not installed; install the export extra: {pip_install('export')}"
    )


def _json_lines(path: str | Path) -> list[dict[str, Any]]:
    """The objects of an export file; InputError naming the file and line of one that is not
    usable JSON."""
    out = []
    for line in read_jsonl(path, "a file written by `letterchunk export`"):
        if line.error:
            raise InputError(path, f"line {line.number}: {line.error}; export the folder again")
        if not line.blank:
            out.append(line.value)
    return out


def load_langchain(path: str | Path) -> list[Document]:
    """The LangChain documents of a ``--to langchain`` export file."""
    try:
        from langchain_core.documents import Document  # deferred: optional `export` extra
    except ImportError as exc:
        raise _missing("langchain-core", exc) from exc
    return [Document(**obj) for obj in _json_lines(path)]


def load_llamaindex(path: str | Path) -> list[TextNode]:
    """The LlamaIndex nodes of a ``--to llamaindex`` export file."""
    try:
        from llama_index.core.schema import TextNode  # deferred: optional `export` extra
    except ImportError as exc:
        raise _missing("llama-index-core", exc) from exc
    return [TextNode.model_validate(obj) for obj in _json_lines(path)]
