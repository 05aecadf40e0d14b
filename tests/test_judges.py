"""The follow-up yes/no questions (enrich.judges, llm.judge), the abbreviation-aware sentence
splitter and the typed entity enums, on synthetic chunks and a scripted server."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import _chunk
from fake_openai import FakeOpenAI, is_yes_no_question, response_schema
from letterchunk.contract.names import name_kind
from letterchunk.contract.schema import Chunk, Principle
from letterchunk.enrich import PromptContext, build_messages, response_model_for
from letterchunk.enrich.answers import rule_checks
from letterchunk.enrich.candidates import confession_paragraphs, sentence_choices, speaks_of_writer
from letterchunk.enrich.judges import (
    MAX_PARAGRAPH_QUESTIONS,
    MAX_PRINCIPLES,
    MAX_RULE_QUESTIONS,
    PARAGRAPH_THRESHOLD,
    PRINCIPLE_THRESHOLD,
    Verdicts,
    apply_verdicts,
    ask_judges,
    question,
    rule_questions,
)
from letterchunk.llm import prompts
from letterchunk.llm.backend import MODEL_ID
from letterchunk.llm.cache import ResponseCache
from letterchunk.llm.client import LLMClient, LLMSettings
from letterchunk.llm.judge import _p_yes, ask_yes_no
from letterchunk.review.thresholds import Thresholds
from letterchunk.text.clean import load_letter
from letterchunk.text.segment import segment_letter
from letterchunk.text.sentences import sentences
from test_fault_matrix import valid_for

ROOT = Path(__file__).resolve().parents[1]

FENCE_OPEN, FENCE_CLOSE = "<<<CHUNK TEXT>>>", "<<<END CHUNK TEXT>>>"
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


@pytest.mark.parametrize("model", [MODEL_ID, "fake-model", "gpt-4o-mini"])
def test_only_letterchunks_own_model_is_asked_to_compute_a_question_afresh(model):
    # llama-server reuses a shared prompt prefix with slightly different arithmetic, so a
    # question to the embedded model carries cache_prompt false; no other API gets the field
    messages = [{"role": "user", "content": "Is this a question? Answer yes or no."}]
    with FakeOpenAI(judge=lambda body: 0.8) as server:
        settings = LLMSettings.from_env(
            {}, base_url=server.base_url, api_key="sk-test", model=model, transport_retries=0
        )
        with LLMClient(settings) as client:
            answer = ask_yes_no(client, messages, chunk_id="x")
        [request] = server.all_chat_requests
    assert answer.p_yes == pytest.approx(0.8)
    if model == MODEL_ID:
        assert request.body["cache_prompt"] is False
    else:
        assert "cache_prompt" not in request.body
    assert "extra_body" not in request.body


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


def _question_kind(question: str) -> str:
    """Which template a yes/no question was rendered from: its fixed first words tell."""
    for name in ("judge_confession_paragraph", "judge_principle"):
        template = (prompts.prompts_dir() / f"{name}.md").read_text(encoding="utf-8")
        if question.startswith(template.split("{{")[0].splitlines()[0]):
            return name
    raise AssertionError(f"not a judge question: {question!r}")


def _quoted_in_question(question: str) -> str:
    """The letter text a question quotes: the lines between its one pair of fence lines."""
    lines = question.splitlines()
    assert lines.count(FENCE_OPEN) == 1 and lines.count(FENCE_CLOSE) == 1, question
    return "\n".join(lines[lines.index(FENCE_OPEN) + 1 : lines.index(FENCE_CLOSE)])


CONCEPTS = ("mistakes of commission", "circle of competence", "margin of safety", "float")
CTX = PromptContext.for_letter(
    1977,
    ["Textiles", "Insurance"],
    frozenset(CONCEPTS),
    cues={"mistakes of commission": ("mistake", "paid too much"), "float": ("insurance",)},
)


def test_ask_judges_asks_each_paragraph_and_each_rule_in_order_as_standalone_questions():
    c = chunk()
    enrichment = build_messages(c, CTX)
    seen: list[dict] = []
    p_by_kind = {
        "judge_confession_paragraph": 0.7,
        "judge_principle": 0.2,
    }

    def judge(body: dict) -> float:
        seen.append(body)
        return p_by_kind[_question_kind(body["messages"][-1]["content"])]

    with FakeOpenAI(judge=judge) as server, _client(server) as client:
        verdicts = ask_judges(c, client)
    paragraphs = confession_paragraphs(CONFESSING)
    rules = rule_questions(c)
    assert len(paragraphs) == 1 and rules  # every kind of question is put
    questions = [body["messages"][-1]["content"] for body in seen]
    # one question per paragraph and per rule candidate; none about concepts
    assert [_question_kind(q) for q in questions] == (
        ["judge_confession_paragraph"] * len(paragraphs) + ["judge_principle"] * len(rules)
    )
    system = seen[0]["messages"][0]
    for body in seen:  # one shared system message, one question; no chunk prompt before it
        assert body["messages"] == question(body["messages"][-1]["content"])
        assert body["messages"][0] == system and system["role"] == "system"
        assert not any(m["content"] == enrichment[1]["content"] for m in body["messages"])
    # the letter text a question asks about stands inside a fence of its own
    n = len(paragraphs)
    assert [_quoted_in_question(q) for q in questions[:n]] == [p for p, _ in paragraphs]
    assert [_quoted_in_question(q) for q in questions[n : n + len(rules)]] == rules
    assert FENCE_OPEN not in system["content"].replace(f"Text between {FENCE_OPEN}", "")
    admission = sentences(CONFESSING)[1]  # the one first-person self-critical sentence
    assert verdicts.asked
    assert verdicts.confession_paragraphs == ((admission, pytest.approx(0.7)),)
    assert verdicts.rules == tuple((r, pytest.approx(0.2)) for r in rules)
    assert verdicts.calls == len(questions) and verdicts.usage.requests == len(questions)


@pytest.mark.parametrize("year", [1977, 1987, 2016])
def test_the_rule_questions_extend_the_answers_evidence_choices(year):
    # on every chunk of a shipped letter: the answer's choices come first, in their order, then
    # further candidates of the same ranking, each once, each a sentence of the chunk
    for c in segment_letter(load_letter(ROOT / "corpus" / "letters" / f"{year}.txt")):
        checks, asked = rule_checks(c), rule_questions(c)
        assert asked[: len(checks)] == checks
        assert len(set(asked)) == len(asked)
        assert set(asked) <= set(sentence_choices(c.content))
        if c.metadata.chunk_tier == 3:
            assert asked == []
        else:
            assert len(asked) == min(len(sentence_choices(c.content)), MAX_RULE_QUESTIONS)


def test_a_table_is_asked_nothing_even_with_self_critical_words():
    table = chunk("Insurance float grew. We made a mistake and paid too much.", tier=3)
    verdicts, asked = _asked_at(table, 0.8)
    assert rule_checks(table) == [] and asked == []
    assert not verdicts.asked and verdicts.rules == () and verdicts.confession_paragraphs == ()


def _asked_at(c: Chunk, p: float) -> tuple[Verdicts, list[str]]:
    """The verdicts on ``c`` from a server answering every question ``p``, and the questions."""
    asked: list[str] = []

    def judge(body: dict) -> float:
        asked.append(body["messages"][-1]["content"])
        return p

    with FakeOpenAI(judge=judge) as server, _client(server) as client:
        verdicts = ask_judges(c, client)
    return verdicts, asked


def test_a_chunk_with_no_self_critical_paragraph_about_the_writer_gets_no_confession_question():
    c = chunk("Too many managements report adjusted earnings, a mistake that misleads owners.")
    verdicts, asked = _asked_at(c, 0.9)
    # only its rule candidates are asked about
    assert {_question_kind(q) for q in asked} == {"judge_principle"}
    assert verdicts.confession_paragraphs == ()
    assert [s for s, _ in verdicts.rules] == rule_questions(c)


def test_tables_and_clients_that_cannot_judge_are_not_asked():
    class Structured:  # a client with only structured calls (a test double)
        settings = None

    assert ask_judges(chunk(tier=3), object()) == Verdicts()
    assert ask_judges(chunk(), Structured()) == Verdicts()


def _rated(paragraph_p: float | None) -> Verdicts:
    """Verdicts of CONFESSING: its one self-critical paragraph rated as given."""
    return Verdicts(True, ((confession_paragraphs(CONFESSING)[0][1], paragraph_p),))


def test_a_paragraph_at_the_threshold_tags_a_confession_quoting_its_self_critical_sentence():
    tagged, record = apply_verdicts(chunk(), {"chunk_id": "x"}, _rated(PARAGRAPH_THRESHOLD))
    assert tagged.metadata.content_type == "mistake_confession"
    assert record["content_type_evidence"] == [
        "I made a big mistake when I bought the Waumbec mills in 1975, and we paid too much "
        "for them."
    ]


def test_two_noes_undo_the_models_confession_tag_and_its_evidence():
    c = chunk(content_type="mistake_confession")
    record = {"chunk_id": "x", "content_type_evidence": [sentences(CONFESSING)[1]]}
    below = _rated(PARAGRAPH_THRESHOLD - 0.01)
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


def _with_principles(c: Chunk, *statements: str) -> Chunk:
    principles = [Principle(statement=x, category="valuation") for x in statements]
    meta = c.metadata.model_copy(update={"principles": principles})
    return Chunk.model_validate(
        {"chunk_id": c.chunk_id, "content": c.content, "metadata": meta.model_dump()}
    )


def test_principles_are_kept_by_their_sentences_rule_probability_and_ranked_by_it():
    c = _with_principles(chunk(), "A.", "B.", "C.", "D.")
    record = {"chunk_id": "x", "principle_evidence": ["qa", "qb", "qc", "qd"]}
    below = PRINCIPLE_THRESHOLD - 0.01
    above = (PRINCIPLE_THRESHOLD + 1) / 2
    rules = (("qa", above), ("qb", below), ("qd", 1.0))  # "qc" not judged
    out, rec = apply_verdicts(c, record, Verdicts(asked=True, rules=rules))
    # "qb" judged no is dropped; the judged ones by p, then one not judged (the answer stands)
    assert [p.statement for p in out.metadata.principles] == ["D.", "A.", "C."]
    assert rec["principle_evidence"] == ["qd", "qa", "qc"]
    assert record["principle_evidence"] == ["qa", "qb", "qc", "qd"]  # the input is not changed


def test_a_chunk_keeps_its_three_most_probable_principles_and_thresholds_can_be_given():
    c = _with_principles(chunk(), "A.", "B.", "C.", "D.", "E.")
    record = {"chunk_id": "x", "principle_evidence": ["qa", "qb", "qc", "qd", "qe"]}
    rules = (("qa", 0.71), ("qb", 0.95), ("qc", 0.8), ("qd", 0.9), ("qe", 0.6))
    out, rec = apply_verdicts(c, record, Verdicts(asked=True, rules=rules))
    assert MAX_PRINCIPLES == 3 and rec["principle_evidence"] == ["qb", "qd", "qc"]
    lower = Thresholds(confession_paragraph=0.5, rule_sentence=0.55)
    out, rec = apply_verdicts(c, record, Verdicts(True, rules=rules), lower, max_principles=None)
    assert rec["principle_evidence"] == ["qb", "qd", "qc", "qa", "qe"]


def test_judged_rules_the_answer_left_out_become_principles_stated_by_their_sentence():
    stated, left_out, weak = sentences(CONFESSING)[0], sentences(CONFESSING)[2], "x"
    c = _with_principles(chunk(), "Textiles earn little.")
    record = {"chunk_id": "x", "principle_evidence": [stated]}
    t = PRINCIPLE_THRESHOLD
    rules = ((stated, t + (1 - t) / 3), (weak, t - 0.01), (left_out, t + 2 * (1 - t) / 3))
    out, rec = apply_verdicts(c, record, Verdicts(asked=True, rules=rules))
    assert [(p.statement, p.category) for p in out.metadata.principles] == [
        (left_out, "general"),
        ("Textiles earn little.", "valuation"),
    ]
    assert rec["principle_evidence"] == [left_out, stated]


@settings(max_examples=60, deadline=None)
@given(
    stated=st.lists(st.sampled_from(range(5)), unique=True, max_size=2),
    ps=st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=5, max_size=5),
)
def test_judged_principles_are_the_rules_at_the_threshold_most_probable_first(stated, ps):
    quotes = [f"Rule sentence number {i} holds." for i in range(5)]
    c = _with_principles(chunk(), *(f"Stated {i}." for i in stated))
    record = {"chunk_id": "x", "principle_evidence": [quotes[i] for i in stated]}
    verdicts = Verdicts(asked=True, rules=tuple(zip(quotes, ps, strict=True)))
    out, rec = apply_verdicts(c, record, verdicts)
    p_of = dict(verdicts.rules)
    kept = rec["principle_evidence"]
    assert len(kept) == len(out.metadata.principles)
    # an answer's principle stays unless judged below the threshold; another judged rule joins
    # when it reaches it; none is lost or repeated
    expected = {quotes[i] for i in stated if p_of[quotes[i]] is None}
    expected |= {q for q, p in verdicts.rules if p is not None and p >= PRINCIPLE_THRESHOLD}
    # at most MAX_PRINCIPLES stay: the most probable of them
    assert set(kept) <= expected and len(kept) == min(MAX_PRINCIPLES, len(expected))
    rank = [0.0 if p_of[q] is None else p_of[q] for q in kept]
    assert rank == sorted(rank, reverse=True)
    dropped = [0.0 if p_of[q] is None else p_of[q] for q in expected - set(kept)]
    assert all(r >= d for r in rank for d in dropped)
    uncapped, _ = apply_verdicts(c, record, verdicts, max_principles=None)
    assert len(uncapped.metadata.principles) == len(expected)
    # to_dict records each kept principle's rule probability, aligned with its evidence
    assert verdicts.to_dict(kept)["principle_p_yes"] == [
        None if p_of[q] is None else round(p_of[q], 4) for q in kept
    ]


def test_to_dict_keeps_every_probability_rounded_and_principles_aligned_with_their_evidence():
    verdicts = Verdicts(
        asked=True,
        confession_paragraphs=(("I erred.", 0.876543),),
        rules=(("r1", 0.3), ("r2", 0.91234)),
    )
    assert verdicts.to_dict(["r2", "unjudged", "r1"]) == {
        "confession_paragraphs": [{"sentence": "I erred.", "p_yes": 0.8765}],
        "principle_p_yes": [0.9123, None, 0.3],
        "rule_p_yes": [{"sentence": "r1", "p_yes": 0.3}, {"sentence": "r2", "p_yes": 0.9123}],
    }
    assert verdicts.to_dict()["principle_p_yes"] == []


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
    verdicts = Verdicts(True, ((first[1], PARAGRAPH_THRESHOLD + 0.01), (second[1], 0.9)))
    tagged, record = apply_verdicts(chunk(text), {"chunk_id": "x"}, verdicts)
    assert tagged.metadata.content_type == "mistake_confession"
    assert record["content_type_evidence"] == [second[1]]


def test_paragraphs_asked_without_a_probability_leave_the_answer_as_it_is():
    c = chunk(content_type="mistake_confession")
    record = {"chunk_id": "x", "content_type_evidence": [sentences(CONFESSING)[1]]}
    assert apply_verdicts(c, record, _rated(None)) == (c, record)


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
    paragraphs = [q for q in asked if _question_kind(q) == "judge_confession_paragraph"]
    assert len(paragraphs) == MAX_PARAGRAPH_QUESTIONS
    assert [p for _, p in verdicts.confession_paragraphs] == [pytest.approx(0.8)] * 3
    assert "mill number 0" in paragraphs[0] and "mill number 2" in paragraphs[-1]
