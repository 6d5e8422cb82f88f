"""Benchmark: gate + report over a store with 1,000,000 sample rows (200 checkpoints x 3 seeds x 1,666 dev items,
plus decision runs), training logs of 2,000 logged steps per seed in trainer_state.json format.

Baseline in the same process: one plain DuckDB aggregation (mean score per run over every sample row), the least
work that picks a best checkpoint. Prints the median of the timed repetitions and the ratio gate+report / baseline.

    python bench/bench_gate.py [--reps 3] [--checkpoints 200] [--items 1666]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def build(root: Path, n_ckpt: int, n_items: int, n_private: int = 500) -> dict:
    os.environ.update(EVALGATE_HOME=str(root / "home"), EVALGATE_SPLITS=str(root / "splits"),
                      XDG_CONFIG_HOME=str(root / "config"))
    from evalgate.splits import load_manifest, write_split
    from evalgate.store import Store

    write_split("b-dev", "dev", [{"id": f"i{i}"} for i in range(n_items)], {"source": "bench"})
    write_split("b-private", "private", [{"id": f"p{i}"} for i in range(n_private)], {"source": "bench"})
    store = Store()
    store.record_protocol("bench", "1", "cd" * 32, {})
    seeds = (1, 2, 3)
    with store.connect() as con:
        # runs: seed s, checkpoint k at step 10*(k+1); dev accuracy rises then falls (peak at k = 120 + 10*s)
        con.execute("""
            CREATE TEMP TABLE plan AS
            SELECT s AS seed, k, 10 * (k + 1) AS step, 'dev-' || s || '-' || k AS run_id,
                   'd-' || s || '-' || k AS digest,
                   0.3 + 0.3 * (1 - abs(k - (120 + 10 * s)) / 200.0) AS p
            FROM range(1, 4) t(s), range(0, ?) u(k)""", [n_ckpt])
        common = ("'bench', '1', '" + "cd" * 32 + "'")
        con.execute(f"""
            INSERT INTO runs (run_id, status, protocol_name, protocol_version, protocol_hash, checkpoint_digest,
                              checkpoint_path, train_run, train_seed, step, split, tier, split_sha256, sampling_seed,
                              backend, started_at, purpose)
            SELECT run_id, 'complete', {common}, digest, ? || '/seed-' || seed || '/checkpoint-' || step,
                   'bench-run', seed, step, 'b-dev', 'dev', ?, 0, 'hf', now() + to_microseconds(k), 'evaluation'
            FROM plan""", [str(root / "runs"), load_manifest("b-dev").content_sha256])
        con.execute("""
            INSERT INTO samples
            SELECT p.run_id, 'i' || i, 0, 1,
                   CASE WHEN (hash(p.run_id || ':' || i) % 1000) < p.p * 1000 THEN 1.0 ELSE 0.0 END,
                   'x', '1', NULL, false, '{"completion_tokens": 20}'
            FROM plan p, range(0, ?) t(i)""", [n_items])
        con.execute("""
            UPDATE runs SET metrics = m.j FROM (
                SELECT run_id, json_object('pass@1', avg(score), 'pass@1_stderr', stddev_samp(score) / sqrt(count(*)),
                       'mean_completion_tokens', 20.0, 'truncation_rate', 0.0, 'mean_repetition', 0.0) AS j
                FROM samples GROUP BY run_id) m WHERE runs.run_id = m.run_id""")
        con.execute("UPDATE samples SET status = CASE WHEN score > 0 THEN 'correct' ELSE 'incorrect' END")
        best = {s: con.execute("""SELECT k, plan.step, digest FROM plan JOIN runs USING (run_id) WHERE seed=?
                                  ORDER BY CAST(json_extract(metrics, '$."pass@1"') AS DOUBLE) DESC, plan.step
                                  LIMIT 1""",
                               [s]).fetchone() for s in seeds}
        dec = [(f"dec-{s}", best[s][2], f"{root}/runs/seed-{s}/checkpoint-{best[s][1]}", s, best[s][1], 0.55)
               for s in seeds] + [("dec-base", "d-base", str(root / "base"), None, None, 0.45)]
        for run_id, digest, path, seed, step, p in dec:
            con.execute(f"""INSERT INTO runs (run_id, status, protocol_name, protocol_version, protocol_hash,
                            checkpoint_digest, checkpoint_path, train_run, train_seed, step, split, tier, split_sha256,
                            sampling_seed, backend, started_at, purpose, metrics)
                            VALUES (?, 'complete', {common}, ?, ?, ?, ?, ?, 'b-private', 'private', ?, 0, 'hf', now(),
                                    'release-gate', '{{"pass@1": {p}, "mean_completion_tokens": 20.0,
                                    "truncation_rate": 0.0, "mean_repetition": 0.0}}')""",
                        [run_id, digest, path, "bench-run" if seed else None, seed, step,
                         load_manifest("b-private").content_sha256])
            con.execute("""INSERT INTO samples SELECT ?, 'p' || i, 0, 1,
                           CASE WHEN (hash(? || ':' || i) % 1000) < ? * 1000 THEN 1.0 ELSE 0.0 END,
                           'x', '1', NULL, false, '{}' FROM range(0, ?) t(i)""", [run_id, run_id, p, n_private])
        con.execute("UPDATE samples SET status = CASE WHEN score > 0 THEN 'correct' ELSE 'incorrect' END "
                    "WHERE run_id LIKE 'dec-%'")
        rows = con.execute("SELECT count(*) FROM samples").fetchone()[0]
    (root / "base").mkdir()
    for s in seeds:
        ck = root / "runs" / f"seed-{s}" / f"checkpoint-{10 * n_ckpt}"
        ck.mkdir(parents=True)
        hist = [{"step": t, "reward": t / 2000, "kl": 0.001, "completions/mean_length": 100.0, "grad_norm": 1.0,
                 "loss": 0.1, "learning_rate": 1e-6, "clip_ratio/region_mean": 0.0} for t in range(1, 10 * n_ckpt + 1)]
        (ck / "trainer_state.json").write_text(json.dumps({"global_step": 10 * n_ckpt, "log_history": hist}))
    policy = root / "gate.yaml"
    policy.write_text(json.dumps({"name": "bench", "protocol": "bench@1", "protocol_file": "p.yaml",
                                  "selection_split": "b-dev", "decision_split": "b-private", "metric": "pass@1",
                                  "baseline": {"checkpoint": str(root / "base")},
                                  "rules": {"min_improvement": 0.0, "min_seeds": 3, "max_length_inflation": 1.5}}))
    return {"store": store, "policy": policy, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--checkpoints", type=int, default=200)
    ap.add_argument("--items", type=int, default=1666)
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-gate-"))
    t0 = time.perf_counter()
    b = build(root, a.checkpoints, a.items)
    print(f"built store: {b['rows']:,} sample rows in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    from evalgate.gate import load_policy, run_gate
    from evalgate.gate.report.outputs import write_all
    from evalgate.views.audit import audit_summary

    store = b["store"]
    base_t, gate_t, size = [], [], 0
    for _ in range(a.reps):
        t = time.perf_counter()
        with store.connect() as con:
            con.execute("SELECT run_id, avg(score) FROM samples GROUP BY run_id").fetchall()
        base_t.append(time.perf_counter() - t)
        with store.connect() as con:  # the bench store's private budget is reset between repetitions, and the
            con.execute("DELETE FROM access_log")  # stored verdicts, so each repetition decides (no reuse)
            con.execute("DELETE FROM gates")
        t = time.perf_counter()
        v = run_gate(load_policy(b["policy"]), store, evaluate_decision=False)
        out = write_all(v, root / "out", "bench", audit_summary(store, "b-private").as_dict())
        gate_t.append(time.perf_counter() - t)
        size = Path(out["html"]).stat().st_size
    g, bl = statistics.median(gate_t), statistics.median(base_t)
    print(json.dumps({"sample_rows": b["rows"], "reps": a.reps, "gate_plus_report_s_median": round(g, 2),
                      "baseline_group_by_s_median": round(bl, 3), "ratio": round(g / bl, 1),
                      "report_html_bytes": size, "verdict": "PASS" if v.passed else "FAIL",
                      "best_steps": {s.train_seed: s.best.step if s.best else None for s in v.seeds}}))


if __name__ == "__main__":
    main()
