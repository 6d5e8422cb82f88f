"""One environment, handed down: no process-wide active environment is left, the ``EVALGATE_*`` variables are read
in ``evalgate.core.environment`` only, and the library passes its workspace's environment (the store's ``env``, or
``env=``) to every function that would otherwise fall back to the process's (issue 43)."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from tests.helpers import source

ROOT = Path(__file__).resolve().parents[1] / "evalgate"

DEFAULTING = {"write_split", "load_key", "key_file", "sealer", "splits_dir", "actor_name", "read_unlogged",
              "resolve_checkpoint", "convert_gguf", "models_dir", "verify_identity", "DigestCache"}
"""Functions that take the process's environment (``or_from_env``) when called without ``env=``: a script's or a
test's convenience. Inside evalgate every call passes one."""

FROM_ENV = {
    "core/environment.py": "where the variables are read",
    "workspace.py": "Workspace.from_env, what every command acts in",
    "store/db.py": "Store() with no environment is the variables' store",
    "store/migrations.py": "migration 9 on a Database opened without an environment",
    "backends/base.py": "EVALGATE_OPENAI_BASE_URL, a process setting (no Workspace argument sets it)",
    "backends/openai.py": "the same",
    "scoring/ifeval.py": "EVALGATE_CACHE (punkt data), a process setting",
    "demo/train.py": "EVALGATE_CACHE (the demo's trained checkpoints), a process setting",
    "training/callback.py": "EvalgateCallback(evaluate=True) given no store: a training script's entry point",
}
"""The modules that call ``Environment.from_env()`` and why; nowhere else may."""


def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): tree for p, tree in source.trees("evalgate").items()}


def _calls(tree: ast.Module) -> list[tuple[ast.Call, str]]:
    """Each call in ``tree`` with its callee as written (``ast.unparse`` of ``func``)."""
    return [(node, source.unparsed(node.func)) for node in source.nodes(tree, ast.Call)]


def test_no_module_has_or_reads_an_active_environment() -> None:
    found = []
    for name, tree in _modules().items():
        for imp in source.nodes(tree, ast.ImportFrom):
            if imp.module == "evalgate.core.environment":
                found += [f"{name}: imports {a.name}" for a in imp.names if a.name in ("active", "activate")]
        found += [f"{name}:{n.lineno}: _ACTIVE" for n in source.nodes(tree, ast.Name) if n.id == "_ACTIVE"]
        found += [f"{name}:{call.lineno}: {ast.unparse(call)}" for call, fn in _calls(tree)
                  if fn in ("active", "environment.active")]
    assert found == []
    import evalgate.core.environment as environment

    assert not hasattr(environment, "active") and not hasattr(environment, "activate")


def test_the_process_environment_is_read_only_where_listed() -> None:
    calls = sorted({name for name, tree in _modules().items() for _, fn in _calls(tree)
                    if fn.endswith("Environment.from_env")})
    assert calls == sorted(FROM_ENV)


def test_library_calls_hand_their_environment_down() -> None:
    """Every call inside evalgate of a function that would fall back to the process's environment passes
    ``env=``, but for the defaults of public functions themselves: ``checkpoint_identity`` and ``dir_digest`` given
    no cache and the discovery functions given no directory (a script's conveniences); ``read_items`` reads with its
    store's environment."""
    missing = []
    for name, tree in _modules().items():
        for node, callee in _calls(tree):
            fn = callee.rsplit(".", 1)[-1]
            if fn in DEFAULTING and not any(k.arg == "env" for k in node.keywords):
                missing.append(f"{name}: {ast.unparse(node)}")
    assert missing == ["checkpoints/identity.py: DigestCache()", "checkpoints/identity.py: DigestCache()",
                       "splits/discovery.py: splits_dir()", "splits/discovery.py: splits_dir()"]


@pytest.mark.usefixtures("home")
def test_two_workspaces_in_two_threads_keep_their_own_settings(tmp_path: Path) -> None:
    """Each workspace's splits directory, key and actor reach the layers below it from its own store, whatever
    another thread's workspace does meanwhile (with a process-wide active environment, one would see the
    other's)."""
    import evalgate
    from evalgate.splits import SplitManager, write_split

    items = [{"id": f"q{i}", "question": f"{i}?", "answer": str(i)} for i in range(3)]
    spaces = {who: evalgate.Workspace(tmp_path / who, actor=who) for who in ("ann", "bob")}
    seen: dict[str, tuple] = {}
    barrier = threading.Barrier(2)

    def work(who: str) -> None:
        ws = spaces[who]
        write_split("s", "dev", items[: 2 if who == "ann" else 3], {"source": who}, env=ws.env)
        barrier.wait()
        opened = SplitManager(ws.store).open("s", "evaluation", ws.actor)
        seen[who] = (len(opened.items), ws.store.access_rows("s")[-1].actor, ws.store.env.splits)

    threads = [threading.Thread(target=work, args=(who,)) for who in spaces]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"ann": (2, "ann", tmp_path / "ann" / "splits"), "bob": (3, "bob", tmp_path / "bob" / "splits")}
    assert not (tmp_path / "splits").exists()  # the process's splits directory ($EVALGATE_SPLITS) is untouched
