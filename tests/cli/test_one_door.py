"""One door: every command acts through the ``Workspace`` (``evalgate.commands.workspace``) and takes its store,
actor and directories from it (issue 43)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import source
from tests.helpers.cli import cli

COMMANDS = Path(__file__).resolve().parents[2] / "evalgate" / "commands"


def _calls(tree: ast.AST) -> set[str]:
    return {source.unparsed(node.func) for node in source.nodes(tree, ast.Call)}


def _defines_commands(tree: ast.AST) -> bool:
    return any(isinstance(d, ast.Call) and source.unparsed(d.func).endswith(("command", "group"))
               for node in source.nodes(tree, ast.FunctionDef) for d in node.decorator_list)


def test_every_command_module_goes_through_the_workspace() -> None:
    modules = {p.stem: source.tree(p) for p in sorted(COMMANDS.glob("*.py"))}
    with_commands = sorted(name for name, tree in modules.items() if _defines_commands(tree))
    assert len(with_commands) == 17, with_commands  # all but __init__ (the handler) and options (click options)
    assert [name for name in with_commands if "workspace" not in _calls(modules[name])] == []
    doors = ("Store", "active", "Workspace.current", "Workspace.from_env", "Workspace")
    around = {name: sorted(c for c in _calls(tree) if c in doors) for name, tree in modules.items()}
    assert {name: found for name, found in around.items() if found} == {"__init__": ["Workspace.from_env"]}


def test_a_bad_protocol_opens_no_store(home: Path) -> None:
    bad = home / "bad.yaml"
    bad.write_text("name: x\nversion: 1\nnot_a_field: 2\n", encoding="utf-8")
    for verb in ("verify", "freeze"):
        r = cli("protocol", verb, bad)
        assert r.exit_code == 2, (verb, r.output)
        assert "not_a_field" in r.stderr
    assert not (home / "home").exists()


def test_a_freeze_refused_by_the_lock_creates_no_store(home: Path) -> None:
    """Changed content under a version the lock holds is refused from the lock alone; the refusal must not create
    the workspace's store on the way (it did: the command opened ``home/evalgate.duckdb`` before the check)."""
    import yaml

    doc = {"name": "t", "version": "1", "prompt": {"template": "Q: {{ question }}\nA:", "chat_template": "none"},
           "sampling": {"temperature": 0.0, "max_tokens": 8, "n": 1, "seed": 3}, "pass_at_k": [1],
           "scorer": {"name": "exact"}}
    p = home / "p.yaml"
    p.write_text(yaml.safe_dump(doc), encoding="utf-8")
    first = cli("protocol", "freeze", p, env={"EVALGATE_HOME": str(home / "elsewhere")})  # the lock, another store
    assert first.exit_code == 0, first.output
    doc["sampling"]["max_tokens"] = 16  # changed content, version 1 kept
    p.write_text(yaml.safe_dump(doc), encoding="utf-8")
    r = cli("protocol", "freeze", p)
    assert r.exit_code == 2, r.output
    assert "Bump 'version'" in r.stderr
    assert not (home / "home").exists()


REPOSITORIES = {"Store", "AccessLogRepo", "RunRepo", "ProtocolRepo", "GateRepo", "RatingRepo", "FrameRepo",
                "GenerationCache", "PrivateContentRepo"}


def process_stores(tree: ast.AST) -> list[int]:
    """Lines where code makes the process's store itself: a store or repository built with no database and no
    environment (``Store()``, ``AccessLogRepo()``; ``Store(env=...)`` is handed an environment)."""
    return sorted(n.lineno for n in source.nodes(tree, ast.Call) if isinstance(n.func, ast.Name)
                  and n.func.id in REPOSITORIES and not n.args and not n.keywords)


def test_the_guard_counts_what_it_says() -> None:
    src = ("def f(store=None):\n    s = store or Store()\n    r = AccessLogRepo()\n    t = Store(env=e)\n"
           "    u = Store(db)\n    return RunRepo() if store is None else store\n")
    assert process_stores(ast.parse(src)) == [2, 3, 6]


def test_no_function_makes_the_process_store_as_a_default() -> None:
    """The store is handed down (``Workspace.store``): no ``store or Store()`` nor any other store made from the
    process's variables below the library's entry points; the entry points users call from docs (a run, a freeze,
    the dataframes of FRAMES.md, ``read_items``' refusal) take one through ``evalgate.store.handed_down``, which
    keeps the old default for one release with a DeprecationWarning (issue 43: 3 ``store or Store()`` and 7
    repository defaults -> 0)."""
    root = COMMANDS.parent
    found = {str(p.relative_to(root.parent)): lines for p, tree in source.trees("evalgate").items()
             if (lines := process_stores(tree))}
    handed = source.tree(root / "store" / "__init__.py")
    fn = next(n for n in source.nodes(handed, ast.FunctionDef) if n.name == "handed_down")
    assert len(process_stores(fn)) == 1  # the one place: the deprecated default
    assert found == {"evalgate/store/__init__.py": process_stores(fn)}
