"""One door: every command acts through the ``Workspace`` (``evalgate.commands.workspace``) and takes its store,
actor and directories from it (issue 43)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.cli import cli

COMMANDS = Path(__file__).resolve().parents[2] / "evalgate" / "commands"


def _calls(tree: ast.AST) -> set[str]:
    return {ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}


def _defines_commands(tree: ast.AST) -> bool:
    return any(isinstance(d, ast.Call) and ast.unparse(d.func).endswith(("command", "group"))
               for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) for d in node.decorator_list)


def test_every_command_module_goes_through_the_workspace() -> None:
    modules = {p.stem: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(COMMANDS.glob("*.py"))}
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


def test_internal_functions_take_the_store_from_their_caller() -> None:
    """``store or Store()`` only at the library's own entry points (a run, a freeze, the dataframes of FRAMES.md):
    a function below them is handed its workspace's store."""
    root = COMMANDS.parent
    found = sorted(f"{p.relative_to(root.parent)}:{fn.name}" for p in root.rglob("*.py")
                   for fn in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
                   if isinstance(fn, ast.FunctionDef) and "store or Store()" in ast.unparse(fn))
    assert found == ["evalgate/runner/evaluate.py:evaluate_checkpoint",
                     "evalgate/views/frames.py:query_frame", "evalgate/views/frames.py:samples_frame"]
