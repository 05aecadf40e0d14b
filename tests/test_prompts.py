"""prompts.render fails on a missing or unused variable; prompt_hash follows every template."""

from __future__ import annotations

import re
import shutil

import pytest

from letterchunk.errors import ConfigError
from letterchunk.llm import prompts


@pytest.fixture
def prompt_copy(tmp_path, monkeypatch):
    """A private copy of the shipped resources, selected through LETTERCHUNK_RESOURCES."""
    src = prompts.prompts_dir()
    root = tmp_path / "res"
    shutil.copytree(src, root / "prompts")
    monkeypatch.setenv("LETTERCHUNK_RESOURCES", str(root))
    return root / "prompts"


_USER = {
    "year": 1977,
    "section_titles": "- A",
    "section_title": "A",
    "content": "Body {{not_a_var}} stays.",
    "candidates": "",
    "kind": "narrative",
    "checks": "",
}


def test_render_fills_every_placeholder():
    text = prompts.render("enrich_user", **_USER)
    assert "Letter year: 1977" in text
    assert "{{" in text and "Body {{not_a_var}} stays." in text  # inserted text is not re-scanned
    # everything taken from the letter stands inside the one fence; only the chunk's kind
    # (and the candidate concepts) follow it
    head, fence, rest = text.partition("<<<CHUNK TEXT>>>\n")
    quoted, end, tail = rest.partition("\n<<<END CHUNK TEXT>>>")
    assert head == "" and fence and end
    assert "Letter year: 1977" in quoted and "Body {{not_a_var}} stays." in quoted
    assert tail.strip() == "Chunk kind: narrative"


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        (
            {k: v for k, v in _USER.items() if k != "content"},
            "missing value(s) for content",
        ),
        ({**_USER, "extra": 1}, "not used by the template: extra"),
    ],
)
def test_render_rejects_missing_and_unused_variables(variables, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        prompts.render("enrich_user", **variables)


def test_unknown_template_names_the_known_ones():
    with pytest.raises(ConfigError, match="enrich_system"):
        prompts.render("no_such_prompt")


def test_prompt_hash_changes_with_any_template_and_only_then(prompt_copy):
    before = prompts.prompt_hash()
    assert prompts.prompt_hash() == before  # stable
    path = prompt_copy / "enrich_user.md"
    original = path.read_text(encoding="utf-8")
    path.write_text(original + " ", encoding="utf-8")
    changed = prompts.prompt_hash()
    assert changed != before
    path.write_text(original, encoding="utf-8")
    assert prompts.prompt_hash() == before
    (prompt_copy / "new_one.md").write_text("x", encoding="utf-8")
    assert prompts.prompt_hash() != before


def test_templates_are_read_from_the_resources_override(prompt_copy):
    (prompt_copy / "enrich_system.md").write_text(
        "SYS {{concepts}} {{categories}}", encoding="utf-8"
    )
    assert prompts.render("enrich_system", concepts="c", categories="k") == "SYS c k"
