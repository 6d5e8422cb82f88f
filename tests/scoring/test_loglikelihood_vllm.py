"""Log-likelihood parity on vLLM: the same 100 MMLU-Pro items as ``test_loglikelihood_real.py``, scored by the vllm
backend (prompt log-probabilities), choose lm-evaluation-harness's option on every item under ``acc`` and
``acc_norm``. Runs in ``.venv-vllm`` (``make test-vllm``); skipped, saying why, where vLLM's engine cannot be
imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.vllm_lane import lane_marks
from tests.scoring.test_loglikelihood_real import MMLU_PRO, assert_parity, parity_split, reference, run_choices

pytestmark = lane_marks(pytest.mark.slow)


@pytest.mark.timeout(3600)  # the engine's start and 932 option rows on vLLM's CPU build
def test_vllm_chooses_as_lm_eval_on_100_mmlu_pro_items(home: Path, smollm2_dir: Path) -> None:
    from evalgate.backends.vllm import close_engine

    if not MMLU_PRO.is_file():
        pytest.skip(f"{MMLU_PRO} is absent (../shared/data holds it on developer machines and CI)")
    ref = reference(smollm2_dir)
    ids = parity_split(home)
    # float32: vLLM's CPU build loads a float32 checkpoint as bfloat16 under dtype auto (docs/BACKENDS.md); eager:
    # no torch.compile at the engine's start (the same kernels, as in test_vllm_engine.py); 32-token blocks (the CPU
    # build's smallest; its default is 128): the prefix cache then holds most of these 27-84-token contexts, computed
    # once per item instead of once per option
    try:
        doc, got = run_choices(home, smollm2_dir, "vllm", "dtype=float32", "max_model_len=1024", "enforce_eager=True",
                               "block_size=32")
    finally:
        close_engine()
    assert_parity(ref, got, ids)
    assert doc["backend"]["generation_settings"]["request"] == "loglikelihood"
