"""Compute the length-controlled win rate with AlpacaEval's own ``get_length_controlled_winrate``
(``alpaca_eval.metrics.glm_winrate``), for evalgate's parity test (tests/rlhf/test_lc_alpacaeval_parity.py). Runs in
the test-only environment ``.venv-alpaca`` (``make setup-alpaca``: alpaca-eval==0.6.6), never in evalgate's.

The input is ``tests/rlhf/alpacaeval_data/tables.json``: ``{"tables": {name: {"preference", "len_baseline",
"len_model", "source"}}}`` with AlpacaEval's preference encoding (1 the baseline preferred, 2 the model, 0 or 1.5 a
tie, anything between for a weighted annotator) and output lengths in characters. Each table is handed to AlpacaEval
as annotations whose ``output_1`` (the baseline's) and ``output_2`` (the model's) are strings of those lengths, the
only thing its GLM reads of them. The formula is AlpacaEval's ``length_controlled_minimal`` (the default
``length_controlled_v1`` less the per-instruction difficulty, which exists only for AlpacaEval's own 805
instructions); with fewer than 5 items, the same formula with ``n_splits=0`` (C = 100, no cross-validation), since
5-fold ``GroupKFold`` needs five items.

AlpacaEval downloads ``df_gamed.csv`` (instruction difficulties) from the Hugging Face hub even for a formula that
does not use them; ``hf_hub_download`` is replaced by a function returning a local file of zero difficulties for
every row index, which the minimal formula never reads.

    .venv-alpaca/bin/python tools/alpacaeval_lc_reference.py tests/rlhf/alpacaeval_data/tables.json > OUT.json

``--from-annotations FILE --name NAME --source TEXT TABLES`` adds (or replaces) one table in TABLES from an
AlpacaEval ``annotations.json`` (its rows' preference and output lengths; rows without a preference are left out).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path


def _table_from_annotations(path: Path, source: str) -> dict:
    rows = [r for r in json.loads(path.read_text(encoding="utf-8")) if r.get("preference") is not None]
    return {"source": source, "preference": [float(r["preference"]) for r in rows],
            "len_baseline": [len(r["output_1"]) for r in rows], "len_model": [len(r["output_2"]) for r in rows]}


def _reference(table: dict, tmp: Path) -> dict:
    import pandas as pd
    from alpaca_eval.metrics import glm_winrate

    info = dict(glm_winrate.GLM_INFO["length_controlled_minimal"])
    n = len(table["preference"])
    if n < 5:
        info["kwargs"] = {"n_splits": 0}
    ann = [{"preference": p, "output_1": "x" * lb, "output_2": "y" * lm, "generator_1": "baseline",
            "generator_2": "model", "annotator": "judge"}
           for p, lb, lm in zip(table["preference"], table["len_baseline"], table["len_model"], strict=True)]
    warnings: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            warnings.append(record.getMessage())

    handler = _Keep(level=logging.WARNING)
    logging.getLogger().addHandler(handler)
    weights_dir = tmp / "weights"
    try:
        out = glm_winrate.get_length_controlled_winrate(ann, glm_name="length_controlled_minimal", glm_info=info,
                                                        save_weights_dir=weights_dir)
    finally:
        logging.getLogger().removeHandler(handler)
    weights = pd.read_csv(weights_dir / "length_controlled_minimal" / "baseline_baseline.csv", index_col=0).loc["model"]
    return {"n": n, "n_splits": info["kwargs"]["n_splits"], "win_rate": float(out["win_rate"]),
            "length_controlled_winrate": float(out["length_controlled_winrate"]),
            "lc_standard_error": float(out["lc_standard_error"]),
            "weights": {k: float(v) for k, v in weights.items()},
            "extreme_change": bool(glm_winrate.get_is_extreme_changes(out["win_rate"],
                                                                      out["length_controlled_winrate"])),
            "warnings": [w for w in warnings if "Length controlled" in w]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tables", type=Path)
    p.add_argument("--from-annotations", type=Path, default=None)
    p.add_argument("--name", default=None)
    p.add_argument("--source", default=None)
    a = p.parse_args(argv)
    if a.from_annotations is not None:
        doc = json.loads(a.tables.read_text(encoding="utf-8")) if a.tables.exists() else {"tables": {}}
        doc["tables"][a.name] = _table_from_annotations(a.from_annotations, a.source)
        a.tables.write_text(json.dumps(doc, indent=None, sort_keys=True) + "\n", encoding="utf-8")
        return 0
    from alpaca_eval.metrics import glm_winrate

    def local_difficulty(repo_id: str, filename: str, **_: object) -> str:
        path = Path(tmp) / filename
        path.write_text("model,index,instruction_difficulty\n" + "".join(f"stub,{i},0.0\n" for i in range(10_000)),
                        encoding="utf-8")
        return str(path)

    glm_winrate.hf_hub_download = local_difficulty
    tables = json.loads(a.tables.read_text(encoding="utf-8"))["tables"]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in sorted(tables):
            results[name] = _reference(tables[name], Path(tmp) / name)
    json.dump({"alpaca_eval": version("alpaca_eval"), "scikit-learn": version("scikit-learn"),
               "formula": glm_winrate.GLM_INFO["length_controlled_minimal"]["formula"], "tables": results},
              sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
