"""The follow-up yes/no questions (enrich.judges, llm.judge), the abbreviation-aware sentence
splitter and the typed entity enums, on synthetic chunks and a scripted server."""

from __future__ import annotations

import math

import pytest

from conftest import _chunk
from fake_openai import FakeOpenAI, is_yes_no_question, response_schema
from letterchunk.contract.names import name_kind
from letterchunk.contract.schema import Chunk, Principle
from letterchunk.enrich import PromptContext, build_messages, response_model_for
from letterchunk.enrich.candidates import confession_paragraphs, speaks_of_writer
from letterchunk.enrich.judges import (
    CONFESSION_THRESHOLD,
    MAX_PARAGRAPH_QUESTIONS,
    PARAGRAPH_THRESHOLD,
    Verdicts,
    apply_verdicts,
    ask_judges,
)
from letterchunk.llm.cache import ResponseCache
from letterchunk.llm.client import LLMClient, LLMSettings
from letterchunk.llm.judge import _p_yes, ask_yes_no
from letterchunk.text.sentences import sentences
from test_fault_matrix import valid_for

CONFESSING = (
    "Our textile business earned little this year. I made a big mistake when I bought "
    "the Waumbec mills in 1975, and we paid too much for them. The insurance companies did well."
)


def chunk(text: str = CONFESSING, tier: int = 1, content_type: str = "narrative") -> Chunk:
    """A synthetic chunk of 1977 (conftest's builder) with the given tier and type."""
    kind = "financial_table" if tier == 3 else content_type
    return _chunk(f"1977-S2-T{tier}-001", text, 0, content_type=kind)


# -- sentences -------------------------------------------------------------------------------


def test_sentences_do_not_end_at_titles_initials_or_corporate_forms():
    text = (
        "Mr. Ken Chace runs Berkshire Hathaway Inc. with great skill. Our U.S. operations grew "
        "by 5.5% in 1977. E. R. Jones agreed. Did it work?  Yes - it did."
    )
    assert sentences(text) == [
        "Mr. Ken Chace runs Berkshire Hathaway Inc. with great skill.",
        "Our U.S. operations grew by 5.5% in 1977.",
        "E. R. Jones agreed.",
        "Did it work?",
        "Yes - it did.",
    ]


def test_sentences_keep_an_unended_tail_and_collapse_whitespace():
    assert sentences("One line\nwraps here. And a tail without end") == [
        "One line wraps here.",
        "And a tail without end",
    ]
    assert sentences("   ") == []


# -- reading a probability -------------------------------------------------------------------


def test_p_yes_normalises_over_yes_and_no_in_any_case_and_ignores_other_tokens():
    top = [("Yes", math.log(0.3)), (" yes", math.log(0.1)), ("No", math.log(0.4)), ("{", -0.5)]
    assert _p_yes(top) == pytest.approx(0.4 / 0.8)
    assert _p_yes([("{", -0.1)]) is None
    assert _p_yes([]) is None


def _client(server: FakeOpenAI, cache: ResponseCache | None = None) -> LLMClient:
    settings = LLMSettings.from_env(
        {}, base_url=server.base_url, api_key="sk-test", model="fake-model", transport_retries=0
    )
    return LLMClient(settings, cache=cache)


def test_ask_yes_no_reads_the_servers_logprobs_and_caches_the_answer(tmp_path):
    messages = [{"role": "user", "content": "Is this a question? Answer yes or no."}]
    with FakeOpenAI(judge=lambda body: 0.8) as server:
        with ResponseCache(tmp_path / "c") as cache, _client(server, cache) as client:
            first = ask_yes_no(client, messages, chunk_id="x")
            again = ask_yes_no(client, messages, chunk_id="x")
        [request] = server.all_chat_requests
    assert request.body["max_tokens"] == 1 and request.body["logprobs"] is True
    assert request.body["top_logprobs"] >= 2
    assert first.p_yes == pytest.approx(0.8) and first.source == "live"
    assert first.usage.requests == 1 and first.usage.completion_tokens == 1
    assert again.p_yes == pytest.approx(0.8) and again.source == "cache"
    assert again.usage.requests == 0


def test_a_server_without_logprobs_gives_no_probability(tmp_path):
    with FakeOpenAI() as server, _client(server) as client:  # judge=None: no logprobs
        answer = ask_yes_no(client, [{"role": "user", "content": "yes or no?"}], chunk_id="x")
    assert answer.p_yes is None and answer.source == "live"


# -- the judges on a chunk -------------------------------------------------------------------


def _messages(c: Chunk) -> list[dict]:
    return build_messages(c, PromptContext.for_letter(1977, ["Textiles", "Insurance"]))


def test_ask_judges_asks_about_the_chunk_each_confession_paragraph_and_each_principle():
    c = chunk()
    meta = c.metadata.model_copy(
        update={"principles": [Principle(statement="Pay fair prices.", category="valuation")]}
    )
    c = Chunk.model_validate(
        {"chunk_id": c.chunk_id, "content": c.content, "metadata": meta.model_dump()}
    )
    evidence = {"chunk_id": c.chunk_id, "principle_evidence": [sentences(CONFESSING)[1]]}
    messages = _messages(c)
    seen: list[dict] = []

    def judge(body: dict) -> float:
        seen.append(body)
        question = body["messages"][-1]["content"]
        if "principle" in question:
            return 0.2
        return 0.7 if "Paragraph:" in question else 0.9

    with FakeOpenAI(judge=judge) as server, _client(server) as client:
        verdicts = ask_judges(c, evidence, messages, client)
    admission = sentences(CONFESSING)[1]  # the one first-person self-critical sentence
    assert verdicts.asked and verdicts.confession == pytest.approx(0.9)
    # its paragraph (here the whole chunk) is asked about, the sentence kept as the quote
    assert verdicts.confession_paragraphs == ((admission, pytest.approx(0.7)),)
    assert verdicts.principles == pytest.approx((0.2,))
    assert verdicts.calls == 3 and verdicts.usage.requests == 3
    for body in seen:  # the chunk's own prompt first (a cached prefix), one question after it
        assert body["messages"][:2] == messages and len(body["messages"]) == 3
    assert f'Paragraph: "{CONFESSING}"' in seen[1]["messages"][-1]["content"]
    assert admission in seen[2]["messages"][-1]["content"]  # the principle's evidence


def _asked_at(c: Chunk, p: float) -> tuple[Verdicts, list[str]]:
    """The verdicts on ``c`` from a server answering every question ``p``, and the questions."""
    asked: list[str] = []

    def judge(body: dict) -> float:
        asked.append(body["messages"][-1]["content"])
        return p

    with FakeOpenAI(judge=judge) as server, _client(server) as client:
        verdicts = ask_judges(c, {"chunk_id": c.chunk_id}, _messages(c), client)
    return verdicts, asked


def test_a_chunk_with_no_self_critical_paragraph_about_the_writer_gets_no_confession_question():
    c = chunk("Too many managements report adjusted earnings, a mistake that misleads owners.")
    verdicts, asked = _asked_at(c, 0.9)
    assert asked == [] and verdicts == Verdicts(asked=True)


def test_tables_and_clients_that_cannot_judge_are_not_asked():
    class Structured:  # a client with only structured calls (a test double)
        settings = None

    assert ask_judges(chunk(tier=3), {}, [], object()) == Verdicts()
    assert ask_judges(chunk(), {}, _messages(chunk()), Structured()) == Verdicts()


def _rated(chunk_p: float | None, paragraph_p: float | None) -> Verdicts:
    """Verdicts of CONFESSING: the chunk question and its one paragraph rated as given."""
    return Verdicts(True, chunk_p, ((confession_paragraphs(CONFESSING)[0][1], paragraph_p),))


@pytest.mark.parametrize(
    "chunk_p, paragraph_p",
    [(CONFESSION_THRESHOLD, 0.1), (0.1, PARAGRAPH_THRESHOLD)],
    ids=["the chunk question", "the paragraph question"],
)
def test_either_yes_tags_a_confession_quoting_its_self_critical_sentence(chunk_p, paragraph_p):
    tagged, record = apply_verdicts(chunk(), {"chunk_id": "x"}, _rated(chunk_p, paragraph_p))
    assert tagged.metadata.content_type == "mistake_confession"
    assert record["content_type_evidence"] == [
        "I made a big mistake when I bought the Waumbec mills in 1975, and we paid too much "
        "for them."
    ]


def test_two_noes_undo_the_models_confession_tag_and_its_evidence():
    c = chunk(content_type="mistake_confession")
    record = {"chunk_id": "x", "content_type_evidence": [sentences(CONFESSING)[1]]}
    below = _rated(CONFESSION_THRESHOLD - 0.01, PARAGRAPH_THRESHOLD - 0.01)
    untagged, out = apply_verdicts(c, record, below)
    assert untagged.metadata.content_type == "narrative"
    assert out["content_type_evidence"] == []


def test_a_chunk_without_a_self_critical_paragraph_about_the_writer_is_no_confession():
    others = chunk(
        "Too many managements report adjusted earnings, a mistake that misleads owners.",
        content_type="mistake_confession",
    )
    record = {"chunk_id": "x", "content_type_evidence": ["a mistake"]}
    untagged, out = apply_verdicts(others, record, Verdicts(asked=True))
    assert untagged.metadata.content_type == "narrative"
    assert out["content_type_evidence"] == []
    # with nothing asked (a client that cannot judge) the model's own tag stands
    assert apply_verdicts(others, record, Verdicts()) == (others, record)


def test_principles_judged_no_are_dropped_with_their_quotes_and_unknown_ones_kept():
    c = chunk()
    meta = c.metadata.model_copy(
        update={
            "principles": [
                Principle(statement="A.", category="general"),
                Principle(statement="B.", category="general"),
                Principle(statement="C.", category="general"),
            ]
        }
    )
    c = Chunk.model_validate(
        {"chunk_id": c.chunk_id, "content": c.content, "metadata": meta.model_dump()}
    )
    record = {"chunk_id": "x", "principle_evidence": ["qa", "qb", "qc"]}
    out, rec = apply_verdicts(c, record, Verdicts(principles=(0.9, 0.1, None)))
    assert [p.statement for p in out.metadata.principles] == ["A.", "C."]
    assert rec["principle_evidence"] == ["qa", "qc"]


def test_no_probability_leaves_the_answer_as_it_is():
    c = chunk(content_type="mistake_confession")
    assert apply_verdicts(c, {"chunk_id": "x"}, Verdicts()) == (c, {"chunk_id": "x"})


# -- typed entity enums ----------------------------------------------------------------------


def test_the_grammar_offers_only_typed_names_in_each_entity_list():
    text = (
        "Mr. Ken Chace manages the mills of Berkshire Hathaway Inc. in New Bedford, and "
        "Textile Operations earned little. Gene Abegg runs Illinois National Bank and Trust "
        "Company."
    )
    c = chunk(text)
    schema = response_model_for(c, PromptContext.for_letter(1977, [])).model_json_schema()
    defs = schema["$defs"]
    entities = defs["EnrichedEntities"]["properties"]

    def offered(field: str) -> list[str]:
        items = entities[field].get("items", {})
        return items.get("enum", [items["const"]] if "const" in items else [])

    assert offered("people") and offered("companies")
    assert all(name_kind(n, text) == "person" for n in offered("people"))
    assert all(name_kind(n, text) == "organisation" for n in offered("companies"))
    assert any("Ken Chace" in n for n in offered("people"))
    assert not any("Chace" in n for n in offered("companies"))
    assert "New Bedford" not in offered("people") + offered("companies")


def test_the_scripted_server_keeps_yes_no_questions_out_of_its_reply_script():
    body = {"messages": [], "max_tokens": 1, "logprobs": True}
    assert is_yes_no_question(body) and not is_yes_no_question({**body, "max_tokens": 5})
    assert response_schema({"messages": []}) is None
    assert valid_for({"messages": []}) == {}


def test_evidence_choices_keep_sentences_with_abbreviations_whole():
    from letterchunk.enrich import sentence_choices

    text = (
        "Our textile operation is run by Mr. Ken Chace of Berkshire Hathaway Inc. in New "
        "Bedford. It earned little in the U.S. market during 1977 as a whole."
    )
    assert sentence_choices(text) == [
        "Our textile operation is run by Mr. Ken Chace of Berkshire Hathaway Inc. in New Bedford.",
        "It earned little in the U.S. market during 1977 as a whole.",
    ]


def test_a_tagged_confession_quotes_the_paragraph_the_model_rates_highest():
    text = (
        "We made a mistake in buying the mill, and it cost us dearly.\n\n"
        "Prices rose. I was wrong about the price we paid for the insurer."
    )
    first, second = confession_paragraphs(text)
    assert first == ("We made a mistake in buying the mill, and it cost us dearly.",) * 2
    assert second == (
        "Prices rose. I was wrong about the price we paid for the insurer.",
        "I was wrong about the price we paid for the insurer.",
    )
    verdicts = Verdicts(True, 0.2, ((first[1], 0.72), (second[1], 0.9)))
    tagged, record = apply_verdicts(chunk(text), {"chunk_id": "x"}, verdicts)
    assert tagged.metadata.content_type == "mistake_confession"
    assert record["content_type_evidence"] == [second[1]]


def test_paragraphs_asked_without_a_probability_leave_the_answer_as_it_is():
    c = chunk(content_type="mistake_confession")
    record = {"chunk_id": "x", "content_type_evidence": [sentences(CONFESSING)[1]]}
    assert apply_verdicts(c, record, _rated(None, None)) == (c, record)


def test_only_paragraphs_with_a_self_critical_sentence_about_the_writer_are_proposed():
    text = (
        "The competitors made a big mistake in pricing.\n\n"
        "Our mills ran well.\n\n"
        "In hindsight,   we paid too much\n for the insurer. It still earns well.\n\n"
        "In my opinion, the disappointing results of hedge funds will recur.\n\n"
        "Unfortunately, your Chairman sold the stock too early."
    )
    assert confession_paragraphs(text) == [
        (
            "In hindsight, we paid too much for the insurer. It still earns well.",
            "In hindsight, we paid too much for the insurer.",
        ),
        # the letters' own names for the writer count as the first person
        ("Unfortunately, your Chairman sold the stock too early.",) * 2,
    ]


def test_an_opinion_frame_alone_does_not_make_the_writer_the_one_who_erred():
    assert not speaks_of_writer("In my opinion, their disappointing results will recur.")
    assert not speaks_of_writer("I'm certain the managers there made a costly mistake.")
    # a first-person word outside the frame still counts, as do "Berkshire" and "our"
    assert speaks_of_writer("I think I made a mistake.")
    assert speaks_of_writer("Berkshire paid too much for the mill.")
    assert speaks_of_writer("Alas, our error cost us dearly.")


def test_at_most_the_first_paragraphs_are_asked():
    text = "\n\n".join(f"In {1970 + i} I made a mistake buying mill number {i}." for i in range(5))
    verdicts, asked = _asked_at(chunk(text), 0.8)
    paragraphs = [q for q in asked if "Paragraph:" in q]
    assert len(paragraphs) == MAX_PARAGRAPH_QUESTIONS
    assert [p for _, p in verdicts.confession_paragraphs] == [pytest.approx(0.8)] * 3
    assert "mill number 0" in paragraphs[0] and "mill number 2" in paragraphs[-1]
