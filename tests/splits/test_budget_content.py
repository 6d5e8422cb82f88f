"""Issue 27: the read budget and the audit belong to a split's content; a broken access-log chain stops the gate; a
read that shows a stored private result again is logged, not charged; the release grant lives only inside the
gate's decision, and private items and samples are not handed out by the library.

Each attack is written as a user would do it: a manifest copied under a new name, one SQL delete of the gate's read
rows, a grant minted from Python, ``read_items`` / ``Store.samples`` on the private split. The gate runs over the
fixture runs of tests/gate_fixtures.py (seeds 1 and 2, best steps 30 and 20; baseline a fixed value, so a gate that
reads needs 2 reads of the private split's hard budget of 4 per 30 days)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

import evalgate.gate.report.outputs as report_mod
from evalgate.cli import main
from evalgate.core.errors import RefusedByPolicy
from evalgate.gate import load_policy, run_gate
from evalgate.splits import SplitManager, load_manifest, splits_dir
from evalgate.store import Store
from tests import gate_fixtures as fx
from tests.helpers.postgres import admin_edit

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server

PASSING = {"min_seeds": 2, "reward_hacking": False}


@pytest.fixture
def built(tmp_path: Path) -> dict[str, Any]:
    return fx.build(tmp_path / "runs", seeds=(1, 2))


def _policy(tmp_path: Path, built: dict[str, Any], name: str = "gate.yaml", **over: Any) -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump({**fx.policy_dict(built["baseline"], **PASSING), "baseline": {"value": 0.4},
                                 **over}))
    return p


def _gate(path: Path, store: Store) -> Any:
    return run_gate(load_policy(path), store, evaluate_decision=False)


def _cli_gate(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> Any:
    """``evalgate gate`` over the stored fixture runs (no model here)."""
    monkeypatch.setattr(report_mod, "run_gate", lambda p, s, a, **kw: run_gate(p, s, a, evaluate_decision=False, **kw))
    return CliRunner().invoke(main, ["gate", *args])


def _counted(store: Store) -> int:
    """Reads of the private content that a budget counts, under any name."""
    return sum(1 for r in store.access_rows() if r.tier == "private" and r.outcome in ("read", "override"))


def _copy_manifest(src: str, dst: str) -> Path:
    """What a pull request can do: add splits/<dst>.yaml, a copy of <src>.yaml under a new name (same encrypted data
    file, same content_sha256)."""
    doc = yaml.safe_load((splits_dir() / f"{src}.yaml").read_text())
    doc["name"] = dst
    path = splits_dir() / f"{dst}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _attacker_runs(store: Store, tmp_path: Path, split: str) -> None:
    """The decision runs a gate on the copy would make (the fixture's runs are stored, not evaluated)."""
    for seed, step in ((1, 30), (2, 20)):
        fx.add_run(store, f"{split}-{seed}", f"d{seed}-{step}",
                   tmp_path / "runs" / f"fx-run-seed{seed}" / f"checkpoint-{step}", split, "private", seed, step,
                   fx.X[seed], purpose="release-gate")


def _audit(split: str) -> dict[str, Any]:
    r = CliRunner().invoke(main, ["audit", "--split", split, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["splits"][split]


# -- 1. the budget belongs to the content -------------------------------------------------------------------------
def test_a_manifest_copied_under_a_new_name_gets_no_fresh_budget(tmp_path: Path, built: dict[str, Any]) -> None:
    store = built["store"]
    m = load_manifest("fx-private")
    for _ in range(4):  # the original's 4 of 4 spent
        SplitManager(store).log_read(m, "t", "release-gate", cached=True)
    _copy_manifest("fx-private", "fx-private-copy")
    _attacker_runs(store, tmp_path, "fx-private-copy")
    with pytest.raises(RefusedByPolicy, match="needs 2 reads of private split fx-private-copy .* only 0 of 4"):
        _gate(_policy(tmp_path, built, decision_split="fx-private-copy"), store)
    assert _counted(store) == 4 and store.gates() == []
    # the refusal is logged under the original, whose audit says so; the copy's audit names the original
    assert store.access_rows()[-1].split == "fx-private" and "fx-private-copy" in store.access_rows()[-1].detail
    assert _audit("fx-private")["budget"] == {"max_reads": 4, "window_days": 30, "hard": True, "used": 4, "left": 0}
    copy = _audit("fx-private-copy")
    assert copy["same_content_as"] == "fx-private" and copy["budget"]["used"] == 4
    assert copy["content_names"] == ["fx-private", "fx-private-copy"]


def test_reads_through_a_copy_are_the_originals_and_deleting_the_copy_refunds_nothing(
        tmp_path: Path, built: dict[str, Any]) -> None:
    store = built["store"]
    _copy_manifest("fx-private", "fx-private-copy")
    _attacker_runs(store, tmp_path, "fx-private-copy")
    v = _gate(_policy(tmp_path, built, decision_split="fx-private-copy"), store)
    assert v.passed and _counted(store) == 2
    reads = [r for r in store.access_rows() if r.outcome == "read" and r.tier == "private"]
    assert {r.split for r in reads} == {"fx-private"} and all("fx-private-copy" in r.detail for r in reads)
    r = CliRunner().invoke(main, ["audit", "--split", "fx-private"])
    assert "2/4 per 30d (2 left)" in r.output and "also named:  fx-private-copy" in r.output
    (splits_dir() / "fx-private-copy.yaml").unlink()
    assert _audit("fx-private")["budget"]["used"] == 2


def test_a_copy_of_the_data_file_and_a_manifest_claiming_another_content(built: dict[str, Any]) -> None:
    """Neighbours: a manifest pointing to a byte copy of the data file is the same split; a manifest whose
    content_sha256 is not its data's content is refused at the read (the content is the split's identity)."""
    store = built["store"]
    d = splits_dir()
    (d / "copy.jsonl.enc").write_bytes((d / "fx-private.jsonl.enc").read_bytes())
    doc = yaml.safe_load((d / "fx-private.yaml").read_text())
    (d / "fx-copy.yaml").write_text(yaml.safe_dump({**doc, "name": "fx-copy", "data": "copy.jsonl.enc"}))
    m = load_manifest("fx-private")
    for _ in range(4):
        SplitManager(store).log_read(m, "t", "release-gate", cached=True)
    with pytest.raises(RefusedByPolicy, match="used its budget of 4 reads"):
        SplitManager(store).check("fx-copy", "release-gate", "t")
    (d / "fx-lie.yaml").write_text(yaml.safe_dump({**doc, "name": "fx-lie", "content_sha256": "0" * 64}))
    from evalgate.core.errors import BadInput

    lie = load_manifest("fx-lie")
    mgr = SplitManager(store)
    assert mgr.owner(lie).manifest.name == "fx-private"  # same stored bytes: the same split
    with pytest.raises(BadInput, match="is not the manifest's content_sha256"):
        from evalgate.splits.data import read_unlogged

        read_unlogged(lie)


def test_public_soft_budget_and_human_audit_rows_belong_to_the_content() -> None:
    """Neighbours: a copied public manifest shares the soft budget; a copied human-audit manifest's reads are the
    original's audit rows."""
    from evalgate.splits import write_split

    items = [{"id": f"p{i}", "question": f"{i}?"} for i in range(3)]
    write_split("pub", "public", items, {"source": "test"})
    write_split("ha", "human-audit", items[:2], {"source": "test"})
    _copy_manifest("pub", "pub-copy")
    _copy_manifest("ha", "ha-copy")
    store = Store()
    mgr = SplitManager(store)
    for _ in range(20):
        mgr.open("pub", "trend", "t")
    with pytest.raises(RefusedByPolicy, match="split pub .*used its budget of 20 reads"):
        SplitManager(store).open("pub-copy", "trend", "t")
    SplitManager(store).open("ha-copy", "look", "t")
    assert [r.split for r in store.access_rows() if r.outcome == "read"][-1] == "ha"
    assert _audit("ha")["reads"] == 1 and _audit("ha-copy")["same_content_as"] == "ha"


def test_a_replaced_splits_old_data_copied_under_a_new_name_is_still_that_split(tmp_path: Path) -> None:
    """Neighbour: ``splits add --replace`` gives the split new content; a copy of the old data file under a new
    manifest would be the old content, whose reads were logged under the original: it shares them."""
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps({"id": f"a{i}", "question": f"{i}"}) + "\n" for i in range(3)))
    assert CliRunner().invoke(main, ["splits", "add", "orig", "--tier", "private", "--file", str(src)]).exit_code == 0
    d = splits_dir()
    old_manifest, old_data = (d / "orig.yaml").read_text(), (d / "orig.jsonl.enc").read_bytes()
    store = Store()
    for _ in range(4):
        SplitManager(store).log_read(load_manifest("orig"), "t", "release-gate", cached=True)
    src.write_text("".join(json.dumps({"id": f"b{i}", "question": f"{i}"}) + "\n" for i in range(3)))
    r = CliRunner().invoke(main, ["splits", "add", "orig", "--tier", "private", "--file", str(src), "--replace"])
    assert r.exit_code == 0, r.output
    (d / "old.jsonl.enc").write_bytes(old_data)
    doc = yaml.safe_load(old_manifest)
    (d / "old.yaml").write_text(yaml.safe_dump({**doc, "name": "old", "data": "old.jsonl.enc"}))
    with pytest.raises(RefusedByPolicy, match="split orig .*used its budget of 4 reads"):
        SplitManager(store).check("old", "release-gate", "t")


# -- 2. a broken chain stops the gate -------------------------------------------------------------------------------
def _delete_gate_reads(store: Store) -> None:
    """One SQL delete of the gate's counted read rows, by whoever can write the store: anyone with write access to
    a DuckDB file; on a server, its administrator with the triggers off (``admin_edit``: the server refuses it to
    every other role, tests/store/test_pg_roles.py)."""
    with admin_edit(store) as con:
        con.execute("DELETE FROM access_log WHERE outcome = 'read' AND split = 'fx-private'")


def test_deleting_the_gates_read_rows_refunds_nothing_and_the_gate_refuses(
        home: Path, tmp_path: Path, built: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    store = built["store"]
    pol = _policy(tmp_path, built)
    first = _cli_gate(monkeypatch, ["--policy", str(pol)])
    assert first.exit_code == 0, first.output
    _delete_gate_reads(store)
    audit = CliRunner().invoke(main, ["audit", "--split", "fx-private"])
    assert "chain BROKEN" in audit.output and "unknown: chain broken at row" in audit.output
    assert "/4 per 30d (4 left)" not in audit.output and _audit("fx-private")["budget"]["used"] is None
    pol2 = _policy(tmp_path, built, "gate2.yaml", bootstrap_seed=1)  # a changed policy: it would read again
    before = len(store.access_rows())
    out = tmp_path / "out"
    files = ["--junit", str(out / "j.xml"), "--markdown", str(out / "s.md"), "--json-out", str(out / "g.json")]
    r = _cli_gate(monkeypatch, ["--policy", str(pol2), *files])
    assert r.exit_code == 2, r.output
    assert "hash chain is broken" in r.output and "--accept-broken-chain" in r.output
    assert r.output.splitlines()[-1] == "ship: none (refused: no verdict)"
    new = store.access_rows()[before:]
    assert [x.outcome for x in new] == ["refused"]  # nothing read, nothing spent
    assert json.loads((out / "g.json").read_text())["reason"] == "refused"


def test_a_gate_on_a_broken_chain_goes_on_only_when_accepted_and_every_report_says_so(
        home: Path, tmp_path: Path, built: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    store = built["store"]
    assert _cli_gate(monkeypatch, ["--policy", str(_policy(tmp_path, built))]).exit_code == 0
    _delete_gate_reads(store)
    out = tmp_path / "out"
    files = ["--junit", str(out / "j.xml"), "--markdown", str(out / "s.md"), "--json-out", str(out / "g.json"),
             "--report", str(out / "r.html")]
    r = _cli_gate(monkeypatch, ["--policy", str(_policy(tmp_path, built, "g2.yaml", bootstrap_seed=1)), "--json",
                                "--accept-broken-chain", "incident 42: restored from backup", *files])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["broken_chain"]["accepted_because"] == "incident 42: restored from backup"
    assert json.loads((out / "g.json").read_text())["broken_chain"]["first_bad_seq"] >= 1
    assert "BROKEN" in (out / "s.md").read_text() and "incident 42" in (out / "s.md").read_text()
    assert "BROKEN" in (out / "r.html").read_text() and "incident 42" in (out / "r.html").read_text()
    suite = ET.parse(out / "j.xml").getroot().find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert "BROKEN" in props["access_log_chain"] and "incident 42" in props["access_log_chain"]
    assert any(c.get("name") == "access_log_chain" for c in suite.iter("testcase"))
    (row,) = [x for x in store.access_rows() if x.outcome == "broken-chain-accepted"]
    assert "incident 42" in row.detail and row.split == "fx-private"
    text = _cli_gate(monkeypatch, ["--policy", str(_policy(tmp_path, built, "g3.yaml", bootstrap_seed=2,
                                                           accept_broken_chain="policy says so"))])
    assert text.exit_code == 0 and "WARNING: access log chain BROKEN" in text.output


# -- 3. re-reads that reveal nothing new are not charged ----------------------------------------------------------
def test_an_identical_gate_and_a_changed_threshold_spend_nothing_a_new_checkpoint_spends_one(
        tmp_path: Path, built: dict[str, Any]) -> None:
    store = built["store"]
    first = _gate(_policy(tmp_path, built), store)
    assert _counted(store) == 2 and first.rereads == []
    again = _gate(_policy(tmp_path, built), store)  # identical
    assert again.reused_from is not None and _counted(store) == 2
    # a changed rule threshold: decided afresh; both decision runs were shown before, so both are re-reads
    changed = _gate(_policy(tmp_path, built, "t.yaml", rules={**PASSING, "max_truncation_rate": 0.5}), store)
    assert changed.reused_from is None and sorted(changed.rereads) == ["dec-1", "dec-2"] and _counted(store) == 2
    rereads = [r for r in store.access_rows() if r.outcome == "re-read"]
    assert len(rereads) == 2 and all("not charged" in r.detail for r in rereads)
    # a new best checkpoint for seed 1 (step 50, dev 0.8 > 0.6) with a decision run never shown: 1 read charged
    ck = tmp_path / "runs" / "fx-run-seed1" / "checkpoint-50"
    ck.mkdir()
    (ck / "trainer_state.json").write_text((ck.parent / "checkpoint-40" / "trainer_state.json").read_text())
    fx.add_run(store, "dev-1-50", "d1-50", ck, "fx-dev", "dev", 1, 50, fx._scores(0.8))
    fx.add_run(store, "dec-1-50", "d1-50", ck, "fx-private", "private", 1, 50, fx.X[1], purpose="release-gate")
    newer = _gate(_policy(tmp_path, built, "t.yaml", rules={**PASSING, "max_truncation_rate": 0.5}), store)
    assert newer.seeds[0].best is not None and newer.seeds[0].best.step == 50
    assert newer.rereads == ["dec-2"] and _counted(store) == 3


def test_an_hourly_schedule_is_not_refused_after_the_first_gate(tmp_path: Path, built: dict[str, Any]) -> None:
    """docs/CI.md's schedule: a changed policy each time (here the bootstrap seed), nothing new to show; the
    budget of 4 was refused from the third such gate before issue 27 (2 reads a gate)."""
    store = built["store"]
    for hour in range(6):
        assert _gate(_policy(tmp_path, built, f"h{hour}.yaml", bootstrap_seed=hour), store).passed
    assert _counted(store) == 2


# -- 4. the release grant lives inside the gate's decision ----------------------------------------------------------
def test_no_public_function_mints_a_release_grant() -> None:
    import evalgate.runner.evaluate
    import evalgate.runner.grant as grant_mod

    with pytest.raises(ImportError):
        from evalgate.runner.evaluate import issue_release_grant  # noqa: F401
    assert not hasattr(grant_mod, "issue_release_grant")
    assert "issue_release_grant" not in evalgate.runner.evaluate.__all__
    assert not [n for n in dir(grant_mod) if not n.startswith("_") and "reserve" in n]


def test_a_grant_from_a_finished_gate_reads_nothing(tmp_path: Path, built: dict[str, Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The grant the gate's decision held is revoked when the decision ends: a caller that kept it (here by
    catching it on its way to the run) can read nothing with it afterwards."""
    from evalgate.gate import reads
    from evalgate.runner.grant import check_release_purpose

    kept: list[Any] = []
    real = reads.commit

    def keep(*a: Any, **k: Any) -> Any:
        grants = real(*a, **{**k})
        kept.extend(grants)
        return grants

    monkeypatch.setattr(reads, "commit", keep)
    store = built["store"]
    # evaluate_decision=True would need a model: reserve with evaluating on, then fail before any evaluation
    monkeypatch.setattr(reads, "evaluate_for_gate",
                        lambda *a, **k: (_ for _ in ()).throw(RuntimeError("no model here")))
    monkeypatch.setattr(reads, "decision_settings_sha256", lambda backend, request="generate": "s", raising=False)
    monkeypatch.setattr(reads, "check_protocol", lambda policy, evaluate: None)
    monkeypatch.setattr(reads, "baseline_digest", lambda *a, **k: None)
    with pytest.raises(RuntimeError, match="no model here"):
        run_gate(load_policy(_policy(tmp_path, built)), store, evaluate_decision=True)
    (grant,) = kept
    assert grant is not None and grant.reads == 2
    with pytest.raises(RefusedByPolicy, match="not issued by a gate's decision, or that decision has ended"):
        check_release_purpose("release-gate", grant, "fx-private", SplitManager(store), "mallory")
    assert store.access_rows()[-1].outcome == "refused"


def test_library_reads_of_private_items_and_samples_are_refused_and_logged(built: dict[str, Any]) -> None:
    from evalgate.splits import read_items
    from evalgate.views.samples import run_samples

    store = built["store"]
    m = load_manifest("fx-private")
    before = len(store.access_rows())
    with pytest.raises(RefusedByPolicy, match="tier private: its items are read only through SplitManager"):
        read_items(m, store=store)
    assert [(r.split, r.outcome) for r in store.access_rows()[before:]] == [("fx-private", "refused")]
    with pytest.raises(RefusedByPolicy, match="only after SplitManager.check admits it"):
        SplitManager(store).read(m)
    with pytest.raises(RefusedByPolicy, match="per-item outputs are never shown"):
        store.samples("dec-1")
    with pytest.raises(TypeError):
        run_samples("dec-1", store=store, grant=object())  # type: ignore[call-arg]
    with pytest.raises(RefusedByPolicy, match="never shown"):
        run_samples("dec-1", store=store)
    assert fx.PRIVATE_MARKER not in json.dumps([r.as_dict() for r in store.access_rows()], default=str)
    assert len(read_items(load_manifest("fx-dev"))) == len(fx.ITEMS)  # free tiers read as before
