"""The public surface is explicit: ``letterchunk.__all__`` is pinned and the package is typed.

Changing what ``letterchunk`` exports is a deliberate API change: update EXPECTED here in the
same commit (httpx ``test_exported_members.py`` style).
"""

from __future__ import annotations

from importlib import resources

import letterchunk

EXPECTED = [
    "BackendError",
    "BudgetExceeded",
    "CacheMiss",
    "Chunk",
    "CleanedLetter",
    "ConfigError",
    "FolderLocked",
    "Hooks",
    "InputError",
    "LLMClient",
    "LLMSettings",
    "LetterOutcome",
    "LetterchunkError",
    "Metadata",
    "RepairExhausted",
    "RunOptions",
    "TableData",
    "ValidationReport",
    "Violation",
    "__version__",
    "count_tokens",
    "dump_chunk",
    "find_letters",
    "load_letter",
    "open_client",
    "run",
    "run_paths",
    "segment_letter",
    "validate_paths",
]


def test_all_is_pinned():
    assert sorted(letterchunk.__all__) == sorted(EXPECTED)
    assert len(letterchunk.__all__) == len(set(letterchunk.__all__)), "duplicate name in __all__"


def test_every_exported_name_exists():
    for name in letterchunk.__all__:
        assert hasattr(letterchunk, name), name


def test_public_names_are_exported():
    public = {
        name
        for name, value in vars(letterchunk).items()
        if not name.startswith("_")
        and not getattr(value, "__file__", None)  # skip submodules
        and getattr(value, "__module__", "letterchunk").startswith("letterchunk")
    }
    assert public <= set(letterchunk.__all__), (
        f"public but not in __all__: {public - set(letterchunk.__all__)}"
    )


def test_exported_classes_claim_the_package():
    """Exported objects are defined inside letterchunk (no re-exported third-party names)."""
    for name in letterchunk.__all__:
        value = getattr(letterchunk, name)
        module = getattr(value, "__module__", None)
        if module is not None:
            assert module.startswith("letterchunk"), (name, module)


def test_py_typed_ships():
    assert resources.files("letterchunk").joinpath("py.typed").is_file()


def test_wheel_config_ships_package_data_and_resources():
    """The wheel includes the package folder (py.typed, tokenizer) and force-includes resources."""
    import tomllib
    from pathlib import Path

    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    wheel = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["packages"] == ["src/letterchunk"]
    assert wheel["force-include"] == {
        "prompts": "letterchunk/_resources/prompts",
        "schemas": "letterchunk/_resources/schemas",
    }


def test_environment_is_isolated():
    """conftest's autouse fixture: no keys or cache dirs from the developer's shell."""
    import os
    from pathlib import Path

    assert not any(k.startswith("OPENAI_") for k in os.environ)
    assert not any(
        k.startswith("LETTERCHUNK_") and k not in ("LETTERCHUNK_LIVE", "LETTERCHUNK_CHROMIUM")
        for k in os.environ
    )
    assert Path(os.environ["HOME"]).name == "_home"
    assert Path(os.environ["XDG_CACHE_HOME"]).is_relative_to(Path(os.environ["HOME"]))
