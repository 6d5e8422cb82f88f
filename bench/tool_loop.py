"""Benchmark: the agentic loop's overhead per turn beyond generation and tool execution (issue 18; target < 5 ms).

A run of ``--samples`` samples, each making ``--turns - 1`` calculator calls and then answering, goes through
``evaluate`` with the ``replay`` backend (recorded turns: generation costs almost nothing) and the ``hermes``
format. The loop's own time per turn is (loop wall - generation - tool execution) / turns: rendering the
conversation, parsing calls, permission and schema checks, and storing each step's turns. The baseline, in the same
run, is a bare loop over the same recorded turns that only calls the backend and the tool (no parsing, checks,
rendering or storage); the ratio shows what the bookkeeping costs against that floor.

Usage: python bench/tool_loop.py [--samples 64] [--turns 4] [--reps 3]
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

from evalgate.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def setup(tmp: Path, samples: int, turns: int) -> tuple[Path, Path]:
    """A frozen protocol and a replay recording in ``tmp``; a split of ``samples`` items."""
    import yaml

    from evalgate.protocol.freeze import freeze
    from evalgate.splits import write_split

    doc = {"name": "bench-loop", "version": "1", "prompt": {"chat_template": "none", "template": "{{ prompt }}"},
           "sampling": {"max_tokens": 64}, "scorer": {"name": "exact", "options": {"answer_field": "answer"}},
           "extraction": {"rule": "gsm8k"},
           "tools": {"format": "hermes", "allowed": ["calculator"], "max_calls": turns, "max_turns": turns}}
    proto = tmp / "bench-loop.yaml"
    proto.write_text(yaml.safe_dump(doc))
    freeze(proto, Store)
    lines = []
    for i in range(samples):
        for t in range(turns - 1):
            call = {"name": "calculator", "arguments": {"expression": f"{i} + {t}"}}
            lines.append({"item_id": f"q{i}", "turn": t, "text": f"<tool_call>{json.dumps(call)}</tool_call>"})
        lines.append({"item_id": f"q{i}", "turn": turns - 1, "text": f"The answer is {i}"})
    replay = tmp / "replay.jsonl"
    replay.write_text("".join(json.dumps(x) + "\n" for x in lines))
    write_split("bench-loop", "smoke", [{"id": f"q{i}", "prompt": f"q{i}?", "answer": str(i)}
                                        for i in range(samples)], {"source": "bench"})
    return proto, replay


def bare_loop(replay: Path, samples: int, turns: int) -> float:
    """Seconds for the floor: every recorded turn through the backend and every call through the tool."""
    from evalgate.backends.base import EffectiveParams, GenerationRequest, ReplayOptions
    from evalgate.backends.replay import ReplayBackend
    from evalgate.tools import ToolContext, get_tool

    backend, calc, ctx = ReplayBackend("", ReplayOptions(file=str(replay))), get_tool("calculator"), ToolContext()
    params = EffectiveParams(0.0, 1.0, 0, 64, (), 1.0)
    t0 = time.perf_counter()
    for t in range(turns):
        reqs = [GenerationRequest(f"q{i}", "", (0,), (0,), params, None, t) for i in range(samples)]
        for res in backend.generate(reqs):
            if "<tool_call>" in res.completions[0].text:
                calc.run({"expression": "1 + 1"}, ctx)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    from evalgate.checkpoints.resolve import Checkpoint
    from evalgate.runner.evaluate import RunOptions, evaluate
    from evalgate.store import Store

    per_turn, ratios, loops, tools_s = [], [], [], []
    for rep in range(a.reps):
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            os.environ.update(EVALGATE_HOME=str(tmp / "home"), EVALGATE_SPLITS=str(tmp / "splits"),
                              XDG_CONFIG_HOME=str(tmp / "cfg"), EVALGATE_ACTOR="bench")
            proto, replay = setup(tmp, a.samples, a.turns)
            ckpt = Checkpoint(path=tmp, kind="hf", digest=f"{rep:064d}", model_dir=tmp)
            doc = evaluate(proto, ckpt, "bench-loop", RunOptions(backend="replay", progress=False,
                                                                 backend_options={"file": str(replay)}), Store())
            tools = doc["metrics"]["tools"]
            timing, turns = tools["timing"], tools["turns_generated"]
            overhead = timing["loop_s"] - timing["generate_s"] - timing["tool_s"]
            bare = bare_loop(replay, a.samples, a.turns)
            per_turn.append(1000 * overhead / turns)
            ratios.append(timing["loop_s"] / bare)
            loops.append(timing["loop_s"])
            tools_s.append(timing["tool_s"])
            print(f"rep {rep}: {turns} turns, loop {timing['loop_s']:.3f} s (generation {timing['generate_s']:.3f}, "
                  f"tools {timing['tool_s']:.3f}), overhead {per_turn[-1]:.2f} ms/turn; bare loop {bare:.3f} s",
                  file=sys.stderr)
    print(json.dumps({"samples": a.samples, "turns": a.turns, "reps": a.reps, "cpus": os.cpu_count(),
                      "load": os.getloadavg()[0], "python": platform.python_version(),
                      "overhead_ms_per_turn_median": statistics.median(per_turn),
                      "loop_over_bare_median": statistics.median(ratios),
                      "loop_s_median": statistics.median(loops), "tool_s_median": statistics.median(tools_s)}))


if __name__ == "__main__":
    main()
