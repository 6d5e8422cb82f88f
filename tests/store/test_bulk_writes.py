"""The store's bulk path (``store.db.insert_values``: DuckDB binds each column as one list, PostgreSQL takes ``COPY``)
writes every value as given, in order, on each backend; and a gate over runs written through it gives the same
verdict and the same statistics, by hand, on a DuckDB file and on a PostgreSQL server."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from evalgate.gate import load_policy, run_gate
from evalgate.gate.report.outputs import write_reports
from evalgate.store import SampleScore, Store
from evalgate.store.db import insert_values, open_database
from tests import gate_fixtures as fx

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server
AT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
ODD = "tab\there, newline\nhere, back\\slash, 'quote' \"double\", \\N, é漢字, ;--"
"""Text that COPY's text format must escape (tab, newline, backslash, its NULL marker ``\\N``) or a parser could
trip on."""


def test_every_value_comes_back_as_written_and_the_first_of_a_repeated_key_is_kept(backend_store: Store) -> None:
    with backend_store.connect() as con:
        con.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, seed UBIGINT NOT NULL, x DOUBLE, ok BOOLEAN, "
                    "ts TIMESTAMPTZ, doc JSON, note VARCHAR)")
        con.execute("INSERT INTO t (k, seed) VALUES (3, 7)")
        head = "INSERT INTO t (k, seed, x, ok, ts, doc, note)"
        rows = [[0, 2**64 - 1, 0.5, True, AT, '{"a": [1, 2]}', ODD],
                [1, 0, None, False, None, None, None],
                [3, 1, 1.0, True, AT, "{}", "already stored: not written"],
                [2, 5, -1e-300, None, AT, "[]", ""],
                [2, 6, 9.0, False, AT, "[]", "repeated key: not written"]]
        # chunks of 2 on DuckDB: key 2's two rows fall in one chunk; PostgreSQL copies them all at once
        insert_values(con, head, rows, "ON CONFLICT DO NOTHING", chunk=2)
        insert_values(con, "INSERT INTO t", [[4, 12, 2.25, False, AT, "null", ODD]])  # no tail: COPY straight in
        insert_values(con, head, [])  # nothing to write is not an error
        got = con.execute("SELECT k, seed, x, ok, ts, doc, note FROM t ORDER BY k").fetchall()
    assert [tuple(r) for r in got] == [
        (0, 2**64 - 1, 0.5, True, AT, '{"a": [1, 2]}', ODD),
        (1, 0, None, False, None, None, None),
        (2, 5, -1e-300, None, AT, "[]", ""),
        (3, 7, None, None, None, None, None),
        (4, 12, 2.25, False, AT, "null", ODD)]


@pytest.mark.server_only("the server's COPY path alone parses the INSERT head")
def test_a_head_that_is_not_an_insert_into_a_table_is_refused_by_the_servers_bulk_path(postgres_url: str) -> None:
    with open_database(postgres_url).transaction() as con:
        with pytest.raises(ValueError, match="INSERT INTO table"):
            insert_values(con, "INSERT INTO protocols VALUES", [["n", "1", "h", "{}", AT]])


def test_a_gate_over_bulk_written_runs_has_the_same_verdict_and_statistics_on_each_backend(
        backend_store: Store, tmp_path: Path) -> None:
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    pol = fx.policy_dict(built["baseline"], min_improvement=0.0, confidence=0.9, min_seeds=2,
                         seeds_beat_baseline_share=1.0, max_length_inflation=1.5, max_truncation_rate=0.1,
                         reward_hacking=False)
    (tmp_path / "gate.yaml").write_text(yaml.safe_dump(pol))
    v = run_gate(load_policy(tmp_path / "gate.yaml"), backend_store, evaluate_decision=False)
    files = write_reports(v, {"json": tmp_path / "r.json", "html": tmp_path / "r.html"}, backend_store).files
    st = json.loads(Path(files["json_out"]).read_text())["stats"]
    # the fixture's decision runs (tests/gate_fixtures.py): X1 6/10, X2 7/10, baseline B 4/10; paired differences
    # against B: X1 [0,1,0,0,1,0,0,0,0,0], X2 [0,0,0,1,1,0,0,1,0,0] -> per item mean of the two minus B:
    # [0, .5, 0, .5, 1, 0, 0, .5, 0, 0], mean .25
    assert st["aggregate"]["mean_of_seed_means"] == pytest.approx(0.65)
    assert st["aggregate"]["stderr_over_seeds"] == pytest.approx(0.05)
    assert st["difference"]["diff"] == pytest.approx(0.25)
    assert st["paired_stderr"] == pytest.approx(math.sqrt((9 * 0.0625 + 0.5625) / 9) / math.sqrt(10))
    assert v.passed and Path(files["report"]).stat().st_size > 0
    assert backend_store.sample_scores("dec-1") == [
        SampleScore(f"q{i}", 0, float(s), "correct" if s else "incorrect")
        for i, s in sorted(enumerate(fx.X[1]), key=lambda p: f"q{p[0]}")]
