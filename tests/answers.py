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
