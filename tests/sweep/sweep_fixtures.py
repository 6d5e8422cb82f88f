"""Shared pieces of the sweep tests: checkpoint folders made from a model directory, a sampled addition protocol, a
small split and replay options answering it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from evalgate.runner.plan import RunOptions
from evalgate.splits import write_split
from evalgate.store import Store
from tests.conftest import REPO


def make_checkpoints(root: Path, model_dir: Path, steps: list[int], run: str = "grpo", seed: int = 1) -> list[Path]:
    """``root/<run>/seed-<seed>/checkpoint-<step>`` folders holding the model's files (linked), each with its own
    ``config.json`` (a marker key added), so each is a distinct checkpoint identity (``dir_digest``) with the same
    weights."""
    out = []
    for step in steps:
        d = root / run / f"seed-{seed}" / f"checkpoint-{step}"
        d.mkdir(parents=True)
        for f in model_dir.iterdir():
            if f.name != "config.json":
                (d / f.name).symlink_to(f)
        config = json.loads((model_dir / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**config, "evalgate_test_step": step}))
        out.append(d)
    return out


def addition_protocol(home: Path, max_tokens: int = 6, n: int = 2) -> Path:
    """The addition protocol sampled (temperature 1, ``n`` samples, ``max_tokens``), frozen under ``home``."""
    from evalgate.protocol.freeze import freeze

    proto = yaml.safe_load((REPO / "protocols" / "addition.yaml").read_text())
    proto.update(name="sweep-addition", version="1")
    proto["sampling"].update(temperature=1.0, top_p=1.0, max_tokens=max_tokens, n=n, seed=7)
    path = home / "sweep-addition.yaml"
    path.write_text(yaml.safe_dump(proto))
    freeze(path, Store)
    return path


def addition_split(name: str, items: int, first: int = 0, tier: str = "dev") -> None:
    """A split of ``items`` two-digit additions from item ``first`` on (item ``a<i>``: ``i + 10`` plus ``2 * i``);
    splits holding the same items share their generations in the cache."""
    write_split(name, tier, [{"id": f"a{i}", "question": f"What is {i + 10} + {2 * i}?", "answer": str(3 * i + 10)}
                             for i in range(first, first + items)], {"source": "test"})


def replay_options(home: Path, items: int, delay_s: float, first: int = 0) -> RunOptions:
    """Run options for the ``replay`` backend answering ``addition_split``'s items ``a<first>``.. (the right sum for
    even ``i``, a wrong one for odd ``i``), each request taking ``delay_s`` wall seconds in the engine."""
    path = home / "replay.jsonl"
    path.write_text("".join(json.dumps({"item_id": f"a{i}", "turn": 0, "text": str(3 * i + 10 + i % 2)}) + "\n"
                            for i in range(first, first + items)))
    return RunOptions(backend="replay", backend_options={"file": str(path), "delay_s": delay_s}, progress=False)
