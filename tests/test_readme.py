"""README's set-up: exactly two commands, the test one is what CI runs, the main one names a
shipped letter and the embedded extra.  README stays a short front door whose links, and those
of docs/, lead to files that exist; docs/architecture.md's layout names every module."""

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
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = architecture.split("## Layout of the repository", 1)[1].split("\n## ", 1)[0]
    words = set(re.findall(r"[\w.]+/?", section))
    pkg = ROOT / "src" / "letterchunk"
    packages = {f"{p.parent.name}/" for p in pkg.glob("*/__init__.py")}
    modules = {  # cli/ is described as one module per command
        p.name
        for p in pkg.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py") and p.parent.name != "cli"
    }
    assert packages - words == set(), "packages missing from docs/architecture.md's layout"
    assert modules - words == set(), "modules missing from docs/architecture.md's layout"
    tree = section.split("```", 2)[1]  # the drawn tree
    named = set(re.findall(r"[\w]+\.py", tree))
    stale = named - modules - {"__init__.py", "progress.py"}
    assert stale == set(), "docs/architecture.md's layout names modules that do not exist"


README_MAX_LINES = 150
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_readme_is_a_short_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README has {len(lines)} lines; move detail to docs/"


def test_readme_links_every_document_in_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {target.split("#", 1)[0] for target in LINK.findall(readme)}
    unlinked = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")} - linked
    assert unlinked == set(), "documents the README's link table does not name"


def test_every_relative_link_leads_to_an_existing_file_and_heading():
    broken, checked = [], 0
    for doc in _documents():
        text = FENCE.sub("", doc.read_text(encoding="utf-8"))
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto: are not checked here
                continue
            checked += 1
            file_part, _, anchor = target.partition("#")
            path = (doc.parent / file_part).resolve() if file_part else doc
            if not path.is_file():
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert checked >= 20, f"only {checked} relative links found: the link pattern is broken"
    assert broken == [], broken
