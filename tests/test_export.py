"""`letterchunk export`: flat filterable metadata, only summary + content embedded, tiers as
relationships, chunk id as document id; loaded by the real LangChain and LlamaIndex."""

from __future__ import annotations

import json

import pytest

from letterchunk.cli import main
from letterchunk.errors import ConfigError, InputError
from letterchunk.retrieval.chunks import read_records
from letterchunk.retrieval.export import export_folder, load_langchain, load_llamaindex
from replayed import replay_letters

SCALARS = (str, int, float, bool)


@pytest.fixture(scope="module")
def enriched_dir(tmp_path_factory):
    return replay_letters(tmp_path_factory.mktemp("enriched"))


@pytest.fixture
def letter_dir(tmp_path, enriched_letter, write_letter):
    write_letter(enriched_letter, tmp_path)
    return tmp_path


def _lines(capsys):
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_flat_metadata_is_one_level_and_keeps_the_filter_fields(letter_dir):
    records = {r.chunk_id: r for r in read_records(letter_dir)}
    md = records["1987-S2-T1-001"].metadata
    for key, value in md.items():
        assert isinstance(value, SCALARS) or (
            isinstance(value, list) and all(isinstance(v, SCALARS) for v in value)
        ), key
    # spec §4.2 (docs/spec.md) ranks these filters first; each survives as its own key
    assert md["letter_year"] == 1987
    assert md["section_title"] == "Insurance Operations"
    assert md["companies"] == ["GEICO", "National Indemnity"]
    assert md["buffett_concepts"] == ["underwriting discipline", "float economics"]
    assert (md["start_char"], md["end_char_exclusive"]) == (
        records["1987-S2-T1-001"].chunk.metadata.source_span.start_char,
        records["1987-S2-T1-001"].chunk.metadata.source_span.end_char_exclusive,
    )
    assert records["1987-S2-T3-001"].metadata["table_names"] == ["Insurance Operations Results"]


def test_langchain_lines_are_scalar_only_with_the_chunk_id_as_document_id(letter_dir, capsys):
    assert main(["export", str(letter_dir), "--to", "langchain"]) == 0
    docs = _lines(capsys)
    assert [d["id"] for d in docs] == ["1987-S1-T1-001", "1987-S2-T1-001", "1987-S2-T3-001"]
    for doc in docs:
        assert all(isinstance(v, SCALARS) for v in doc["metadata"].values())
    t3 = docs[2]
    assert t3["metadata"]["parent_chunk_id"] == "1987-S2-T1-001"
    assert docs[1]["metadata"]["companies"] == "GEICO; National Indemnity"
    # the summary is embedded first; content_start says where the chunk's own text begins
    start = t3["metadata"]["content_start"]
    assert t3["page_content"].startswith(t3["metadata"]["summary"])
    assert t3["page_content"][start:] == read_records(letter_dir)[2].content


def test_embed_content_leaves_the_summary_out(letter_dir, capsys):
    assert main(["export", str(letter_dir), "--to", "jsonl-flat", "--embed", "content"]) == 0
    for line in _lines(capsys):
        assert line["embed_text"] == line["text"]


def test_export_writes_the_file_atomically_and_says_so(letter_dir, tmp_path, capsys):
    out = tmp_path / "nodes.jsonl"
    assert main(["export", str(letter_dir), "--to", "llamaindex", "--out", str(out)]) == 0
    assert "3 chunk(s) written" in capsys.readouterr().err
    assert len(out.read_text(encoding="utf-8").splitlines()) == 3


def test_a_folder_without_chunks_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no YYYY.jsonl chunk files"):
        export_folder(tmp_path, "langchain")
    with pytest.raises(ConfigError, match="--to"):
        export_folder(tmp_path, "chroma")  # type: ignore[arg-type]


def test_a_non_canonical_chunk_names_the_file_and_the_fix(letter_dir):
    path = letter_dir / "1987.jsonl"
    path.write_text(path.read_text().replace('"chunk_tier": 1', '"chunk_tier": "1"', 1))
    with pytest.raises(InputError, match=r"1987.jsonl: chunk 1 .*letterchunk validate"):
        export_folder(letter_dir, "jsonl-flat")


def test_a_missing_library_names_the_extra(letter_dir, tmp_path, monkeypatch):
    out = tmp_path / "docs.jsonl"
    export_folder(letter_dir, "langchain", out)
    monkeypatch.setitem(__import__("sys").modules, "langchain_core.documents", None)
    with pytest.raises(ConfigError, match=r"pip install .*\[export\]"):
        load_langchain(out)


def test_langchain_loads_the_documents_and_filters_on_their_metadata(enriched_dir, tmp_path):
    pytest.importorskip("langchain_core", reason="the export extra is not installed")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    out = tmp_path / "docs.jsonl"
    export_folder(enriched_dir, "langchain", out)
    docs = load_langchain(out)
    assert docs[0].id == "1977-S1-T1-001"
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    assert store.add_documents(docs) == [d.id for d in docs]
    hits = store.similarity_search(
        "GEICO float",
        k=50,
        filter=lambda d: d.metadata["letter_year"] == 1996 and "GEICO" in d.metadata["companies"],
    )
    assert hits and {h.metadata["letter_year"] for h in hits} == {1996}
    assert all(h.id == h.metadata["chunk_id"] for h in hits)


def test_llamaindex_nodes_split_at_512_and_load_into_a_vector_index(enriched_dir, tmp_path):
    pytest.importorskip("llama_index.core", reason="the export extra is not installed")
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.schema import MetadataMode, NodeRelationship
    from llama_index.core.vector_stores import FilterOperator, MetadataFilter, MetadataFilters

    out = tmp_path / "nodes.jsonl"
    export_folder(enriched_dir, "llamaindex", out)
    nodes = {n.node_id: n for n in load_llamaindex(out)}
    node = nodes["1977-S4-T1-001"]  # 1,396 tokens of text and a long metadata record
    embedded = node.get_metadata_str(MetadataMode.EMBED)
    assert embedded == f"summary: {node.metadata['summary']}"
    assert node.get_metadata_str(MetadataMode.LLM).splitlines() == [
        "chunk_id: 1977-S4-T1-001",
        "letter_year: 1977",
        f"section_title: {node.metadata['section_title']}",
    ]
    assert [c.node_id for c in node.child_nodes] == ["1977-S4-T3-001"]
    assert nodes["1977-S4-T3-001"].parent_node.node_id == "1977-S4-T1-001"
    assert node.relationships[NodeRelationship.SOURCE].node_id == "1977_cleaned.txt"

    split = SentenceSplitter(chunk_size=512).get_nodes_from_documents(list(nodes.values()))
    assert len(split) > len(nodes)
    index = VectorStoreIndex(split, embed_model=MockEmbedding(embed_dim=8))
    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="letter_year", value=1996),
            MetadataFilter(key="companies", value="GEICO", operator=FilterOperator.CONTAINS),
        ]
    )
    hits = index.as_retriever(similarity_top_k=5, filters=filters).retrieve("float")
    assert hits
    for hit in hits:
        assert hit.node.metadata["letter_year"] == 1996
        assert "GEICO" in hit.node.metadata["companies"]
