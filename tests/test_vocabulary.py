"""Controlled vocabulary loading and shipped-resource lookup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from letterchunk.contract.vocabulary import load_concepts, load_cues
from letterchunk.errors import ConfigError
from letterchunk.resources import RESOURCES_ENV, resource_path

REPO = Path(__file__).resolve().parents[1]


def test_shipped_vocabulary_loads():
    concepts = load_concepts()
    assert isinstance(concepts, frozenset)
    expected = json.loads((REPO / "schemas" / "buffett_concepts.json").read_text())["concepts"]
    assert concepts == frozenset(expected)
    assert {"float economics", "Mr. Market", "margin of safety"} <= concepts


def test_shipped_cues_cover_every_concept_in_vocabulary_order():
    cues = load_cues()
    assert (
        list(cues)
        == json.loads((REPO / "schemas" / "buffett_concepts.json").read_text())["concepts"]
    )
    assert all(cues[c] and all(isinstance(x, str) and x.strip() for x in cues[c]) for c in cues)
    assert "look-through" in cues["look-through earnings"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"concepts": ["a", "b"]}', {}),
        (
            '{"concepts": ["a", "b"], "cues": {"b": ["bee"], "a": ["ay", "eh"]}}',
            {"a": ("ay", "eh"), "b": ("bee",)},
        ),
    ],
)
def test_cues_are_optional_and_follow_vocabulary_order(tmp_path, content, expected):
    path = tmp_path / "v.json"
    path.write_text(content)
    assert load_cues(path) == expected and list(load_cues(path)) == list(expected)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"concepts": ["a"], "cues": ["a"]}', "must map each concept"),
        ('{"concepts": ["a"], "cues": {"a": [""]}}', "must map each concept"),
        ('{"concepts": ["a"], "cues": {"zzz": ["z"]}}', 'missing from "concepts": zzz'),
    ],
)
def test_bad_cues_are_a_config_error(tmp_path, content, message):
    path = tmp_path / "v.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_cues(path)


def test_resource_path_finds_repo_folders():
    assert resource_path("schemas", "buffett_concepts.json").is_file()


def test_env_override_is_read_at_call_time(tmp_path, monkeypatch):
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "buffett_concepts.json").write_text('{"concepts": ["only one"]}')
    monkeypatch.setenv(RESOURCES_ENV, str(tmp_path))
    assert (
        resource_path("schemas", "buffett_concepts.json")
        == tmp_path / "schemas" / "buffett_concepts.json"
    )
    assert load_concepts() == frozenset({"only one"})


def test_missing_resource_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv(RESOURCES_ENV, str(tmp_path))
    with pytest.raises(ConfigError, match=RESOURCES_ENV):
        resource_path("prompts", "nothing.txt")


@pytest.mark.parametrize(
    ("kind", "name"), [("secrets", "x"), ("schemas", "../pyproject.toml"), ("schemas", "")]
)
def test_resource_path_rejects_bad_names(kind, name):
    with pytest.raises(ValueError):
        resource_path(kind, name)


@pytest.mark.parametrize(
    "content",
    ["not json", '{"concepts": []}', '{"concepts": ["ok", ""]}', '["a"]', '{"concepts": [1]}'],
)
def test_bad_vocabulary_file_is_a_config_error(tmp_path, content):
    path = tmp_path / "v.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match="concept"):
        load_concepts(path)


def test_installed_package_resources_win_over_repo_folder(tmp_path, monkeypatch):
    """In a wheel, resources live in letterchunk/_resources/ (pyproject force-include)."""
    import letterchunk.resources as res

    package = tmp_path / "site-packages" / "letterchunk"
    (package / "_resources" / "schemas").mkdir(parents=True)
    shipped = package / "_resources" / "schemas" / "buffett_concepts.json"
    shipped.write_text('{"concepts": ["from the wheel"]}')
    monkeypatch.setattr(res, "_PACKAGE_DIR", package)
    assert resource_path("schemas", "buffett_concepts.json") == shipped
    assert load_concepts() == frozenset({"from the wheel"})
