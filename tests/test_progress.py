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


def test_transformers_is_not_imported_and_starts_quiet_when_imported_inside() -> None:
    # A fresh interpreter: a fully cached run must not import transformers just to silence it, and a run that does
    # import it (to load the model) within the block must get its bars off, then on again after the block.
    import subprocess
    import sys

    code = ("import sys\n"
            "from evalgate.progress import progress_bars\n"
            "with progress_bars(False):\n"
            "    before = 'transformers' in sys.modules\n"
            "    from transformers.utils import logging as tf_logging\n"
            "    inside = tf_logging.is_progress_bar_enabled()\n"
            "print(before, inside, tf_logging.is_progress_bar_enabled())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False", "True"], out.stderr
