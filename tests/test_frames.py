"""Dataframes (issue 32): runs, samples, gates and the access log as Arrow / pandas / polars, from DuckDB; samples
logged like ``evalgate samples`` and refused for the private tier. Over tests/gate_fixtures.py (dev pass@1 of
seed 1 at steps 10..40: 0.3, 0.5, 0.6, 0.5 on 10 items, one sample each)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.views.frames import access_log_frame, gates_frame, runs_frame, samples_frame
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory


@pytest.fixture
def built(tmp_path: Path) -> dict[str, Any]:
    return fx.build(tmp_path / "runs", seeds=(1,))


def test_runs_and_samples_frames(built: dict[str, Any]) -> None:
    import pandas as pd  # here, not at the top: a worker that collects this file without running it skips them
    import polars as pl
    import pyarrow as pa

    store = built["store"]
    runs = runs_frame("arrow", store)
    # seed 1: 4 dev runs; baseline: 1 dev + 1 private; seed 1's decision run
    assert isinstance(runs, pa.Table) and runs.num_rows == 7
    assert isinstance(runs_frame("pandas", store), pd.DataFrame)
    assert isinstance(runs_frame("polars", store), pl.DataFrame)
    ids = [f"dev-1-{s}" for s in fx.STEPS]
    df = samples_frame(ids, "polars", actor="analyst", store=store)
    assert df.height == 40 and set(df["tier"].unique()) == {"dev"}
    curve = df.group_by("step").agg(pl.col("score").mean()).sort("step")
    assert curve.rows() == [(10, 0.3), (20, 0.5), (30, 0.6), (40, 0.5)]
    reads = [r for r in store.access_rows("fx-dev") if r.purpose == "inspect-samples"]
    assert sorted(r.run_id for r in reads) == sorted(ids) and {r.actor for r in reads} == {"analyst"}
    assert {(r.outcome, r.cached) for r in reads} == {("read", True)}  # exactly as evalgate samples logs
    pdf = samples_frame("dev-1-30", "pandas", store=store)
    assert list(pdf["item_id"])[:3] == ["q0", "q1", "q2"] and pdf["score"].sum() == 6.0


def test_private_samples_are_refused_and_logged(built: dict[str, Any]) -> None:
    store = built["store"]
    with pytest.raises(RefusedByPolicy, match="never shown"):
        samples_frame(["dev-1-10", "dec-1"], store=store)
    assert [r.outcome for r in store.access_rows("fx-private") if r.purpose == "inspect-samples"] == ["refused"]
    with pytest.raises(BadInput, match="no run 'nope'"):
        samples_frame("nope", store=store)
    with pytest.raises(BadInput, match="frame kind"):
        runs_frame("excel", store)  # type: ignore[arg-type]


def test_gates_and_access_log_frames(tmp_path: Path, built: dict[str, Any]) -> None:
    import yaml

    from evalgate.gate import load_policy, run_gate

    store = built["store"]
    p = tmp_path / "gate.yaml"
    p.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_seeds=1, reward_hacking=False)))
    v = run_gate(load_policy(p), store, evaluate_decision=False)
    gates = gates_frame("pandas", store)
    assert list(gates["gate_id"]) == [v.gate_id] and list(gates["name"]) == ["fx-gate"]
    log = access_log_frame("arrow", store)
    assert log.column("seq").to_pylist() == sorted(log.column("seq").to_pylist())
    assert log.num_rows == len(store.access_rows()) and "row_hash" in log.column_names


@pytest.mark.parametrize("sql", [
    "UPDATE access_log SET actor = 'nobody' WHERE seq = 1 RETURNING seq",  # edits the log without the lock
    "DELETE FROM access_log WHERE seq = 1",
    "UPDATE runs SET tier = 'dev', split = 'fx-dev' WHERE tier = 'private'",  # no chain covers runs
    "INSERT INTO gates SELECT * FROM gates",
    "SELECT 1; DELETE FROM access_log",  # a read first, a write after
    "COPY access_log TO '/dev/null' (FORMAT csv)",
    "ATTACH ':memory:' AS other",
])
def test_query_frame_only_reads(built: dict[str, Any], sql: str) -> None:
    """Adversary (14:35 UTC): query_frame ran any SQL in a write transaction, so 'UPDATE access_log SET actor = ...
    RETURNING seq' edited a logged row (audit verify then said BROKEN) and 'UPDATE runs' / 'gates' changed records
    no chain covers. One SELECT only now; nothing is changed."""
    from evalgate.views.frames import query_frame

    store = built["store"]
    before = (store.access_rows(), runs_frame("arrow", store).to_pylist(), gates_frame("arrow", store).num_rows)
    with pytest.raises(BadInput, match="one SELECT statement"):
        query_frame(sql, store=store)
    assert (store.access_rows(), runs_frame("arrow", store).to_pylist(), gates_frame("arrow", store).num_rows) == before
    # reads still work, in their forms
    assert query_frame("SELECT count(*) AS n FROM runs", kind="pandas", store=store)["n"][0] == 7
    assert query_frame("WITH r AS (SELECT * FROM runs) FROM r WHERE tier = ?", ["dev"], store=store).num_rows == 5
