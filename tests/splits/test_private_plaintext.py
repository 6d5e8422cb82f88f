"""The private split is unreadable without the key and never present in plain text in the repository."""

import json
import subprocess
from pathlib import Path

import pytest

from evalgate.datasets.humaneval import import_humaneval
from evalgate.splits import load_manifest, partition, splits_dir
from evalgate.store import Store
from tests.conftest import REPO


def private_texts(records: list[dict]) -> list[str]:
    """Distinctive lines (>= 40 characters) of the private HumanEval items' prompts and solutions that no other
    item shares."""
    private = set(partition([r["task_id"] for r in records])["private"])

    def lines(r: dict) -> set[str]:
        return {ln.strip() for ln in (r["prompt"] + r["canonical_solution"]).splitlines() if len(ln.strip()) >= 40}

    shared = set().union(*(lines(r) for r in records if r["task_id"] not in private))
    return sorted(set().union(*(lines(r) for r in records if r["task_id"] in private)) - shared)


def test_private_items_are_not_in_any_tracked_file(humaneval_records: list[dict]) -> None:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout ({e}): the tracked files cannot be listed")
    texts = private_texts(humaneval_records)
    assert len(texts) > 52  # at least one distinctive line per private item on average
    leaks = []
    for name in filter(None, listed.decode().split("\0")):
        path = REPO / name
        if not path.is_file():
            continue
        content = path.read_bytes().decode("utf-8", errors="ignore")
        leaks += [f"{name}: {t[:60]}" for t in texts if t in content]
    assert leaks == []


def test_private_split_at_rest_has_no_plaintext_and_needs_the_key(home: Path, humaneval_records: list[dict],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.core.errors import RefusedByPolicy
    from evalgate.splits.data import read_unlogged as read_items  # the unlogged reader (the public one refuses private)

    import_humaneval(store=Store())
    m = load_manifest("humaneval-private")
    stored = b"".join(p.read_bytes() for p in splits_dir().iterdir())
    assert not [t for t in private_texts(humaneval_records) if t.encode() in stored]
    assert len(read_items(m)) == 52
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "no-key-here"))
    with pytest.raises(RefusedByPolicy, match="no key was found"):
        read_items(m)


def test_an_agentic_gate_shows_no_private_trajectory_anywhere(tmp_path: Path) -> None:
    """An agentic protocol whose private-split turns quote a secret in the model's text, a tool's arguments and
    the tool's result: no report output, the stored verdict, nor the trajectories table holds it in plain text;
    the dev split's trajectory (a marker in the same three places) is shown, so the scan does see trajectories."""
    import duckdb

    from evalgate.gate.report.outputs import write_reports
    from tests.agent_gate_fixtures import build, call

    secret, dev_marker = "zebra_quartz_7301", "lynx_marker_4421"
    # the calculator's error quotes the unknown name it was given: the secret comes back as a tool result too
    v, store = build(tmp_path / "gate", [{"id": "d1", "prompt": "x", "answer": "1"}],
                     {"d1": [f"{dev_marker} " + call("calculator", expression=dev_marker), "The answer is 1"]},
                     [{"id": "p1", "prompt": f"{secret}?", "answer": "1"}],
                     {"p1": [f"{secret} " + call("calculator", expression=secret), f"{secret} The answer is 1"]})
    priv = next(r for r in store.runs() if r.split == "ag-private" and r.checkpoint_digest.startswith("c"))
    turns = store.trajectory_turns(priv.checkpoint_digest, priv.protocol_hash,
                                   priv.backend_info["generation_settings_sha256"])
    assert secret in turns[0].text and secret in turns[0].calls[0]["result"]  # in clear with the key
    out = tmp_path / "out"
    write_reports(v, {"html": out / "r.html", "junit": out / "r.junit.xml", "json": out / "r.json",
                      "markdown": out / "r.md"}, store)
    texts = {p.name: p.read_text() for p in out.iterdir()}
    texts["stored verdict"] = json.dumps(store.gates()[-1].document)
    with duckdb.connect(str(store.path)) as con:
        texts["trajectories table"] = "\n".join(f"{t}\n{c}" for t, c in con.execute(
            "SELECT text, calls::VARCHAR FROM trajectories WHERE run_id=?", [priv.run_id]).fetchall())
    assert len(texts) == 6 and texts["trajectories table"]
    assert [name for name, text in texts.items() if secret in text] == []
    html = texts["r.html"]
    assert html.count(dev_marker) >= 3 and '<details class="trajectory">' in html


def _scan(home: Path, *files: Path) -> subprocess.CompletedProcess[str]:
    import os
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, str(REPO / "tools" / "scan_private_plaintext.py"), *map(str, files)],
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_plaintext_scan_is_clean_on_a_clean_store_and_finds_a_planted_text(home: Path) -> None:
    """Item ids are stored by design: a private item ``HumanEval/15`` (its ``task_id`` repeating the id) is not found
    inside the stored id ``HumanEval/157``, nor as itself; its prompt planted in a report file is found."""
    from evalgate.splits import write_split
    from evalgate.store import Store
    from tests.test_human_audit import add_run

    prompt = "def string_sequence(n: int) -> str:\n    ''' Return space-delimited numbers 0..n '''\n"
    items = [{"id": f"HumanEval/{n}", "task_id": f"HumanEval/{n}", "prompt": f"{prompt}# item {n}\n"}
             for n in (15, 157)]
    write_split("he-private", "private", items, {"source": "test"})
    add_run(Store(), "run1", "he-private", {"HumanEval/157": 1.0, "HumanEval/15": 0.0})
    report = home / "report.md"
    report.write_text("| item | score |\n| HumanEval/157 | 1 |\n| HumanEval/15 | 0 |\n")
    clean = _scan(home, report)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "0 hit(s) of 2 private/human-audit text(s)" in clean.stdout
    report.write_text(report.read_text() + f"leaked: {prompt}# item 15\n")
    leaked = _scan(home, report)
    assert leaked.returncode == 1, leaked.stdout + leaked.stderr
    assert leaked.stdout.startswith(f"{report}: \"def string_sequence")
