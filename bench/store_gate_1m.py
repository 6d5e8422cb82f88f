"""Benchmark: ``evalgate gate`` + its HTML/JSON report over a store of 1,000,000 sample rows, PostgreSQL server vs
the DuckDB file (the baseline), per phase (issue 47).

The store is filled the way ``evalgate run`` fills it, through the store's own repository API, one run at a time:
``upsert_checkpoint``, ``create_run``, ``put_run_prompts``, ``put_generations`` (in batches, as the runner stores
each batch of results) and ``finish_run`` (the scored samples and the metrics, from ``scoring.metrics``). Runs:
``--seeds`` training seeds x ``--checkpoints`` checkpoints and the baseline on a dev split (selection runs), and the
seeds' best checkpoints and the baseline on a private split (release-gate runs, sealed at rest), the dev split's
size chosen so the samples total ``--rows``. Then, timed per phase: the gate on the stored decision runs
(``run_gate(evaluate_decision=False)``: reads reserved, logged and counted, nothing generated), split into the
store's calls (every ``Store`` method the gate calls: its reads and its access-log writes; the costliest listed),
the statistics (``decide.statistics``, ``item_values``) and the rest; and the reports (``write_reports``: HTML and
JSON, with the access table), split the same way.

Each backend runs in a child process of its own (its own environment): the DuckDB file first, then a PostgreSQL
server the script starts as the tests do (``tests/helpers/postgres.py``: initdb in a temporary directory, a Unix
socket, fsync off), a new one per child. CPU is the client's (``time.process_time``) and the server's (every
process of the cluster, from /proc); on PostgreSQL the number of statements sent is counted too (each a round
trip). Each phase also says how long the store held its lock per outermost session or transaction (p50, max:
what a client waiting for the lock waits behind; `EVALGATE_LOCK_TIMEOUT` is sized against it). Prints one JSON
document: per backend and phase, wall and CPU seconds, and the ratio server / file; the
verdicts and statistics must be equal.

``--inserts bulk values`` runs each backend twice, with ``store.db.insert_values`` as it is (bulk: DuckDB lists,
PostgreSQL COPY) and as it was (multi-row ``VALUES``, kept here as ``values_insert``), and prints before / after.

``--analyze on off`` runs the server twice, with bulk writes analysing a grown table at once (as it is:
``PgConnection._analyze_grown``) and with its statistics left to autovacuum (as it was), and prints off / on.

Usage: python bench/store_gate_1m.py [--rows 1000000] [--seeds 3] [--checkpoints 60] [--private-items 5000]
       [--backends duckdb postgresql] [--inserts bulk values] [--analyze on off] [--resamples 1000] [--batch 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the checkout's evalgate, not an installed one

PROTOCOL = ("bench", "1")
PROTOCOL_HASH = "ab" * 32
SETTINGS = "5e" * 32
TICK = os.sysconf("SC_CLK_TCK")


def layout(rows: int, seeds: int, checkpoints: int, private_items: int) -> dict[str, int]:
    """How many dev items make ``rows`` samples with ``seeds * checkpoints + 1`` dev runs and ``seeds + 1`` private
    runs of ``private_items`` each (one sample per item)."""
    dev_runs, dec_runs = seeds * checkpoints + 1, seeds + 1
    dev_items = (rows - dec_runs * private_items) // dev_runs
    if dev_items < 10:
        raise SystemExit(f"--rows {rows} is too few for {dev_runs} dev runs and {dec_runs} private runs")
    return {"dev_runs": dev_runs, "dec_runs": dec_runs, "dev_items": dev_items, "private_items": private_items,
            "sample_rows": dev_runs * dev_items + dec_runs * private_items}


class Cpu:
    """Client CPU (this process) and, when ``postmaster`` is given, the PostgreSQL cluster's CPU (the postmaster and
    its children: backends, writers), in seconds."""

    def __init__(self, postmaster: int | None) -> None:
        self.postmaster = postmaster

    def server(self) -> float:
        if self.postmaster is None:
            return 0.0
        total = 0
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                fields = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(d) == self.postmaster or int(fields[1]) == self.postmaster:  # fields[1]: the parent pid
                total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
        return total / TICK

    def now(self) -> tuple[float, float, float]:
        return time.perf_counter(), time.process_time(), self.server()


def delta(a: tuple[float, float, float], b: tuple[float, float, float]) -> dict[str, float]:
    return {"wall_s": round(b[0] - a[0], 3), "client_cpu_s": round(b[1] - a[1], 3),
            "server_cpu_s": round(b[2] - a[2], 3)}


class Buckets:
    """Wall and client CPU seconds of instrumented calls by bucket (the outermost instrumented call counts)."""

    def __init__(self) -> None:
        self.t: dict[str, list[float]] = {}
        self.calls: dict[str, int] = {}
        self.methods: dict[str, list[float]] = {}  # "bucket.method" -> [wall, cpu, calls]
        self.depth = 0

    def wrap(self, bucket: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*a: Any, **k: Any) -> Any:
            if self.depth:
                return fn(*a, **k)
            self.depth += 1
            w, c = time.perf_counter(), time.process_time()
            try:
                return fn(*a, **k)
            finally:
                self.depth -= 1
                dw, dc = time.perf_counter() - w, time.process_time() - c
                acc = self.t.setdefault(bucket, [0.0, 0.0])
                acc[0] += dw
                acc[1] += dc
                self.calls[bucket] = self.calls.get(bucket, 0) + 1
                m = self.methods.setdefault(f"{bucket}.{fn.__name__}", [0.0, 0.0, 0])
                m[0], m[1], m[2] = m[0] + dw, m[1] + dc, m[2] + 1
        return timed

    def take(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: {"wall_s": round(v[0], 3), "client_cpu_s": round(v[1], 3), "calls": self.calls[k]}
                               for k, v in self.t.items()}
        top = sorted(self.methods.items(), key=lambda kv: -kv[1][0])[:8]  # the costliest calls, by wall
        out["top_calls"] = {k: {"wall_s": round(v[0], 3), "client_cpu_s": round(v[1], 3), "calls": v[2]}
                            for k, v in top}
        self.t, self.calls, self.methods = {}, {}, {}
        return out


def instrument(store: Any, buckets: Buckets) -> None:
    """Route every public ``Store`` method of ``store`` through ``buckets`` ("store"), and the statistics."""
    from evalgate.gate import decide, pipeline
    from evalgate.store import Store

    for name in dir(Store):
        if name.startswith("_") or name in ("connect", "session", "path", "location", "db", "clock"):
            continue
        attr = getattr(store, name)
        if callable(attr):
            setattr(store, name, buckets.wrap("store_calls", attr))
    decide.statistics = buckets.wrap("statistics", decide.statistics)
    pipeline.item_values = buckets.wrap("statistics", pipeline.item_values)
    pipeline.decide.statistics = decide.statistics


def count_statements() -> dict[str, int]:
    """Count the statements sent to a PostgreSQL server (``PgConnection.execute`` and ``executemany``'s rows)."""
    from evalgate.store import pg

    counter = {"statements": 0}
    ex, many = pg.PgConnection.execute, pg.PgConnection.executemany

    def execute(self: Any, q: str, p: Any = (), /) -> Any:
        counter["statements"] += 1
        return ex(self, q, p)

    def executemany(self: Any, q: str, p: Any = (), /) -> Any:
        counter["statements"] += len(p)
        return many(self, q, p)

    pg.PgConnection.execute, pg.PgConnection.executemany = execute, executemany  # type: ignore[method-assign]
    return counter


class LockHolds:
    """How long each outermost ``session()`` or ``transaction()`` of the store held its lock (the file's
    ``<db>.lock``, the server's advisory lock), in seconds, by phase: what a client waiting for the lock waits
    behind (``EVALGATE_LOCK_TIMEOUT`` is sized against it)."""

    def __init__(self) -> None:
        self.holds: list[float] = []
        self.depth = 0
        from evalgate.store.db import Database

        classes: list[Any] = [Database]
        try:
            from evalgate.store.pg import PostgresDatabase
            classes.append(PostgresDatabase)
        except ImportError:
            pass
        for cls in classes:
            for name in ("session", "transaction"):
                setattr(cls, name, self._wrap(getattr(cls, name)))

    def _wrap(self, fn: Any) -> Any:
        holds = self

        @functools.wraps(fn)
        @contextlib.contextmanager
        def held(db: Any) -> Any:
            if holds.depth:
                with fn(db) as x:
                    yield x
                return
            holds.depth += 1
            t = time.perf_counter()
            try:
                with fn(db) as x:
                    yield x
            finally:
                holds.depth -= 1
                holds.holds.append(time.perf_counter() - t)
        return held

    def take(self) -> dict[str, Any]:
        h, self.holds = sorted(self.holds), []
        if not h:
            return {"holds": 0}
        return {"holds": len(h), "p50_s": round(h[len(h) // 2], 4), "max_s": round(h[-1], 3),
                "total_s": round(sum(h), 2)}


def completions(n: int = 64) -> list[tuple[str, int, str, dict[str, Any]]]:
    """``n`` plausible completions (about 60 words each): text, token count, finish reason and behaviour record
    (``scoring.behavior.sample_behavior``, computed once per text)."""
    from evalgate.scoring.behavior import sample_behavior

    rng = random.Random(1)
    words = ["the", "answer", "is", "so", "we", "add", "then", "multiply", "which", "gives", "step", "therefore"]
    out = []
    for i in range(n):
        text = " ".join(rng.choice(words) for _ in range(60)) + f". The answer is {i}."
        tokens, finish = 80 + rng.randrange(40), "length" if i % 50 == 49 else "stop"
        out.append((text, tokens, finish, sample_behavior(text, tokens, finish)))
    return out


def store_run(store: Any, rng: random.Random, run_id: str, digest: str, path: str, seed: int | None,
              step: int | None, split: Any, items: list[str], p: float, purpose: str, pool: list[Any],
              batch: int) -> None:
    """One run as ``evalgate run`` stores it, through the repository API; each item correct with probability ``p``."""
    from evalgate.scoring.behavior import aggregate_behavior
    from evalgate.scoring.metrics import run_metrics
    from evalgate.splits.guard import SplitManager

    row = {"run_id": run_id, "status": "running", "protocol_name": PROTOCOL[0], "protocol_version": PROTOCOL[1],
           "protocol_hash": PROTOCOL_HASH, "protocol_path": "bench.yaml", "checkpoint_digest": digest,
           "checkpoint_path": path, "checkpoint_kind": "hf", "train_run": "bench-run" if seed is not None else None,
           "train_seed": seed, "step": step, "checkpoint_provenance": None, "split": split.name, "tier": split.tier,
           "split_sha256": split.content_sha256, "items": len(items), "sampling_seed": 0, "backend": "hf",
           "backend_info": {"name": "hf", "options": {}, "generation_settings_sha256": SETTINGS},
           "effective_params": {"seed": 0, "temperature": 0.0, "max_tokens": 256}, "versions": {"evalgate": "bench"},
           "metrics": None, "counts": None, "warnings": [], "wall_s": None, "actor": "bench", "purpose": purpose,
           "host": "bench-host", "pid": os.getpid(), "error": None, "settings_sha256": SETTINGS, "record_version": 2}
    prompts = {iid: f"Question {iid}: what is {iid} modulo 97? Think step by step." for iid in items}
    shas = {iid: hashlib.sha256(prompts[iid].encode()).hexdigest() for iid in items}
    with store.session():  # as runner.record.start: the read logged (not the release-gate runs': the gate logs
        if purpose != "release-gate":  # and reserves those), the checkpoint, dead runs, the draft, the prompts
            SplitManager(store).log_read(split, "bench", purpose, cached=False, checkpoint_digest=digest,
                                         protocol_hash=PROTOCOL_HASH, run_id=run_id)
        store.upsert_checkpoint(digest, path, "hf", "bench-run" if seed is not None else None, seed, step)
        store.mark_interrupted_runs("bench-host", lambda pid: True)
        store.create_run(row)
        store.put_run_prompts(run_id, [{"item_id": iid, "prompt_sha256": shas[iid], "prompt_tokens": 24,
                                        "bos_count": 1, "bos_added": False, "system_merged": False} for iid in items],
                              {shas[iid]: prompts[iid] for iid in items})
    samples, per_item = [], {}
    for b in range(0, len(items), batch):
        gens = []
        for iid in items[b:b + batch]:
            text, tokens, finish, behavior = pool[rng.randrange(len(pool))]
            gens.append({"item_id": iid, "sample_index": 0, "seed": 0, "prompt_sha256": shas[iid], "text": text,
                         "prompt_tokens": 24, "completion_tokens": tokens, "finish_reason": finish})
            ok = rng.random() < p
            s = {"item_id": iid, "sample_index": 0, "seed": 0, "score": 1.0 if ok else 0.0,
                 "status": "correct" if ok else "incorrect", "extracted": str(int(iid[1:]) % 97 if ok else -1),
                 "detail": None if ok else "expected a different number", "cached": False,
                 "behavior": behavior}
            samples.append(s)
            per_item[iid] = [s]
        store.put_generations(digest, PROTOCOL_HASH, gens, {shas[g["item_id"]]: prompts[g["item_id"]] for g in gens},
                              SETTINGS, run_id)
    metrics = {**run_metrics(per_item, [1], greedy=True), **aggregate_behavior([s["behavior"] for s in samples])}
    store.finish_run({"run_id": run_id, "metrics": metrics, "counts": {"samples": len(samples)}, "wall_s": 1.0},
                     samples)


def write_policy(work: Path, a: argparse.Namespace) -> Path:
    """The gate policy, the baseline's folder and each seed's training log (``trainer_state.json`` of its last
    checkpoint, which the training guards read)."""
    (work / "base").mkdir(exist_ok=True)
    for s in range(1, a.seeds + 1):
        ck = work / "runs" / f"seed-{s}" / f"checkpoint-{10 * a.checkpoints}"
        ck.mkdir(parents=True, exist_ok=True)
        hist = [{"step": t, "reward": t / 2000, "kl": 0.001, "completions/mean_length": 100.0, "grad_norm": 1.0,
                 "loss": 0.1, "learning_rate": 1e-6, "clip_ratio/region_mean": 0.0}
                for t in range(1, 10 * a.checkpoints + 1)]
        (ck / "trainer_state.json").write_text(json.dumps({"global_step": 10 * a.checkpoints, "log_history": hist}))
    policy = work / "gate.yaml"
    policy.write_text(json.dumps({
        "name": "bench", "protocol": "bench@1", "protocol_file": "bench.yaml", "selection_split": "b-dev",
        "decision_split": "b-private", "metric": "pass@1", "baseline": {"checkpoint": str(work / "base")},
        "bootstrap_resamples": a.resamples,
        "rules": {"min_improvement": 0.0, "min_seeds": a.seeds, "max_length_inflation": 1.5,
                  "reward_hacking": False}}))
    return policy


def selected(policy_path: Path, store: Any) -> list[Any]:
    """Each seed's best checkpoint as the gate will select it (``gate.select.select_checkpoints``)."""
    from evalgate.gate import load_policy
    from evalgate.gate.select import select_checkpoints

    policy = load_policy(policy_path)
    runs = [r for r in store.runs(split="b-dev", status="complete") if r["train_seed"] is not None]
    return [s for s in select_checkpoints(runs, policy.metric, policy.selection.collapse_drop) if s.best]


def values_insert(con: Any, head: str, rows: Any, tail: str = "", chunk: int = 500) -> None:
    """``store.db.insert_values`` before the bulk path (multi-row ``VALUES``, 500 rows a statement, every value a
    parameter): the "before" of ``--inserts values``."""
    if not rows:
        return
    one = f"({', '.join('?' * len(rows[0]))})"
    for i in range(0, len(rows), chunk):
        part = rows[i:i + chunk]
        con.execute(f"{head} VALUES {', '.join([one] * len(part))} {tail}", [v for r in part for v in r])


def use_values_insert() -> None:
    """Every store module writes through ``values_insert`` instead of the bulk path."""
    import evalgate.store as package

    for name in list(sys.modules):
        mod = sys.modules[name]
        if name.startswith(package.__name__ + ".") and hasattr(mod, "insert_values"):
            mod.insert_values = values_insert  # type: ignore[attr-defined]


def child(a: argparse.Namespace) -> None:
    """One backend: populate, gate, report; prints its JSON document."""
    work = Path(a.work)
    os.environ.update(EVALGATE_HOME=str(work / "home"), EVALGATE_SPLITS=str(work / "splits"),
                      XDG_CONFIG_HOME=str(work / "config"), EVALGATE_ACTOR="bench")
    from evalgate.gate import load_policy, run_gate
    from evalgate.gate.report.outputs import write_reports
    from evalgate.splits import load_manifest, write_split
    from evalgate.store import Store

    if a.insert == "values":
        use_values_insert()
    if a.analyze == ["off"]:  # as before: the server's statistics left to autovacuum
        from evalgate.store import pg

        pg.PgConnection._analyze_grown = lambda *args: None  # type: ignore[method-assign]
    cpu = Cpu(a.postmaster)
    counter = count_statements() if a.postmaster else {"statements": 0}
    lay = layout(a.rows, a.seeds, a.checkpoints, a.private_items)
    dev_items = [f"i{i}" for i in range(lay["dev_items"])]
    dec_items = [f"p{i}" for i in range(a.private_items)]
    write_split("b-dev", "dev", [{"id": i} for i in dev_items], {"source": "bench"})
    write_split("b-private", "private", [{"id": i} for i in dec_items], {"source": "bench"})
    dev, private = load_manifest("b-dev"), load_manifest("b-private")
    store = Store()
    store.record_protocol(*PROTOCOL, PROTOCOL_HASH, {})
    rng, pool = random.Random(0), completions()
    out: dict[str, Any] = {"layout": lay}
    holds = LockHolds()

    t0, s0 = cpu.now(), counter["statements"]
    for s in range(1, a.seeds + 1):
        for k in range(a.checkpoints):  # dev accuracy rises, then falls (peak at k = checkpoints/2 + s)
            step, p = 10 * (k + 1), 0.3 + 0.3 * (1 - abs(k - (a.checkpoints // 2 + s)) / a.checkpoints)
            store_run(store, rng, f"dev-{s}-{k}", f"d-{s}-{k}", f"{work}/runs/seed-{s}/checkpoint-{step}", s, step,
                      dev, dev_items, p, "evaluation", pool, a.batch)
    store_run(store, rng, "dev-base", "d-base", str(work / "base"), None, None, dev, dev_items, 0.35, "evaluation",
              pool, a.batch)
    policy = write_policy(work, a)
    for s in selected(policy, store):  # the checkpoints the gate will select: their release-gate runs
        store_run(store, rng, f"dec-{s.train_seed}", s.best.digest, s.best.path, s.train_seed, s.best.step, private,
                  dec_items, 0.55, "release-gate", pool, a.batch)
    store_run(store, rng, "dec-base", "d-base", str(work / "base"), None, None, private, dec_items, 0.45,
              "release-gate", pool, a.batch)
    out["populate"] = {**delta(t0, cpu.now()), "statements": counter["statements"] - s0, "lock": holds.take()}
    with store.connect() as con:
        out["sample_rows"] = con.execute("SELECT count(*) FROM samples").fetchone()[0]
        out["generation_rows"] = con.execute("SELECT count(*) FROM generations").fetchone()[0]

    buckets = Buckets()
    instrument(store, buckets)
    t0, s0 = cpu.now(), counter["statements"]
    verdict = run_gate(load_policy(policy), store, evaluate_decision=False)
    out["gate"] = {**delta(t0, cpu.now()), "statements": counter["statements"] - s0, "parts": buckets.take(),
                   "lock": holds.take()}
    t0, s0 = cpu.now(), counter["statements"]
    files = write_reports(verdict, {"html": work / "report.html", "json": work / "report.json"}, store).files
    out["report"] = {**delta(t0, cpu.now()), "statements": counter["statements"] - s0, "parts": buckets.take(),
                     "lock": holds.take()}
    doc = json.loads(Path(next(v for v in files.values() if str(v).endswith(".json"))).read_text())
    out["verdict"] = {"passed": verdict.passed, "rules": [[r.rule, r.passed] for r in verdict.rules],
                      "best_steps": {str(s.train_seed): s.best.step if s.best else None for s in verdict.seeds},
                      "stats": doc.get("stats")}
    out["report_bytes"] = {k: Path(v).stat().st_size for k, v in files.items()}
    print(json.dumps(out))


def ratio(num: float, den: float) -> float | None:
    return round(num / den, 2) if den > 0 else None


def start_server() -> Any:
    """A PostgreSQL server as the tests start one (``tests/helpers/postgres.py``)."""
    from tests.helpers.postgres import PostgresServer, find_bin_dir

    bin_dir, why = find_bin_dir()
    if bin_dir is None:
        raise SystemExit(why)
    return PostgresServer(bin_dir).start()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000, help="sample rows in all")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--checkpoints", type=int, default=60, help="per seed")
    ap.add_argument("--private-items", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=1000, help="generations stored per put_generations call")
    ap.add_argument("--resamples", type=int, default=1000, help="the policy's bootstrap_resamples")
    ap.add_argument("--backends", nargs="+", default=["duckdb", "postgresql"], choices=["duckdb", "postgresql"])
    ap.add_argument("--inserts", nargs="+", default=["bulk"], choices=["bulk", "values"],
                    help="store.db.insert_values as it is (bulk), and/or as it was (values: multi-row VALUES)")
    ap.add_argument("--analyze", nargs="+", default=["on"], choices=["on", "off"],
                    help="PostgreSQL: bulk writes analyse a grown table at once (on, as it is) or leave it to "
                         "autovacuum (off, as it was); each given value is a run of its own")
    ap.add_argument("--insert", default="bulk", help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--postmaster", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return
    out: dict[str, Any] = {"machine": platform.platform(), "cpus": os.cpu_count(), "load_before": os.getloadavg(),
                           "args": {k: v for k, v in vars(a).items() if k not in ("child", "work", "postmaster")}}
    base = [sys.executable, __file__, "--rows", str(a.rows), "--seeds", str(a.seeds), "--checkpoints",
            str(a.checkpoints), "--private-items", str(a.private_items), "--resamples", str(a.resamples),
            "--batch", str(a.batch), "--child"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for k in ("EVALGATE_STORE", "EVALGATE_PRIVATE_KEY", "EVALGATE_PRIVATE_KEY_FILE", "EVALGATE_LOG_KEY",
              "EVALGATE_LOG_KEY_FILE", "EVALGATE_EXPECT_HEAD"):
        env.pop(k, None)
    server = None
    runs = [(insert, analyze) for insert in a.inserts for analyze in a.analyze]
    try:
        for insert, analyze in runs:
            for backend in a.backends:
                if analyze == "off" and backend != "postgresql":
                    continue
                key = insert if analyze == "on" else f"{insert}-analyze-off"
                with tempfile.TemporaryDirectory(prefix=f"bench-store-gate-{backend}-") as d:
                    cmd, child_env = [*base, "--work", d, "--insert", insert, "--analyze", analyze], dict(env)
                    if backend == "postgresql":
                        if server is not None:
                            server.stop()
                        server = start_server()
                        postmaster = int((server.data / "postmaster.pid").read_text().split()[0])
                        child_env["EVALGATE_STORE"] = server.create_schema()
                        cmd += ["--postmaster", str(postmaster)]
                    res = subprocess.run(cmd, cwd=ROOT, env=child_env, capture_output=True, text=True)
                    if res.returncode != 0:
                        raise SystemExit(f"{backend} ({key}): exit {res.returncode}\n{res.stderr[-4000:]}")
                    out[f"{backend}/{key}"] = json.loads(res.stdout.strip().splitlines()[-1])
                    print(f"{backend}/{key}: {json.dumps(out[f'{backend}/{key}'])}", file=sys.stderr)
    finally:
        if server is not None:
            server.stop()
    verdicts = {k: v["verdict"] for k, v in out.items() if isinstance(v, dict) and "verdict" in v}
    if len({json.dumps(v, sort_keys=True) for v in verdicts.values()}) > 1:
        raise SystemExit("the verdicts differ:\n" + json.dumps(verdicts, indent=1))
    phases = ("populate", "gate", "report")
    for insert in a.inserts:
        f, p = out.get(f"duckdb/{insert}"), out.get(f"postgresql/{insert}")
        if f and p:
            out[f"ratio_server_over_file/{insert}"] = {ph: {
                "wall": ratio(p[ph]["wall_s"], f[ph]["wall_s"]),
                "cpu": ratio(p[ph]["client_cpu_s"] + p[ph]["server_cpu_s"], f[ph]["client_cpu_s"])} for ph in phases}
    b, v = out.get("postgresql/bulk-analyze-off"), out.get("postgresql/bulk")
    if b and v:
        out["ratio_analyze_off_over_on/postgresql"] = {ph: {
            "wall": ratio(b[ph]["wall_s"], v[ph]["wall_s"]),
            "cpu": ratio(b[ph]["client_cpu_s"] + b[ph]["server_cpu_s"],
                         v[ph]["client_cpu_s"] + v[ph]["server_cpu_s"])} for ph in phases}
    for backend in a.backends:
        b, v = out.get(f"{backend}/values"), out.get(f"{backend}/bulk")
        if b and v:
            out[f"ratio_before_over_after/{backend}"] = {ph: {
                "wall": ratio(b[ph]["wall_s"], v[ph]["wall_s"]),
                "cpu": ratio(b[ph]["client_cpu_s"] + b[ph]["server_cpu_s"],
                             v[ph]["client_cpu_s"] + v[ph]["server_cpu_s"])} for ph in phases}
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
