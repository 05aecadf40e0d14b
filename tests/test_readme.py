"""README's set-up: exactly two commands, the test one is what CI runs, the main one names a
shipped letter and the embedded extra."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set-up (two commands)", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_setup_has_exactly_two_commands():
    commands = _setup_commands()
    assert len(commands) == 2, commands
    assert all("\n" not in c for c in commands), "each set-up command is one line to copy"


def test_ci_runs_the_readme_test_command_verbatim():
    _, tests = _setup_commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines()
    assert tests.startswith("python3 -m venv .venv && ")  # works where pip refuses a system Python


def test_main_command_installs_the_local_extra_and_runs_a_shipped_letter():
    main, _ = _setup_commands()
    assert main.startswith("python3 -m venv .venv && ")
    assert "'.[local]'" in main and "-DGGML_NATIVE=OFF" in main
    letter = re.search(r"letterchunk run (\S+) --out", main)
    assert letter is not None and (ROOT / letter.group(1)).is_file()


def test_the_layout_section_names_every_package_and_module():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Layout of the repository", 1)[1].split("\n## ", 1)[0]
    words = set(re.findall(r"[\w.]+/?", section))
    pkg = ROOT / "src" / "letterchunk"
    packages = {f"{p.parent.name}/" for p in pkg.glob("*/__init__.py")}
    modules = {  # cli/ is described as one module per command
        p.name
        for p in pkg.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py") and p.parent.name != "cli"
    }
    assert packages - words == set(), "packages missing from README's layout section"
    assert modules - words == set(), "modules missing from README's layout section"
    tree = section.split("```", 2)[1]  # the drawn tree
    named = set(re.findall(r"[\w]+\.py", tree))
    stale = named - modules - {"__init__.py", "progress.py"}
    assert stale == set(), "README's layout names modules that do not exist"
