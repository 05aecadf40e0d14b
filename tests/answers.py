"""A grounded narrative answer shared by the enrichment and repair tests."""

from __future__ import annotations

QUOTE = (
    "We never buy a business whose economics we cannot understand, and we stay inside our "
    "circle of competence even when a clever story tempts us to wander outside it."
)


def narrative_answer(**over) -> dict:
    answer = {
        "contextual_summary": "Berkshire's 1987 gain in net worth. Why intrinsic value matters.",
        "themes": ["performance"],
        "buffett_concepts": ["intrinsic value", "circle of competence"],
        "entities": {"companies": [], "people": ["Charlie Munger"], "metrics": ["book value"]},
        "principles": [
            {
                "statement": "Invest only in businesses you understand.",
                "category": "valuation",
                "evidence": QUOTE,
            }
        ],
        "content_type": "principle_statement",
        "content_type_evidence": [QUOTE],
        "has_financial_data": True,
        "retrieval_priority": "high",
        "abstraction_level": "medium",
        "comparison_years": [1986],
        "future_outlook": False,
        "related_sections_same_letter": ["Insurance Operations"],
        "related_years": [1986],
    }
    answer.update(over)
    return answer


# prompts/enrich_user.md: the fence, and inside it the letter's parts before the chunk's text
# (the year, the section titles, the chunk's own title) and after it, in a hosted run, the
# candidate rule sentences (enrich.messages)
OPEN, CLOSE = "<<<CHUNK TEXT>>>\n", "\n<<<END CHUNK TEXT>>>"
OWN_TITLE = "\nSection of this chunk: "
CANDIDATES = "\n\nCandidate rule sentences (a principle's evidence is one of them):\n"


def quoted_chunk(user: str) -> str:
    """The chunk's text as an enrichment request's user message quotes it."""
    start = user.index(OPEN) + len(OPEN)
    block = user[start : user.rindex(CLOSE)]
    after_title = block.index(OWN_TITLE) + len(OWN_TITLE)
    body = block[block.index("\n\n", after_title) + 2 :]
    cut = body.rfind(CANDIDATES)
    return body if cut < 0 else body[:cut]


def request_chunk(request: dict) -> str:
    """The chunk's text as an enrichment request (a JSON body) quotes it."""
    user = [m for m in request["messages"] if m["role"] == "user"][0]["content"]
    return quoted_chunk(str(user))
