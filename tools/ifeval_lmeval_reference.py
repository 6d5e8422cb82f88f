"""Score IFEval responses with lm-evaluation-harness's own ``ifeval`` task code (``lm_eval.tasks.ifeval.utils``), for
evalgate's parity test (tests/scoring/test_ifeval_parity.py). Runs in the test-only environment ``.venv-lmeval``
(``make setup-lmeval``: lm-eval==0.4.13 and the checkers' dependencies), never in evalgate's.

Each input line is ``{"key", "prompt", "instruction_id_list", "kwargs", "response"}`` (an IFEval record with a
response), or ``{"key", "response"}`` when ``--prompts`` gives IFEval's ``input_data.jsonl`` to join on ``key``. The
output is one JSON document: lm-eval's version, per key the task's ``process_results`` (strict and loose, prompt
and instruction level), and the four accuracies aggregated as the task aggregates them (``mean`` for prompt level,
``utils.agg_inst_level_acc`` for instruction level).

nltk's Punkt data and two seeds are what lm-eval leaves to the machine: ``NLTK_DATA`` must name a directory holding
``tokenizers/punkt_tab/english`` (lm-eval would otherwise try to download it); langdetect is seeded
(``DetectorFactory.seed = 0``), and the checkers' own draws (a ``letter_frequency`` letter outside a-z, IFEval keys
1122 and 1129, is ``random.choice`` of the 52 ASCII letters at every build) are made on a fresh ``random.Random(0)``, as
evalgate's scorer makes them (``evalgate.scoring.ifeval.SeededDraws``), since lm-eval draws from the unseeded
global generator. Nothing else of lm-eval is changed.

    .venv-lmeval/bin/python tools/ifeval_lmeval_reference.py RESPONSES.jsonl [--prompts input_data.jsonl] > OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.metadata import version
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("responses", type=Path)
    p.add_argument("--prompts", type=Path, default=None)
    a = p.parse_args(argv)
    import langdetect

    langdetect.DetectorFactory.seed = 0
    import random

    from lm_eval.tasks.ifeval import instructions, utils

    class SeededDraws:  # evalgate.scoring.ifeval.SeededDraws, restated: this environment has no evalgate
        def __getattr__(self, name):  # type: ignore[no-untyped-def]
            return getattr(random.Random(0), name)

    instructions.random = SeededDraws()

    prompts = {}
    if a.prompts is not None:
        prompts = {r["key"]: r for r in map(json.loads, a.prompts.read_text(encoding="utf-8").splitlines()) if r}
    results, rows = {}, []
    for line in a.responses.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        doc = {**prompts.get(rec["key"], {}), **{k: v for k, v in rec.items() if k != "response"}}
        out = utils.process_results(doc, [rec["response"]])
        results[str(rec["key"])] = out
        rows.append(out)
    agg = {"prompt_level_strict_acc": sum(r["prompt_level_strict_acc"] for r in rows) / len(rows),
           "inst_level_strict_acc": utils.agg_inst_level_acc([r["inst_level_strict_acc"] for r in rows]),
           "prompt_level_loose_acc": sum(r["prompt_level_loose_acc"] for r in rows) / len(rows),
           "inst_level_loose_acc": utils.agg_inst_level_acc([r["inst_level_loose_acc"] for r in rows])}
    json.dump({"lm_eval": version("lm_eval"), "nltk": version("nltk"), "langdetect_seed": 0, "draw_seed": 0,
               "responses": a.responses.name, "n": len(rows), "accuracies": agg, "per_key": results},
              sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
