"""The documentation holds together: the README stays an entrance (short, with a command table that names
every command the code registers), and every relative link in the README and docs/ leads to a file
that exists (and, for `#anchor` links, to a heading in it), never outside the project."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MAX_README_LINES = 200

_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[^\n]*$", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
# [text](target) and ![alt](target), with an optional "title"; text may hold one level of brackets.
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
_EXTERNAL = ("http://", "https://", "mailto:")


def markdown_files() -> list[Path]:
    return [README, *sorted((REPO / "docs").rglob("*.md"))]


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans, where brackets are not links."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: links and markup reduced to their text, lowercase, punctuation
    (all but hyphens and underscores) removed, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in a markdown file, with GitHub's -1, -2 ... for repeated ones."""
    seen: dict[str, int] = {}
    found = set()
    for match in _HEADING.finditer(_FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    return _LINK.findall(_prose(path.read_text(encoding="utf-8")))


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    """Each relative link of `path` that does not resolve, with the reason; external links are skipped."""
    problems = []
    name = path.relative_to(root) if path.is_relative_to(root) else path
    for target in links(path):
        if target.lower().startswith(_EXTERNAL):
            continue
        where, _, anchor = target.partition("#")
        if "../shared" in where:
            problems.append(f"{name}: link {target!r} points at ../shared, a folder outside the project")
            continue
        resolved = (path.parent / where).resolve() if where else path.resolve()
        if not resolved.is_relative_to(root.resolve()):
            problems.append(f"{name}: link {target!r} leaves the project ({resolved})")
        elif not resolved.exists():
            problems.append(f"{name}: link {target!r}: no file {resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{name}: link {target!r}: no heading #{anchor} in {resolved.relative_to(root.resolve())}")
    return problems


def test_the_readme_is_an_entrance_of_at_most_200_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, (
        f"README.md has {len(lines)} lines, more than {MAX_README_LINES}: move the detail into docs/ and link to it"
    )


def test_every_relative_link_resolves():
    problems = [problem for path in markdown_files() for problem in broken_links(path)]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_no_document_points_at_the_shared_folder():
    offenders = [
        f"{path.relative_to(REPO)}: {line.strip()}"
        for path in markdown_files()
        for line in path.read_text(encoding="utf-8").splitlines()
        if "../shared" in line
    ]
    assert not offenders, "documents pointing at ../shared (outside the project):\n" + "\n".join(offenders)


def test_the_link_checker_reports_a_broken_link(tmp_path):
    (tmp_path / "there.md").write_text("# A heading\n\ntext\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[fine](there.md) [anchor](there.md#a-heading) [web](https://example.org/x)\n"
        "[missing](nowhere.md) [bad anchor](there.md#no-such-heading) [outside](../shared/x.md)\n"
        "`[in code](nowhere-either.md)`\n\n```\n[in a block](nor-here.md)\n```\n",
        encoding="utf-8",
    )
    problems = broken_links(page, root=tmp_path)
    assert len(problems) == 3, problems
    assert any("nowhere.md" in p and "no file" in p for p in problems), problems
    assert any("#no-such-heading" in p for p in problems), problems
    assert any("../shared" in p for p in problems), problems


def test_slugs_follow_githubs_rules():
    assert slug("`bench turn`") == "bench-turn"
    assert slug("`latency.json` and the turn fields") == "latencyjson-and-the-turn-fields"
    assert slug("Four more levers, offline (2026-12-07; kept)") == "four-more-levers-offline-2026-12-07-kept"
    assert slug("`[bargein]`") == "bargein"


def _command_table() -> list[tuple[str, str]]:
    """(first cell, whole row) of each row of the table under the README's "## Commands"."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## Commands\s*$(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, "README.md has no '## Commands' section"
    rows = []
    for line in match.group(1).splitlines():
        cells = [c.strip() for c in line.replace("\\|", "/").strip().strip("|").split("|")]
        if (
            line.lstrip().startswith("|")
            and len(cells) >= 2
            and not set(cells[0]) <= set("-: ")
            and cells[0] != "command"
        ):
            rows.append((cells[0], line))
    assert rows, "README.md's Commands section has no table"
    return rows


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_the_readme_command_table_names_every_command():
    from device.cli import build_parser

    rows = _command_table()

    def rows_of(command: str) -> list[str]:
        """The rows whose command cell starts with `command` (after an optional orin-avatar)."""
        pattern = re.compile(rf"^`(?:orin-avatar )?{re.escape(command)}(?=[\s`])")
        return [row for cell, row in rows if pattern.match(cell)]

    missing = []
    for name, sub in _subcommands(build_parser()).items():
        own = rows_of(name)
        if not own:
            missing.append(f"`{name}`")
            continue
        for kind in _subcommands(sub):
            if not rows_of(f"{name} {kind}") and not any(re.search(rf"\b{re.escape(kind)}\b", row) for row in own):
                missing.append(f"`{name} {kind}`")
    assert not missing, (
        "README.md's command table (## Commands) does not name: "
        + ", ".join(missing)
        + "; add a row (or the kind to its command's row) for each"
    )
