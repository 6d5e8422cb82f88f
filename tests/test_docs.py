"""The documentation: the generated command reference is current, every link stays inside the repository and
resolves, the README stays a front page, and the docs site builds with ``mkdocs build --strict``."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from markdown.extensions.toc import slugify

from tests.conftest import REPO as ROOT

DOCS = ROOT / "docs"
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _cli_docs():  # tools/ is not a package: load the generator from its file
    spec = importlib.util.spec_from_file_location("cli_docs", ROOT / "tools" / "cli_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lines(text: str, blank_code: bool = True) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks; inline code spans blanked out unless ``blank_code`` is off."""
    out, fence = [], None
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif fence is not None:
            fence = None if stripped.startswith(fence) else fence
        else:
            out.append((n, re.sub(r"`[^`]*`", "``", line) if blank_code else line))
    return out


def anchors(path: Path) -> set[str]:
    """The heading ids Python-Markdown's toc extension (so mkdocs) gives the headings of markdown file ``path``."""
    return {slugify(re.sub(r"[`*]", "", m.group(2)), "-")
            for _, line in _lines(path.read_text(), blank_code=False) if (m := _HEADING.match(line))}


def bad_links(path: Path, root: Path = ROOT, inside: Path | None = None) -> list[str]:
    """Every link in markdown file ``path`` that leaves ``inside`` (default: ``root``) or does not resolve.

    A link is ``[text](target)``, ``![alt](target)`` or a ``[ref]: target`` definition outside code. A target with a
    scheme (``https:``, ``mailto:``) leaves the repository; a relative one must name an existing file or directory
    under ``inside``, and its ``#anchor`` (or a bare ``#anchor``) a heading of the markdown file it names.

    Returns:
        One ``file:line: target: why`` string per bad link, empty when all are good.
    """
    inside = (inside or root).resolve()
    problems = []
    for n, line in _lines(path.read_text()):
        targets = [m.group(1) for m in _LINK.finditer(line)]
        ref = _REF.match(line)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            where = f"{path.relative_to(root)}:{n}: {target}"
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
                problems.append(f"{where}: leaves the repository (an absolute URL)")
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path.resolve()
            if not dest.is_relative_to(inside):
                problems.append(f"{where}: outside {inside.relative_to(root.resolve()) or '.'}/")
            elif not dest.exists():
                problems.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{where}: no heading #{anchor} in {dest.relative_to(root.resolve())}")
    return problems


def test_link_checker_finds_each_kind_of_bad_link(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "A.md").write_text("# A page\n\n## Some `code` here\n")
    page = tmp_path / "docs" / "B.md"
    page.write_text("[ok](A.md) [ok anchor](A.md#some-code-here) [self](#b)\n# B\n"
                    "[gone](MISSING.md) [up](../../etc/passwd) [web](https://example.org) [anchor](A.md#nope)\n"
                    "`[in code](MISSING.md)`\n```\n[fenced](MISSING.md)\n```\n[ref]: ../outside.md\n"
                    "[repo file](../README.md)\n")
    (tmp_path / "README.md").write_text("x")
    found = bad_links(page, tmp_path, inside=tmp_path / "docs")
    assert [p.split(": ", 2)[1] for p in found] == ["MISSING.md", "../../etc/passwd", "https://example.org",
                                                    "A.md#nope", "../outside.md", "../README.md"]
    assert "leaves the repository" in found[2] and "outside docs/" in found[1]
    # the same page checked against the whole checkout: README.md beside docs/ is inside
    assert len(bad_links(page, tmp_path)) == 5


def test_every_link_in_readme_and_docs_stays_inside_and_resolves() -> None:
    # README may point anywhere in the repository; a docs page only inside docs/, which is what the site holds
    problems = bad_links(ROOT / "README.md")
    for page in sorted(DOCS.glob("*.md")):
        problems += bad_links(page, inside=DOCS)
    assert not problems, "broken or escaping links:\n" + "\n".join(problems)


def test_no_page_points_outside_the_checkout() -> None:
    # ../shared/ is the project's shared folder, not part of this repository: only its data directory is named (as a
    # place data files are read from, never as a link), the design notes are in docs/
    hits = [f"{p.relative_to(ROOT)}:{n}" for p in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
            for n, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"\.\./shared/(?!data\b)", line)]
    assert not hits, f"pages naming ../shared/ outside its data directory: {hits}"


def test_cli_reference_is_generated_from_the_commands() -> None:
    cli_docs = _cli_docs()
    expected = cli_docs.render()
    assert (DOCS / "CLI.md").read_text() == expected, (
        f"docs/CLI.md is stale: regenerate it with `{cli_docs.REGENERATE}` and commit it")


def test_cli_reference_covers_every_command_of_the_entry_point() -> None:
    # walked from the `evalgate` script pyproject.toml declares: each command path once, with its options
    cli_docs = _cli_docs()
    group = cli_docs.entry_point_group()
    from evalgate.cli import main

    assert group is main
    page = (DOCS / "CLI.md").read_text()
    ctx = click.Context(main, info_name="evalgate")
    for name in main.list_commands(ctx):
        assert f"## `evalgate {name}`" in page, name
    # a command the walk must find, two levels down, and an option of it
    assert "#### `evalgate audit batch create`" in page and "--stratify" in page
    # a hand-built group: hidden commands are left out, nested ones kept, at the fixed width
    demo = click.Group("g", commands=[click.Command("shown", help="Shown."),
                                      click.Command("secret", help="Hidden.", hidden=True),
                                      click.Group("sub", commands=[click.Command("leaf", help="A leaf.")])])
    text = cli_docs.render(demo)
    assert "`evalgate shown`" in text and "`evalgate sub leaf`" in text and "secret" not in text


def test_every_environment_variable_the_code_reads_is_in_config_md() -> None:
    read = {m for path in (ROOT / "evalgate").rglob("*.py")
            for m in re.findall(r"\bEVALGATE_[A-Z_]*[A-Z]\b", path.read_text())}
    listed = set(re.findall(r"^\| `(EVALGATE_[A-Z_]+)` \|", (DOCS / "CONFIG.md").read_text(), re.M))
    assert "EVALGATE_HOME" in read and "EVALGATE_HOME" in listed
    assert not read - listed, f"add to docs/CONFIG.md's environment table: {sorted(read - listed)}"


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    """Issue 44, item 13: docs/API.md, FRAMES.md and TRACKERS.md were linked from no page a reader reaches from the
    README. Every page under docs/ (but index.md, the site's home, which mkdocs builds from the README's text) must be
    reachable by following markdown links from README.md."""
    seen, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen or not page.is_file() or page.suffix != ".md":
            continue
        seen.add(page)
        for _, line in _lines(page.read_text()):
            for m in _LINK.finditer(line):
                target = m.group(1).split("#", 1)[0]
                if target and ":" not in target:
                    todo.append((page.parent / target).resolve())
    pages = {p.resolve() for p in DOCS.glob("*.md")} - {(DOCS / "index.md").resolve()}
    assert not sorted(p.name for p in pages - seen), "pages no link from README.md reaches"


def test_readme_stays_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200, (f"README.md has {len(lines)} lines: keep it to what evalgate is, install, the quick "
                               "start, the daily loop and where to read on; move reference material into docs/")


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_docs_site_builds_strict(tmp_path: Path) -> None:
    # mkdocs-material (the dev extra): a broken link, a missing anchor or a page left out of the nav fails --strict;
    # not -q: mkdocs counts the warnings --strict aborts on only at the level it logs (with -q a page left out passed)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "CLI" / "index.html").exists()
    assert "evalgate gate" in (tmp_path / "site" / "CLI" / "index.html").read_text()


def _registries() -> list[tuple[Any, str, Callable[[Any], list[str | None]]]]:
    """(registry, its docs page, the docstrings an entry must have) for every registry of an extension point."""
    from evalgate.backends.base import BACKENDS
    from evalgate.datasets import DATASETS
    from evalgate.diagnostics.log import LOG_READERS
    from evalgate.gate.report.writers import WRITERS
    from evalgate.scoring.base import SCORERS
    from evalgate.scoring.extract import RULES
    from evalgate.scoring.metrics import METRICS
    from evalgate.tools import TOOLS

    return [
        (BACKENDS, "BACKENDS.md", lambda e: [e.options.__doc__]),
        (SCORERS, "SCORERS.md", lambda e: [e.options.__doc__, e.load().__doc__]),
        (DATASETS, "AUDIT.md", lambda e: [e.description, e.read.__doc__]),
        (RULES, "SCORING.md", lambda e: [e.help]),
        (LOG_READERS, "DIAGNOSTICS.md", lambda e: [e.describe, e.read.__doc__]),
        (WRITERS, "GATING.md", lambda e: [e.help, e.writer().__doc__]),
        (METRICS, "SCORING.md", lambda e: [e.help]),
        (TOOLS, "AGENTIC.md", lambda e: [e.description]),
    ]


@pytest.mark.parametrize("index", range(8), ids=["backends", "scorers", "datasets", "extraction rules",
                                                 "log readers", "report writers", "metrics", "tools"])
def test_every_registry_entry_is_named_in_its_docs_page_and_has_docstrings(index: int) -> None:
    """Each built-in entry of each extension point's registry heads a table row or a section of its page (as the
    scorer reference names every scorer) and carries its own documentation (options model, class, reader or
    writer docstring, help text), so a new entry without docs fails here."""
    registry, page, docs = _registries()[index]
    text = (DOCS / page).read_text(encoding="utf-8")
    names = registry.builtin_names()
    assert names, f"the {registry.kind} registry has no built-in entry"
    for name in names:
        listed = re.search(rf"^(?:\| |#+ )`{re.escape(name)}`", text, re.M)
        assert listed, f"{registry.kind} {name!r} is not in a table row or heading of docs/{page}; add it there"
        for doc in docs(registry[name]):
            assert doc and doc.strip(), f"{registry.kind} {name!r} has an entry without its docstring or help"


# `pip install evalgate` / `'evalgate[extra]'` / `evalgate-gate[...]` by name: PyPI's 'evalgate' is an unrelated
# project and this one is not on the index, so every page and message installs an extra from the checkout, by path
_BY_NAME = re.compile(r"pip install (?:-\S+ )*['\"]?evalgate(?:-gate)?(?:\[|['\"`\s]|$)")


def test_no_page_or_message_installs_evalgate_by_name() -> None:
    """A new user followed docs/STORE.md's `pip install 'evalgate[postgres]'` (which would fetch PyPI's unrelated
    evalgate); the psycopg, IFEval and pyarrow messages said the same. The README's warning line is the one use."""
    files = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted((ROOT / "evalgate").rglob("*.py"))]
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in files
            for n, line in enumerate(p.read_text().splitlines(), 1)
            if _BY_NAME.search(line) and "never" not in line]
    assert not hits, "install evalgate's extras from the checkout (core.version.install_hint):\n" + "\n".join(hits)


def test_the_install_pattern_catches_each_spelling() -> None:
    for bad in ("pip install evalgate", "pip install 'evalgate[postgres]'", 'pip install -U "evalgate[ifeval]"',
                "pip install 'evalgate-gate[data]'"):
        assert _BY_NAME.search(bad), bad
    for good in ("pip install '/path/to/evalgate[postgres]'", "pip install -e '.[hf]'",
                 "pip install '<evalgate checkout>[data]'", "pip install evalgate_plugin_x"):
        assert not _BY_NAME.search(good), good
