"""Writes ``mmlu_pro_loglik_lmeval.json`` beside this file: the options lm-evaluation-harness chooses (``acc``,
``acc_norm``) on the 100 MMLU-Pro items of ``test_loglikelihood_real.py``, with lm-eval's own ``HFLM.loglikelihood``
on the converted SmolLM2 directory the test fixtures build.

Run it in an environment of its own holding lm-eval and not evalgate (the fixture must not come from evalgate's
code)::

    python3 -m venv .venv-lmeval
    .venv-lmeval/bin/pip install torch==2.13.0
    .venv-lmeval/bin/pip install "lm-eval[hf]==0.4.13" transformers==5.25.0
    .venv-lmeval/bin/python tests/scoring/lmeval_mc_reference.py MODEL_DIR ../shared/data/mmlu-pro/test.jsonl

``MODEL_DIR``: the SmolLM2 HF directory (``<repo>/.evalgate/models/<key>``, made by the ``smollm2_dir`` fixture).
The requests are lm-eval's for a ``multiple_choice`` task: the context is ``protocols/mmlu-pro-loglik.yaml``'s
template rendered with the item (jinja2), each continuation ``target_delimiter + option``; the choices are computed
as ``lm_eval/api/task.py`` ``ConfigurableTask.process_results`` does (``np.argmax(lls)``, ``np.argmax(lls /
completion_len)`` with ``completion_len`` the option's length in characters).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROTOCOL = HERE.parent.parent / "protocols" / "mmlu-pro-loglik.yaml"
FIXTURE = HERE / "mmlu_pro_loglik_lmeval.json"
MAX_CHARS = 200
COUNT = 100
SELECTION = (f"the test set's records whose question and options together are at most {MAX_CHARS} characters, in "
             f"question_id order (the file's order), every (that many // {COUNT})-th, the first {COUNT}")
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


def select(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The parity items (``SELECTION``): short ones, spread over the whole test set."""
    short = [r for r in records if len(r["question"]) + sum(len(o) for o in r["options"]) <= MAX_CHARS]
    return short[::len(short) // COUNT][:COUNT]


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def model_file_digest(path: Path) -> str:
    """sha256 of a model file; for ``config.json``, of its sorted JSON without ``_name_or_path`` and
    ``transformers_version`` (the GGUF conversion writes there where the wheel was installed and which transformers
    converted it: .venv's or .venv-vllm's, whichever lane converted first; neither is the model)."""
    if path.name != "config.json":
        return sha256_file(path)
    config = json.loads(path.read_text())
    config.pop("_name_or_path", None)
    config.pop("transformers_version", None)
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def main(model_dir: str, data: str) -> None:
    import jinja2
    import lm_eval
    import numpy as np
    import torch
    import transformers
    import yaml
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    protocol = yaml.safe_load(PROTOCOL.read_text())
    template = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True).from_string(
        protocol["prompt"]["template"])
    delimiter = protocol["scorer"]["options"]["target_delimiter"]
    records = [json.loads(line) for line in Path(data).read_text(encoding="utf-8").split("\n") if line.strip()]
    items = select(records)
    lm = HFLM(pretrained=model_dir, device="cpu", dtype="float32", batch_size=32)
    requests, owners = [], []
    for k, rec in enumerate(items):
        context = template.render(**rec)
        for option in rec["options"]:
            requests.append(Instance("loglikelihood", rec, (context, f"{delimiter}{option}"), len(requests)))
            owners.append(k)
    results = lm.loglikelihood(requests)
    out = []
    for k, rec in enumerate(items):
        lls = np.array([ll for (ll, _), o in zip(results, owners, strict=True) if o == k])
        completion_len = np.array([float(len(i)) for i in rec["options"]])
        out.append({"id": f"mmlu-pro/test/{rec['question_id']}",
                    "context_sha256": hashlib.sha256(template.render(**rec).encode()).hexdigest(),
                    "acc": int(np.argmax(lls)), "acc_norm": int(np.argmax(lls / completion_len)),
                    "logprobs": [float(x) for x in lls]})
    doc = {"provenance": {
        "script": "tests/scoring/lmeval_mc_reference.py", "lm_eval": lm_eval.__version__,
        "transformers": transformers.__version__, "torch": torch.__version__,
        "model_files_sha256": {name: model_file_digest(Path(model_dir) / name) for name in MODEL_FILES},
        "data_sha256": sha256_file(Path(data)), "protocol_sha256": sha256_file(PROTOCOL), "selection": SELECTION,
        "hflm": {"dtype": "float32", "device": "cpu", "batch_size": 32}},
        "items": out}
    FIXTURE.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {FIXTURE}: {len(out)} items")


if __name__ == "__main__":
    main(*sys.argv[1:3])
