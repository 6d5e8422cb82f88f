"""Load on `evalgate serve`: N concurrent raters each scoring M samples of one batch through the real pages.

Each rater is a thread with its own HTTP client doing what the browser does: GET the batch page (a logged read,
a fresh one-time form token), POST the score, follow nothing else. The server is a real `evalgate serve` subprocess
on 127.0.0.1 over a temporary store. Afterwards the store must hold exactly N x M ratings, one per rater and sample,
N x M rating events (all `scored`: none lost, none duplicated) and N x M read rows in the access log.

    PYTHONPATH=. .venv/bin/python bench/web_raters.py [--raters 20] [--scores 50]

Prints one JSON document: counts, wall time, requests per second, and p50 / p95 / max latency of page views and
of submissions (milliseconds).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parent.parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def setup(root: Path, n_items: int, raters: int, port: int) -> tuple[str, dict[str, str]]:
    """A human-audit split of ``n_items`` items, a complete run on it, one batch of every sample, the raters."""
    from evalgate.human import rating
    from evalgate.splits import write_split
    from evalgate.store import Store

    store = Store()
    write_split("ha", "human-audit", [{"id": f"q{i}", "question": f"{i} + {i}?"} for i in range(n_items)],
                {"source": "bench"})
    ids = [f"q{i}" for i in range(n_items)]
    with store.session():
        store.record_protocol("p", "1", "h", {"prompt": {"template": "{{ question }}", "response_prefix": None}})
        store.create_run({"run_id": "r", "protocol_name": "p", "protocol_version": "1", "protocol_hash": "h",
                          "checkpoint_digest": "ck", "checkpoint_path": "/ck", "split": "ha", "tier": "human-audit",
                          "split_sha256": "x", "sampling_seed": 1, "backend": "hf"})
        store.put_generations("ck", "h", [{"item_id": i, "sample_index": 0, "seed": 7, "prompt_sha256": "ps",
                                           "text": f"the answer to {i} is ...", "completion_tokens": 5,
                                           "finish_reason": "stop"} for i in ids], {"ps": "prompt"})
        store.finish_run({"run_id": "r", "metrics": {}, "counts": {}, "wall_s": 1.0},
                         [{"item_id": i, "sample_index": 0, "seed": 7, "score": float(k % 2), "status": "scored",
                           "cached": False} for k, i in enumerate(ids)])
        batch = rating.create_batch("r", samples=n_items, store=store, seed=0)["batch_id"]
        tokens = {f"rater{k:02d}": rating.add_rater(f"rater{k:02d}", store=store)["token"] for k in range(raters)}
    return batch, tokens


def rate(base: str, batch: str, token: str, scores: int, out: dict[str, list[float]], errors: list[str]) -> None:
    """One rater: view, score, repeat; at most ``scores`` + 5 page views (a bounded loop)."""
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120) as c:
        done = 0
        for _ in range(scores + 5):
            if done == scores:
                break
            t0 = time.perf_counter()
            page = c.get(f"/batch/{batch}")
            out["view"].append(time.perf_counter() - t0)
            form = re.search(r'name="form_token" value="([^"]+)"', page.text)
            sample = re.search(r'name="sample" value="([^"]+)"', page.text)
            if page.status_code != 200 or not form or not sample:
                errors.append(f"view {page.status_code}")
                continue
            t0 = time.perf_counter()
            r = c.post(f"/batch/{batch}/rate", data={"form_token": form.group(1), "sample": sample.group(1),
                                                     "score": str(1 + done % 5)})
            out["submit"].append(time.perf_counter() - t0)
            if r.status_code == 303:
                done += 1
            else:
                errors.append(f"submit {r.status_code}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--raters", type=int, default=20)
    ap.add_argument("--scores", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "EVALGATE_HOME": str(root / "home"), "EVALGATE_SPLITS": str(root / "splits"),
               "XDG_CONFIG_HOME": str(root / "config"), "PYTHONPATH": str(REPO)}
        os.environ.update({k: env[k] for k in ("EVALGATE_HOME", "EVALGATE_SPLITS", "XDG_CONFIG_HOME")})
        port = _port()
        base = f"http://127.0.0.1:{port}"
        batch, tokens = setup(root, args.scores, args.raters, port)
        proc = subprocess.Popen([sys.executable, "-m", "evalgate.cli", "serve", "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(600):
                try:
                    if httpx.get(base + "/", timeout=2).status_code == 401:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            lat: dict[str, list[float]] = {"view": [], "submit": []}
            errors: list[str] = []
            threads = [threading.Thread(target=rate, args=(base, batch, t, args.scores, lat, errors))
                       for t in tokens.values()]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - t0
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        from evalgate.store import Store

        store = Store()
        ratings = store.ratings(batch)
        events = store.rating_events(batch)
        reads = [r for r in store.access_rows("ha") if r.purpose == "human-audit-rating"]
        expected = args.raters * args.scores
        pct = {k: {f"p{q}": round(float(np.percentile(v, q)) * 1000, 1) for q in (50, 95)} | {
            "max": round(max(v) * 1000, 1)} for k, v in lat.items() if v}
        doc = {"raters": args.raters, "scores_each": args.scores, "expected": expected, "ratings": len(ratings),
               "distinct_rater_sample": len({(r["rater"], r["item_id"]) for r in ratings}),
               "events": len(events), "replaced_events": sum(e["action"] != "scored" for e in events),
               "logged_reads": len(reads), "errors": errors[:5], "n_errors": len(errors), "wall_s": round(wall, 1),
               "requests_per_s": round((len(lat["view"]) + len(lat["submit"])) / wall, 1), "latency_ms": pct,
               "lost": expected - len(ratings), "duplicated": len(events) - len(ratings), "cpus": os.cpu_count(),
               "load_avg_1m_after": os.getloadavg()[0]}
        print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
