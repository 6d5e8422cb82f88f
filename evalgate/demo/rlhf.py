"""The demo's RLHF leg (stage 4 of ``make demo``): an LLM judge and a reward model as proxies of the fine-tuned seeds,
shown in the release report beside the verified metric and deciding nothing (docs/DEMO.md, docs/RLHF.md).

- The reward model: a linear head on SmolLM2-135M features, trained on addition preference pairs (the right sum
  chosen, the sum off by ten rejected; ``demo.reward_model``) and cached once per machine like the demo's training.
  Protocol ``addition-rm@1`` scores each completion with it (``reward_model`` scorer).
- The judge: SmolLM2-135M-Instruct itself (the base model's GGUF, pinned by digest) compares each completion with the
  base model's completion of the same item, in both orders (``judge`` scorer, pairwise; protocol
  ``addition-judge@1``); a short prompt and ``JUDGE_MAX_TOKENS`` tokens per verdict.
- Both protocols keep ``protocols/addition.yaml``'s prompt and sampling, so they see what the gated protocol sees.
  They are written into the demo's workspace (``<home>/protocols``) and frozen there: the judge's checkpoint path
  and the reward model's digest are this machine's. ``gates/demo.yaml`` lists them as ``proxy_protocols`` on the
  split ``addition-proxy`` (``PROXY_ITEMS`` dev-tier items, disjoint from ``addition-dev``, so the numbers are not
  those of the items the best checkpoints were chosen on); the gate evaluates them on the base model (first: the
  judge's baseline) and on each seed's best before its private reads (``evalgate.gate.proxies``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

PROXY_SPLIT = "addition-proxy"
PROXY_ITEMS = 8
"""Items of the proxies' split: few, since the judge reads two prompts per item and checkpoint."""
JUDGE_MAX_TOKENS = 8
JUDGE_TEMPLATE = ("Question: {question}\n[Answer A]: {answer_a}\n[Answer B]: {answer_b}\nWhich answer is {rubric}? "
                  "Output your final verdict by strictly following this format: \"[[A]]\" if answer A is better, "
                  "\"[[B]]\" if answer B is better.")
"""MT-Bench's pairwise verdict format (Zheng et al. 2023), in a prompt short enough for a 135M judge."""
JUDGE_PARSE = r"\[+([AB])\]+"
"""One or more brackets: SmolLM2-135M writes ``[A]`` where MT-Bench asks for ``[[A]]`` (docs/RLHF.md)."""


def proxy_items(dev_items: int) -> list[dict[str, Any]]:
    """The ``addition-proxy`` items: the ``PROXY_ITEMS`` dev-part addition items after the first ``dev_items`` (those
    of ``addition-dev``), so the two splits never share an item."""
    from evalgate.demo.train import addition_items

    return addition_items("dev", dev_items + PROXY_ITEMS)[dev_items:]


def _like_addition(addition: Path, name: str, description: str, scorer: dict[str, Any]) -> dict[str, Any]:
    doc = yaml.safe_load(addition.read_text())
    doc.update(name=name, version="1", description=description, scorer=scorer)
    return doc


def judge_protocol(addition: Path, judge: Path, judge_digest: str, baseline_digest: str) -> dict[str, Any]:
    """The ``addition-judge@1`` protocol: ``addition`` 's prompt and sampling, scored by a pairwise judge.

    Args:
        addition: ``protocols/addition.yaml``.
        judge: the judge's checkpoint (the base model's GGUF); ``judge_digest`` its digest.
        baseline_digest: the base model's digest as the gate knows it: the judge compares with its completions.
    """
    return _like_addition(addition, "addition-judge", "Two-digit addition; SmolLM2-135M judges each answer against "
                          "the base model's, in both orders (a proxy: informational).", {"name": "judge", "options": {
                              "mode": "pairwise",
                              "judge": {"backend": "hf", "checkpoint": str(judge), "digest": judge_digest},
                              "template": JUDGE_TEMPLATE, "rubric": "the correct sum", "question_field": "question",
                              "parse": JUDGE_PARSE, "scale": None, "verdicts": {"A": "A", "B": "B"},
                              "baseline": {"checkpoint": baseline_digest},
                              "sampling": {"temperature": 0.0, "max_tokens": JUDGE_MAX_TOKENS, "seed": 0}}})


def rm_protocol(addition: Path, rm: Path, rm_digest: str) -> dict[str, Any]:
    """The ``addition-rm@1`` protocol: ``addition`` 's prompt and sampling, scored by the reward model at ``rm``
    (pinned by ``rm_digest``)."""
    return _like_addition(addition, "addition-rm", "Two-digit addition; each answer scored by the demo's tiny reward "
                          "model (a proxy: informational).", {"name": "reward_model", "options": {
                              "reward_model": {"checkpoint": str(rm), "digest": rm_digest},
                              "prompt_field": "question"}})


def prepare(home: Path, addition: Path, gguf: Path, store: Any, dev_items: int) -> Path:
    """Stage 4 of the demo, in its active workspace: train (or take from the cache) the reward model, write the
    ``addition-proxy`` split, write and freeze both proxy protocols under ``home/protocols``.

    Args:
        home: the demo's workspace home. addition: ``protocols/addition.yaml``. gguf: the base model's GGUF (the
            judge, and the judge's baseline). store: the demo's store. dev_items: the size of ``addition-dev``.

    Returns:
        The folder holding ``addition-judge.yaml`` and ``addition-rm.yaml`` (``$EVALGATE_DEMO_PROXIES`` of
        ``gates/demo.yaml``).

    Raises:
        MissingExtra: transformers, torch or scikit-learn missing (the reward model's training).
    """
    import time

    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.demo.reward_model import ensure_reward_model
    from evalgate.demo.train import TRAIN_CONFIG
    from evalgate.protocol.freeze import freeze
    from evalgate.splits.write import write_split

    # the identity the gate's baseline has
    base = resolve_checkpoint(gguf, recorded=store.recorded_checkpoint, env=store.env)
    t0 = time.perf_counter()
    rm = ensure_reward_model(base.model_dir, base.digest)
    took = time.perf_counter() - t0
    print(f"reward model: {rm} ({'trained' if took > 5 else 'cached'}, {took:.0f} s)", file=sys.stderr)
    write_split(PROXY_SPLIT, "dev", proxy_items(dev_items), {
        "source": "evalgate.demo.rlhf.proxy_items (seeded, synthetic)", "data_seed": TRAIN_CONFIG["data_seed"]},
        env=store.env)
    out = home / "protocols"
    out.mkdir(parents=True, exist_ok=True)
    for name, doc in (("addition-judge", judge_protocol(addition, gguf.resolve(), base.digest, base.digest)),
                      ("addition-rm", rm_protocol(addition, rm.resolve(),
                                                  resolve_checkpoint(rm, env=store.env).digest))):
        path = out / f"{name}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        lock = freeze(path, store)
        print(f"protocol {lock.name}@{lock.version} frozen, sha256 {lock.sha256[:16]}", file=sys.stderr)
    return out.resolve()


def proxy_lines(proxies: list[dict[str, Any]]) -> list[str]:
    """What the demo prints of the report's proxy section (the ``--json`` document's ``proxies``,
    ``ProxyEntry.as_dict``): per proxy and checkpoint, the
    judge's win rate against the base model with its CI and position-flip rate, or the reward model's mean score."""
    from evalgate.core.formatting import num, pm

    lines = []
    for p in proxies:
        lines.append(f"  proxy {p['protocol']} ({p['scorer']}, {p['split']}; informational, decides nothing):")
        for r in p["checkpoints"]:
            who = "base model" if r["role"] == "baseline" else f"seed {r['train_seed']} best (step {r['step']})"
            j = r.get("judge")
            if j is not None:
                pw = j.get("pairwise") or {}
                cut = (r.get("by_status") or {}).get("truncated", 0)
                what = (f"win rate vs base {num(pw.get('win_rate'))} [{num(pw.get('low'))}, {num(pw.get('high'))}], "
                        f"position-flip rate {num(pw.get('position_flip_rate'))}; {j['judged']} of {r['samples']} "
                        f"answers judged ({j['unparseable']} verdicts unparseable, {cut} answers cut at max_tokens)")
            elif "reward_mean" in r:
                what = (f"mean score {pm(r['mean_score'], r['mean_score_stderr'])}, "
                        f"mean reward {pm(r['reward_mean'], r['reward_mean_stderr'])}")
            else:
                what = f"mean score {pm(r['mean_score'], r['mean_score_stderr'])}"
            lines.append(f"    {who}: {what}")
    return lines
