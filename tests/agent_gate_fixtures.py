"""A gate over an agentic protocol with recorded model turns (the ``replay`` backend): one training seed's
checkpoint and a baseline, each run on a dev split (selection) and a private split (decision; release-gate runs
under a grant issued the way the gate's decision issues it, its reads reserved and logged first), for the release
report's trajectory viewer and the private-plaintext scan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from evalgate.checkpoints.resolve import Checkpoint
from evalgate.gate import Verdict, load_policy, run_gate
from evalgate.protocol.freeze import freeze
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.runner.grant import _reserve_release_reads
from evalgate.splits import RELEASE_GATE, SplitManager, load_manifest, write_split
from evalgate.store import Store


def call(name: str, **args: Any) -> str:
    """A hermes tool call."""
    return f'<tool_call>{json.dumps({"name": name, "arguments": args})}</tool_call>'


def _run(root: Path, proto: Path, ckpt: Checkpoint, split: str, turns: dict[str, list[str]], store: Store,
         recording: str | None, **opts: Any) -> dict[str, Any]:
    replay = root / (recording or f"{ckpt.digest[0]}-{split}.jsonl")
    replay.write_text("".join(json.dumps({"item_id": iid, "turn": t, "text": text}) + "\n"
                              for iid, texts in turns.items() for t, text in enumerate(texts)))
    return evaluate(proto, ckpt, split, RunOptions(backend="replay", backend_options={"file": str(replay)},
                                                   progress=False, **opts), store)


def build(root: Path, dev_items: list[dict[str, Any]], dev_turns: dict[str, list[str]],
          private_items: list[dict[str, Any]], private_turns: dict[str, list[str]],
          recording: str | None = None) -> tuple[Verdict, Store]:
    """Run the candidate (seed 1, step 10) and the baseline with the same recorded turns on both splits, then the
    gate over the stored runs (``evaluate_decision=False``); returns its verdict and the store. ``recording``: one
    recording file (under ``root``) for every run, rewritten before each, so all runs share one backend setting,
    as a real engine's do; default: a file per checkpoint and split.

    The protocol (``ag@1``, hermes calls, no chat template) offers ``calculator`` and ``python``, both allowed,
    two calls a sample; the policy sets ``max_tool_violation_rate: 1`` (always passes)."""
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    proto = root / "ag.yaml"
    proto.write_text(yaml.safe_dump({
        "name": "ag", "version": "1", "prompt": {"chat_template": "none", "template": "{{ prompt }}"},
        "sampling": {"max_tokens": 32}, "scorer": {"name": "exact", "options": {"answer_field": "answer"}},
        "extraction": {"rule": "gsm8k"},
        "tools": {"format": "hermes", "allowed": ["calculator", "python"], "max_calls": 2}}))
    freeze(proto, Store)
    write_split("ag-dev", "dev", dev_items, {"source": "test"})
    write_split("ag-private", "private", private_items, {"source": "test"})
    store = Store()
    ckpts = []
    for name, digest, seed in (("run-seed1/checkpoint-10", "c" * 64, 1), ("baseline", "b" * 64, None)):
        d = root / name
        d.mkdir(parents=True)
        ckpts.append(Checkpoint(d, "hf", digest, d, "ag-run" if seed else None, seed, 10 if seed else None))
    grant = _reserve_release_reads("ag-gate", SplitManager(store), load_manifest("ag-private"), "fixture",
                                   [{"detail": f"fixture read {i}"} for i in range(len(ckpts))], "refused")
    for ck in ckpts:
        _run(root, proto, ck, "ag-dev", dev_turns, store, recording)
        _run(root, proto, ck, "ag-private", private_turns, store, recording, purpose=RELEASE_GATE, grant=grant)
    policy = root / "gate.yaml"
    policy.write_text(yaml.safe_dump({
        "name": "ag-gate", "protocol": "ag@1", "protocol_file": str(proto), "selection_split": "ag-dev",
        "decision_split": "ag-private", "backend": "replay", "baseline": {"checkpoint": str(ckpts[1].path)},
        "bootstrap_resamples": 200,
        "rules": {"training_guards": False, "reward_hacking": False, "max_tool_violation_rate": 1.0}}))
    return run_gate(load_policy(policy), store, evaluate_decision=False), store
