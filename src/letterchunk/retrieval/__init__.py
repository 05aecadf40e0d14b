"""Retrieval for RAG users: export chunks to LangChain / LlamaIndex, a SQLite hybrid index, search.

``chunks`` reads an output folder into typed :class:`~letterchunk.retrieval.chunks.Record`\\ s with
flat, filterable metadata; ``export`` writes them for the RAG libraries; ``embed`` turns text into
vectors offline (MiniLM: int8 in onnxruntime, or float in numpy) or through an OpenAI-compatible
endpoint; ``index`` writes one SQLite file (FTS5 BM25 + dense vectors); ``search`` ranks,
filters and expands tiers.
"""
