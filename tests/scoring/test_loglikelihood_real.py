"""Log-likelihood parity on the real model: on 100 MMLU-Pro items and SmolLM2, the option evalgate chooses under
``acc`` and ``acc_norm`` equals lm-evaluation-harness's on every item, through ``evalgate run`` with the hf
backend. lm-eval's choices are the fixture ``mmlu_pro_loglik_lmeval.json``, written by ``lmeval_mc_reference.py``
with lm-eval's own ``HFLM.loglikelihood`` in an environment of its own (its provenance, lm-eval's version and the
model files' digests, inside); the items are the script's selection rule."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from tests.conftest import REPO, SHARED_DATA
from tests.scoring.lmeval_mc_reference import FIXTURE, MODEL_FILES, model_file_digest, select

pytestmark = pytest.mark.slow

MMLU_PRO = SHARED_DATA / "mmlu-pro" / "test.jsonl"
_CHOICES = re.compile(r"acc chooses ([A-J]), acc_norm chooses ([A-J])")


def cli(*args: str) -> dict[str, Any]:
    r = CliRunner().invoke(main, list(args))
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout) if "--json" in args else {}


def reference(model_dir: Path) -> dict[str, Any]:
    """The fixture, checked to be lm-eval's answers for this model, data and protocol."""
    doc = json.loads(FIXTURE.read_text())
    prov = doc["provenance"]
    assert prov["lm_eval"].startswith("0.4.") and prov["script"] == "tests/scoring/lmeval_mc_reference.py"
    for name in MODEL_FILES:
        digest = model_file_digest(model_dir / name)
        assert prov["model_files_sha256"][name] == digest, f"{FIXTURE.name} was made with another {name}: rerun it"
    assert prov["data_sha256"] == hashlib.sha256(MMLU_PRO.read_bytes()).hexdigest()
    assert prov["protocol_sha256"] == hashlib.sha256((REPO / "protocols" / "mmlu-pro-loglik.yaml").read_bytes()
                                                     ).hexdigest()
    return doc


def _items() -> list[dict[str, Any]]:
    """The 100 parity items (``select``), read by the MMLU-Pro importer."""
    from evalgate.datasets.mmlu_pro import mmlu_pro_items

    records = [json.loads(line) for line in MMLU_PRO.read_text(encoding="utf-8").split("\n") if line.strip()]
    wanted = {f"mmlu-pro/test/{r['question_id']}" for r in select(records)}
    return [it for it in mmlu_pro_items(MMLU_PRO)[0] if it["id"] in wanted]


def parity_split(home: Path) -> list[str]:
    """The parity items as split ``mmlu-ll`` (dev); their ids."""
    items = _items()
    data = home / "mmlu-ll.jsonl"
    data.write_text("".join(json.dumps(it, ensure_ascii=False) + "\n" for it in items), encoding="utf-8")
    cli("splits", "add", "mmlu-ll", "--tier", "dev", "--file", str(data))
    return [it["id"] for it in items]


def run_choices(home: Path, model_dir: Path, backend: str, *options: str) -> tuple[dict[str, Any], dict]:
    """``evalgate run --json`` of protocols/mmlu-pro-loglik.yaml on the parity split, and per item what the run
    chose and scored: {id: (acc letter, acc_norm letter, logprobs, prompt sha256)}."""
    proto = home / "mmlu-pro-loglik.yaml"
    proto.write_text((REPO / "protocols" / "mmlu-pro-loglik.yaml").read_text())
    cli("protocol", "freeze", str(proto))
    doc = cli("run", "--protocol", str(proto), "--checkpoint", str(model_dir), "--split", "mmlu-ll", "--backend",
              backend, *[a for o in options for a in ("--backend-option", o)], "--json")
    shown = cli("samples", doc["run_id"], "--limit", "1000", "--json")
    out = {}
    for s in shown["samples"]:
        acc, norm = _CHOICES.match(s["detail"]).groups()
        out[s["item_id"]] = (acc, norm, json.loads(s["completion"])["logprobs"],
                             hashlib.sha256(s["prompt"].encode()).hexdigest())
    return doc, out


def assert_parity(ref: dict[str, Any], got: dict, ids: list[str]) -> None:
    letters = "ABCDEFGHIJ"
    expected = {r["id"]: r for r in ref["items"]}
    assert sorted(expected) == sorted(ids) == sorted(got) and len(ids) == 100
    for iid in ids:
        acc, norm, lls, prompt_sha = got[iid]
        r = expected[iid]
        assert prompt_sha == r["context_sha256"], f"{iid}: another prompt than lm-eval's context"
        assert (acc, norm) == (letters[r["acc"]], letters[r["acc_norm"]]), (iid, lls, r["logprobs"])
        assert lls == pytest.approx(r["logprobs"], abs=2e-3), iid


@pytest.mark.timeout(3600)  # 932 option rows through the model on CPU (about as long as lm-eval took on them)
def test_hf_chooses_as_lm_eval_on_100_mmlu_pro_items(home: Path, smollm2_dir: Path) -> None:
    if not MMLU_PRO.is_file():
        pytest.skip(f"{MMLU_PRO} is absent (../shared/data holds it on developer machines and CI)")
    ref = reference(smollm2_dir)
    ids = parity_split(home)
    doc, got = run_choices(home, smollm2_dir, "hf")
    assert_parity(ref, got, ids)
    settings = doc["backend"]["generation_settings"]
    assert settings["request"] == "loglikelihood" and doc["counts"]["generated"] == 100
    gold = {it["id"]: it["answer"] for it in _items()}
    for metric, k in (("acc", 0), ("acc_norm", 1)):  # the run's metrics are the means of its own choices
        assert doc["metrics"][metric] == pytest.approx(sum(got[i][k] == gold[i] for i in ids) / 100)
    assert doc["metrics"]["pass@1"] == doc["metrics"]["acc"]  # the protocol's metric (acc) scores the samples
    again, _ = run_choices(home, smollm2_dir, "hf")  # a rerun is served from the cache, loads no model
    assert again["counts"]["cached"] == 100 and again["metrics"] == doc["metrics"]


def test_hf_log_likelihoods_equal_each_row_fed_whole_on_smollm2(smollm2_dir: Path) -> None:
    """The backend computes each context once (its cache shared by the options); on the real model's 30 float32
    layers its sums equal each (context, option) row fed whole to 1e-5 relative, greedy flags included."""
    if not MMLU_PRO.is_file():
        pytest.skip(f"{MMLU_PRO} is absent (../shared/data holds it on developer machines and CI)")
    from evalgate.backends.base import LoglikelihoodRequest
    from evalgate.backends.hf import HFBackend
    from evalgate.protocol.prompts import PromptEncoder
    from evalgate.scoring.loglikelihood import encode_pair
    from tests.backends.test_hf_loglikelihood import plain

    backend = HFBackend(str(smollm2_dir))
    encoder = PromptEncoder(backend.tokenizer)
    reqs = []
    for it in _items()[::20]:  # 5 of the parity items, 46 options
        pairs = [encode_pair(lambda t, i=it["id"]: encoder.encode(t, i).ids, f"Question: {it['question']}\nAnswer:",
                             " " + o) for o in it["options"]]
        reqs.append(LoglikelihoodRequest(it["id"], pairs[0][0], tuple(c for _, c in pairs)))
    for req, res in zip(reqs, backend.loglikelihood(reqs), strict=True):
        expected = [plain(backend.model, list(req.context_ids), list(o)) for o in req.continuations]
        assert list(res.logprobs) == pytest.approx([e[0] for e in expected], rel=1e-5), req.key
        assert list(res.greedy) == [e[1] for e in expected], req.key
