"""A tools section that the backend or the chat template cannot carry out is refused before the split is read:
exit 2, a message naming the field and the fix, and nothing logged, spent or created
(``evalgate.runner.agent.checks``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from evalgate.checkpoints.resolve import Checkpoint
from evalgate.core.errors import BadInput
from evalgate.protocol.freeze import freeze
from evalgate.runner.agent.checks import check_agentic_setup, template_reads_tools
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.splits import Policy, SplitManager, load_manifest, write_split
from evalgate.store import Store

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory

TOOLS_TEMPLATE = Path(__file__).parent / "agent_data" / "hermes_tools.jinja"
ITEMS = [{"id": "a", "prompt": "6*7?", "answer": "42"}]


def _protocol(tmp_path: Path, fmt: str, chat_template: str = "none", name: str = "") -> Path:
    name = name or f"chk-{fmt}"
    doc = {"name": name, "version": "1", "prompt": {"chat_template": chat_template, "template": "{{ prompt }}"},
           "sampling": {"max_tokens": 8}, "scorer": {"name": "exact", "options": {"answer_field": "answer"}},
           "extraction": {"rule": "gsm8k"}, "tools": {"format": fmt, "allowed": ["calculator"], "max_calls": 1}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc))
    freeze(p, Store)
    return p


def _budgeted_split() -> None:
    write_split("chk-split", "dev", ITEMS, {"source": "test"}, policy=Policy(max_reads=2, hard=True))


def _spent(store: Store) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]]]:
    """The split's access rows, the reads its budget counts, and every run."""
    m = load_manifest("chk-split")
    return store.access_rows("chk-split"), SplitManager(store).reads_in_window("chk-split", m.effective_policy()), \
        store.runs()


def _ckpt(tmp_path: Path) -> Checkpoint:
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    return Checkpoint(path=d, kind="hf", digest="0" * 64, model_dir=d)


def test_openai_format_on_the_hf_backend_is_refused_before_the_read(tmp_path: Path) -> None:
    """Before the fix the refusal came from the agent loop, after ``start`` had logged the read (one ``read`` row,
    one of the two budgeted reads spent, a failed run stored)."""
    proto = _protocol(tmp_path, "openai")
    _budgeted_split()
    store = Store()
    with pytest.raises(BadInput, match=r"tools.format: openai needs structured tool_calls.*not hf; use --backend "
                                       "openai") as e:
        evaluate(proto, _ckpt(tmp_path), "chk-split", RunOptions(backend="hf", progress=False), store)
    assert e.value.exit_code == 2 and str(proto) in e.value.message
    assert _spent(store) == ([], 0, [])


def test_openai_format_refusal_through_the_cli_exits_2_spending_nothing(tmp_path: Path) -> None:
    from evalgate.cli import main

    proto = _protocol(tmp_path, "openai")
    _budgeted_split()
    ckpt = _ckpt(tmp_path)
    (ckpt.model_dir / "config.json").write_text("{}")
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"w": np.zeros(1, np.float32)}, str(ckpt.model_dir / "model.safetensors"))  # a checkpoint it resolves
    r = CliRunner().invoke(main, ["run", "--protocol", str(proto), "--checkpoint", str(ckpt.model_dir),
                                  "--split", "chk-split", "--backend", "hf", "--json"])
    assert r.exit_code == 2, r.output
    assert "tools.format: openai needs structured tool_calls" in r.output
    assert _spent(Store()) == ([], 0, [])


def test_native_format_with_a_template_that_drops_tools_is_refused_before_the_read(tmp_path: Path) -> None:
    """A chat template that never reads ``tools`` would render the hermes protocol without its tools."""
    plain = tmp_path / "plain.jinja"
    plain.write_text("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    proto = _protocol(tmp_path, "hermes", str(plain))
    _budgeted_split()
    store = Store()
    with pytest.raises(BadInput, match="the protocol's chat template never reads 'tools'") as e:
        evaluate(proto, _ckpt(tmp_path), "chk-split", RunOptions(backend="replay", backend_options={
            "file": str(tmp_path / "none.jsonl")}, progress=False), store)
    assert e.value.exit_code == 2
    assert _spent(store) == ([], 0, [])


def test_a_template_that_renders_tools_and_the_openai_format_on_replay_pass_the_check(tmp_path: Path) -> None:
    from evalgate.protocol.spec import load_protocol

    check_agentic_setup(load_protocol(_protocol(tmp_path, "hermes", str(TOOLS_TEMPLATE))), "hf", tmp_path)
    check_agentic_setup(load_protocol(_protocol(tmp_path, "openai")), "replay", tmp_path)
    # chat_template: none: the prompt template describes the tools
    check_agentic_setup(load_protocol(_protocol(tmp_path, "hermes", name="plain")), "vllm", tmp_path)


def test_template_reads_tools() -> None:
    assert template_reads_tools(TOOLS_TEMPLATE.read_text())
    assert template_reads_tools("{% for t in tools %}{{ t }}{% endfor %}")
    assert not template_reads_tools("{% for m in messages %}{{ m.content }}{% endfor %}")
    # a template that sets its own ``tools`` does not read the caller's
    assert not template_reads_tools("{% set tools = [] %}{{ tools }}")
    with pytest.raises(BadInput, match="not a valid jinja template"):
        template_reads_tools("{% for m in messages %}")


def test_native_format_with_smollm2s_own_template_is_refused(tmp_path: Path, tiny_checkpoint: Path) -> None:
    """SmolLM2-135M-Instruct's chat template ignores ``tools`` (protocols/gsm8k-python-tool-native.yaml says to
    use the text protocol for it): ``chat_template: model`` with format hermes is refused before the read (the tiny
    checkpoint's folder holds SmolLM2's template)."""
    from evalgate.checkpoints.resolve import resolve_checkpoint

    proto = _protocol(tmp_path, "hermes", "model")
    _budgeted_split()
    store = Store()
    with pytest.raises(BadInput, match=f"the chat template of {tiny_checkpoint} never reads 'tools'"):
        evaluate(proto, resolve_checkpoint(tiny_checkpoint), "chk-split", RunOptions(progress=False), store)
    assert _spent(store) == ([], 0, [])


def test_parity_refuses_an_agentic_protocol_before_the_read(tmp_path: Path) -> None:
    """parity generates single-turn; before the fix it read the split (logged, counted) and compared first turns
    without running a tool."""
    from evalgate.runner.parity import parity

    proto = _protocol(tmp_path, "hermes")
    replay = tmp_path / "r.jsonl"
    replay.write_text('{"item_id": "a", "turn": 0, "text": "The answer is 42"}\n')
    _budgeted_split()
    store = Store()
    with pytest.raises(BadInput, match="offers tools .* which parity does not compare"):
        parity(proto, _ckpt(tmp_path), "chk-split", "replay", "replay", {"file": str(replay)}, {"file": str(replay)},
               store=store, progress=False)
    assert _spent(store) == ([], 0, [])
