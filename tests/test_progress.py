"""Library progress bars (transformers, huggingface_hub, transformers' GGUF loader) follow evalgate's switch;
evalgate's own bars are live on a terminal and whole lines in a log."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from evalgate.core import progress
from evalgate.core.progress import bar, gguf_conversion_bars, progress_bars, stage

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


def test_bars_follow_the_switch_and_the_setting_is_restored(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.utils import logging as tf_logging

    monkeypatch.setattr(progress, "_on_terminal", lambda stream: True)  # as on a terminal (see the next test)

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


def test_off_a_terminal_the_libraries_bars_are_off_even_when_enabled(capsys: pytest.CaptureFixture[str]) -> None:
    # pytest's captured stderr is no terminal, like a CI log: a library's redraws would fill it with \r lines
    all_off = {"tf-bar": False, "hub-bar": False, "gguf-bar": False}
    with progress_bars(True):
        assert bars_drawn(capsys) == all_off
    assert bars_drawn(capsys) == {"tf-bar": True, "hub-bar": True, "gguf-bar": True}  # restored after the block


@pytest.mark.integration
def test_transformers_is_not_imported_and_starts_quiet_when_imported_inside() -> None:
    # A fresh interpreter: a fully cached run must not import transformers just to silence it, and a run that does
    # import it (to load the model) within the block must get its bars off, then on again after the block.
    import subprocess
    import sys

    code = ("import sys\n"
            "from evalgate.core.progress import progress_bars\n"
            "with progress_bars(False):\n"
            "    before = 'transformers' in sys.modules\n"
            "    from transformers.utils import logging as tf_logging\n"
            "    inside = tf_logging.is_progress_bar_enabled()\n"
            "print(before, inside, tf_logging.is_progress_bar_enabled())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False", "True"], out.stderr


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _draw(n: int) -> None:
    with bar(n, "generate", "sample") as b:
        for i in range(n):
            b.set_postfix_str(f"{i + 1} done")
            b.update(1)


def test_off_a_terminal_a_bar_writes_whole_lines_not_carriage_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    log = io.StringIO()  # a CI log: no terminal
    monkeypatch.setattr(sys, "stderr", log)
    _draw(500)
    lines = log.getvalue().splitlines()
    # within LOG_INTERVAL_S (30 s): the start and the end only, each a line of its own, the last postfix in the end
    assert "\r" not in log.getvalue() and len(lines) == 2, lines
    assert lines[0].startswith("generate:   0%|") and "0/500" in lines[0]
    assert lines[1].startswith("generate: 100%|") and "500/500" in lines[1] and "500 done" in lines[1]

    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)  # a long run: a line per interval, still no \r
    log.seek(0)
    log.truncate()
    _draw(3)
    assert "\r" not in log.getvalue() and len(log.getvalue().splitlines()) >= 3


def test_on_a_terminal_the_bar_is_live_and_disabled_draws_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    tty = _Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    _draw(5)
    assert tty.getvalue().count("\r") >= 3 and "/5 [" in tty.getvalue()  # redrawn in place, cleared at the end
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    with bar(5, "generate", "sample", enabled=False) as b:
        b.update(5)
    stage("evaluating", enabled=False)
    assert quiet.getvalue() == ""
    stage("demo [1/4] evaluating")
    assert quiet.getvalue() == "demo [1/4] evaluating\n"


@pytest.mark.parametrize("enabled", [True, False])
def test_a_gguf_conversion_says_what_it_does_when_progress_is_on(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 enabled: bool) -> None:
    """Off a terminal transformers' conversion bar is off, so a first run on a GGUF file showed nothing while it was
    converted (73 s at load 5 for SmolLM2-135M, a new user's first 'evalgate run' in a log): with progress on it
    says so in one line; under --json (progress off) and outside any progress block, nothing."""
    from evalgate.checkpoints.gguf import convert_gguf
    from evalgate.core.errors import BadInput

    monkeypatch.setenv("EVALGATE_MODELS", str(tmp_path / "models"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(60))  # the magic, then no valid header: the conversion fails at once (bad input)
    out = tmp_path / "models" / ("ab" * 8)
    capsys.readouterr()
    with progress_bars(enabled), pytest.raises(BadInput):
        convert_gguf(gguf, "blake3:" + "ab" * 32)
    said = f"converting {gguf} to an HF directory in {out} (once per file)\n"
    assert capsys.readouterr().err == (said if enabled else "")
    with pytest.raises(BadInput):
        convert_gguf(gguf, "blake3:" + "ab" * 32)  # a library call outside any progress block
    assert capsys.readouterr().err == ""
    assert not progress.stages_on()
