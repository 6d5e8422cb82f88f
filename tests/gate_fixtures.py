"""Fixture training runs for the gate tests, built so that the right answers are known by construction.

Three training seeds, checkpoints at steps 10, 20, 30, 40, each with a ``trainer_state.json`` in the format HF's
Trainer / TRL's GRPOTrainer write (``global_step``, ``log_history`` with ``step``, ``reward``, ``kl``,
``completions/mean_length``, ``completions/clipped_ratio``, ``clip_ratio/region_mean``, ``grad_norm``, ``loss``,
``learning_rate``, ``epoch``; logging every 5 steps; NaN written the way ``json.dumps`` writes it).

Dev pass@1 by step (10 items, one sample each):

=====  =====  =====  =====  =====  ===================================================================
seed   10     20     30     40     known answer
=====  =====  =====  =====  =====  ===================================================================
1      0.3    0.5    0.6    0.5    best 30, last 40, none failed; triad at 40 (reward up, dev down,
                                   logged completion length up over steps 31-40)
2      0.4    0.7    0.2    0.6    best 20, last 40, 30 failed (collapse: 0.7 -> 0.2); no triad
                                   (reward falls over 21-30)
3      0.2    0.4    0.9    0.9    best 20, last 40 (plus a failed run at 50 = last), 30 and 40 failed
                                   (grad_norm NaN at step 25), 50 failed (run error: weights unreadable)
=====  =====  =====  =====  =====  ===================================================================

Decision split (private, 10 items): baseline ``B``, seed 1's best ``X1``, seed 2's ``X2``, seed 3's ``X3``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from evalgate.splits import load_manifest, write_split
from evalgate.store import Store

PROTO = ("fx", "1")
HASH = "ab" * 32
PRIVATE_MARKER = "private-output-marker"
# a failure that may concern the checkpoint (its weights would not load), unlike a missing engine or Ctrl-C
FAILED_RUN_ERROR = "EngineError: could not load the model: safetensors header of model.safetensors is truncated"
ITEMS = [{"id": f"q{i}", "question": f"{i}+{i}", "answer": str(2 * i)} for i in range(10)]
DEV = {1: [0.3, 0.5, 0.6, 0.5], 2: [0.4, 0.7, 0.2, 0.6], 3: [0.2, 0.4, 0.9, 0.9]}
STEPS = [10, 20, 30, 40]
B = [1, 0, 1, 0, 0, 1, 0, 0, 1, 0]
X = {1: [1, 1, 1, 0, 1, 1, 0, 0, 1, 0], 2: [1, 0, 1, 1, 1, 1, 0, 1, 1, 0], 3: [1, 1, 1, 1, 1, 1, 1, 0, 1, 0]}


def _log_entry(seed: int, step: int) -> dict[str, Any]:
    # seed 1: reward rises all along; completion length jumps after step 30
    # seed 2: reward rises except over steps 21-30, where it falls
    # seed 3: grad_norm NaN at step 25
    reward = 0.1 * step / 5
    if seed == 2 and 20 < step <= 30:
        reward = 0.4 - 0.1 * (step - 20) / 5
    length = 100.0 + (80.0 if seed == 1 and step > 30 else 0.0)
    grad = float("nan") if seed == 3 and step == 25 else 1.0 + 0.01 * step
    return {"clip_ratio/region_mean": 0.0, "completion_length": length, "completions/clipped_ratio": 0.0,
            "completions/mean_length": length, "epoch": step / 100, "grad_norm": grad, "kl": 0.001 * step,
            "learning_rate": 1e-6, "loss": 0.01, "num_tokens": 1000.0 * step, "reward": reward, "reward_std": 0.3,
            "step": step}


def _scores(value: float, n: int = 10) -> list[int]:
    k = round(value * n)
    return [1] * k + [0] * (n - k)


def _metrics(scores: list[int], tokens: float = 20.0) -> dict[str, float]:
    n = len(scores)
    mean = sum(scores) / n
    sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / (n - 1))
    return {"pass@1": mean, "pass@1_stderr": sd / math.sqrt(n), "mean_score": mean,
            "mean_completion_tokens": tokens, "truncation_rate": 0.0, "mean_repetition": 0.0, "empty_rate": 0.0}


def add_run(store: Store, run_id: str, digest: str, path: Path | str, split: str, tier: str, seed: int | None,
            step: int | None, scores: list[int] | None, status: str = "complete", tokens: float = 20.0,
            purpose: str = "evaluation", error: str = FAILED_RUN_ERROR, split_sha256: str | None = None,
            backend: str = "hf", train_run: str | None = "fx-run", tools: dict[str, Any] | None = None,
            judge: dict[str, Any] | None = None) -> None:
    """Insert one run with per-item samples (score 1 = correct) directly into the store; it ran on the split's
    current content unless ``split_sha256`` says otherwise; ``status`` failed or interrupted stores ``error``;
    ``tools``: an agentic run's tool-use metrics (``metrics["tools"]``); ``judge``: a judge scorer's summary
    (``metrics["judge"]``)."""
    store.create_run({
        "run_id": run_id, "protocol_name": PROTO[0], "protocol_version": PROTO[1], "protocol_hash": HASH,
        "checkpoint_digest": digest, "checkpoint_path": str(path), "train_run": train_run if seed else None,
        "train_seed": seed, "step": step, "split": split, "tier": tier,
        "split_sha256": split_sha256 or load_manifest(split, store.env.splits).content_sha256,
        "sampling_seed": 0, "backend": backend, "backend_info": {}, "effective_params": {}, "actor": "t",
        "purpose": purpose})
    if status != "complete":
        store.fail_run(run_id, error, status=status)
        return
    assert scores is not None
    samples = [{"item_id": f"q{i}", "sample_index": 0, "seed": 1, "score": float(s),
                "status": "correct" if s else "incorrect",
                "extracted": PRIVATE_MARKER if tier == "private" else "1", "detail": None, "cached": False,
                "behavior": {"completion_tokens": tokens}} for i, s in enumerate(scores)]
    metrics: dict[str, Any] = {**_metrics(scores, tokens), **({"tools": tools} if tools else {}),
                               **({"judge": judge} if judge else {})}
    store.finish_run({"run_id": run_id, "metrics": metrics, "counts": {"items": len(scores), "samples": len(scores)},
                      "wall_s": 1.0}, samples)


def build(root: Path, seeds: tuple[int, ...] = (1, 2, 3), decision_tokens: float = 20.0,
          decision_tools: dict[str, dict[str, Any]] | None = None,
          judge: dict[str, dict[str, Any]] | None = None, store: Store | None = None) -> dict[str, Any]:
    """Write splits, checkpoint directories with trainer_state.json, and runs into a fresh store (``store``: default
    ``Store()``; its environment's splits directory and key are used).
    ``decision_tools``: decision run id (``dec-base``, ``dec-<seed>``) -> its tool-use metrics; ``judge``: run id
    (``dev-<seed>-<step>``, ``dec-<seed>``) -> its ``metrics["judge"]``."""
    decision_tools, judge = decision_tools or {}, judge or {}
    store = store or Store()
    write_split("fx-dev", "dev", ITEMS, {"source": "test fixture"}, env=store.env)
    write_split("fx-private", "private", ITEMS, {"source": "test fixture"}, env=store.env)
    write_split("fx-public", "public", ITEMS, {"source": "test fixture"}, env=store.env)
    with store.session(), store.connect():  # the ~40 runs in one transaction: one commit on a file store, not ~80
        base = _build_runs(store, root, seeds, decision_tokens, decision_tools, judge)
    return {"store": store, "baseline": str(base)}


def _build_runs(store: Store, root: Path, seeds: tuple[int, ...], decision_tokens: float,
                decision_tools: dict[str, dict[str, Any]], judge: dict[str, dict[str, Any]]) -> Path:
    """``build``'s protocol, checkpoint directories and runs; returns the baseline's directory."""
    sha = {split: load_manifest(split, store.env.splits).content_sha256 for split in ("fx-dev", "fx-private")}
    store.record_protocol(*PROTO, HASH, {"prompt": {"template": "{{ question }}", "response_prefix": None}})
    for seed in seeds:
        run_dir = root / f"fx-run-seed{seed}"
        for j, step in enumerate(STEPS):
            ck = run_dir / f"checkpoint-{step}"
            ck.mkdir(parents=True)
            state = {"global_step": step, "logging_steps": 5, "max_steps": 40, "save_steps": 10,
                     "log_history": [_log_entry(seed, s) for s in range(5, step + 1, 5)]}
            (ck / "trainer_state.json").write_text(json.dumps(state))
            add_run(store, f"dev-{seed}-{step}", f"d{seed}-{step}", ck, "fx-dev", "dev", seed, step,
                    _scores(DEV[seed][j]), judge=judge.get(f"dev-{seed}-{step}"), split_sha256=sha["fx-dev"])
        if seed == 3:
            ck = run_dir / "checkpoint-50"
            ck.mkdir()
            add_run(store, "dev-3-50", "d3-50", ck, "fx-dev", "dev", 3, 50, None, status="failed",
                    split_sha256=sha["fx-dev"])
    base = root / "baseline"
    base.mkdir()
    add_run(store, "dev-base", "dbase", base, "fx-dev", "dev", None, None, _scores(0.4), split_sha256=sha["fx-dev"])
    add_run(store, "dec-base", "dbase", base, "fx-private", "private", None, None, B, tokens=20.0,
            purpose="release-gate", tools=decision_tools.get("dec-base"), split_sha256=sha["fx-private"])
    best = {1: 30, 2: 20, 3: 20}
    for seed in seeds:
        add_run(store, f"dec-{seed}", f"d{seed}-{best[seed]}", root / f"fx-run-seed{seed}" / f"checkpoint-{best[seed]}",
                "fx-private", "private", seed, best[seed], X[seed], tokens=decision_tokens, purpose="release-gate",
                tools=decision_tools.get(f"dec-{seed}"), judge=judge.get(f"dec-{seed}"), split_sha256=sha["fx-private"])
    return base


def policy_dict(baseline: str, **rules: Any) -> dict[str, Any]:
    return {"name": "fx-gate", "protocol": "fx@1", "selection_split": "fx-dev", "decision_split": "fx-private",
            "metric": "pass@1", "baseline": {"checkpoint": baseline}, "bootstrap_resamples": 2000,
            "rules": rules}
