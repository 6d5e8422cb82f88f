"""Library progress bars (transformers, huggingface_hub, transformers' GGUF loader) follow evalgate's switch."""

from __future__ import annotations

import os

import pytest

from evalgate.progress import gguf_conversion_bars, progress_bars

pytestmark = pytest.mark.skipif(os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") == "1",
                                reason="HF_HUB_DISABLE_PROGRESS_BARS=1 turns these bars off for the whole process")


def bars_drawn(capsys: pytest.CaptureFixture[str]) -> dict[str, bool]:
    """Draw one bar through each library's own tqdm and report which reached stderr."""
    from huggingface_hub.utils import tqdm as hub_tqdm
    from transformers import modeling_gguf_pytorch_utils as gguf_loader
    from transformers.utils import logging as tf_logging

    capsys.readouterr()
    for _ in tf_logging.tqdm(range(3), desc="tf-bar"):  # e.g. "Loading weights"
        pass
    for _ in hub_tqdm(range(3), desc="hub-bar"):  # downloads
        pass
    with gguf_conversion_bars():
        for _ in gguf_loader.tqdm(range(3), desc="gguf-bar"):  # "Converting and de-quantizing GGUF tensors"
            pass
    err = capsys.readouterr().err
    return {name: name in err for name in ("tf-bar", "hub-bar", "gguf-bar")}


def test_bars_follow_the_switch_and_the_setting_is_restored(capsys: pytest.CaptureFixture[str]) -> None:
    from transformers.utils import logging as tf_logging

    all_on = {"tf-bar": True, "hub-bar": True, "gguf-bar": True}
    all_off = {"tf-bar": False, "hub-bar": False, "gguf-bar": False}
    assert bars_drawn(capsys) == all_on
    with progress_bars(False):
        assert bars_drawn(capsys) == all_off
    assert bars_drawn(capsys) == all_on  # restored
    with progress_bars(True):
        assert bars_drawn(capsys) == all_on
    tf_logging.disable_progress_bar()  # a caller who turned them off keeps them off
    try:
        with progress_bars(False):
            pass
        assert bars_drawn(capsys) == all_off
    finally:
        tf_logging.enable_progress_bar()
