"""The shared click options (``evalgate/commands/options.py``): one declaration, the same flag everywhere."""

from __future__ import annotations

import click
from click.testing import CliRunner

from evalgate.cli import main

RUN_COMMANDS = ("run", "sweep", "watch", "preflight")


def _params(name: str) -> dict[str, click.Parameter]:
    cmd = main.commands[name]
    return {p.name: p for p in cmd.params if p.name}


def test_every_evaluating_command_has_the_same_run_options():
    for name in RUN_COMMANDS:
        ps = _params(name)
        for opt in ("backend", "actor", "device", "backend_option"):
            assert opt in ps, f"{name} lacks --{opt.replace('_', '-')}"
        assert ps["backend"].default == "hf"
        assert ps["backend_option"].multiple
        assert ps["device"].help == _params("run")["device"].help
        assert ps["backend_option"].help == _params("run")["backend_option"].help
    for name in ("run", "sweep", "watch", "parity"):
        seed = _params(name)["seed"]
        assert isinstance(seed.type, click.IntRange) and (seed.type.min, seed.type.max) == (0, 2**63 - 1)
    assert "seed" not in _params("preflight")  # preflight's samples come from --samples seeds of its own


def test_watch_and_preflight_now_take_backend_options_and_refuse_a_malformed_one(tmp_path):
    # before the shared options, watch and preflight had no --backend-option: a vllm watch could not set
    # tensor_parallel_size. A pair without '=' is refused (exit 2) before anything is read or watched.
    (tmp_path / "run").mkdir()
    r = CliRunner().invoke(main, ["watch", str(tmp_path / "run"), "--protocol", "p.yaml", "--split", "s",
                                  "--backend-option", "tensor_parallel_size"])
    assert r.exit_code == 2, r.output
    assert "'tensor_parallel_size' is not KEY=VALUE" in r.output
    r = CliRunner().invoke(main, ["preflight", "--protocol", "p.yaml", "--checkpoint", str(tmp_path), "--split",
                                  "s", "--backend-option", "=1"])
    assert r.exit_code == 2, r.output
    assert "is not KEY=VALUE" in r.output


def test_cli_module_is_the_group_only():
    # every command is defined in evalgate/commands/<area>.py; cli.py only attaches them
    import inspect

    import evalgate.cli as cli

    for name, cmd in main.commands.items():
        assert inspect.getmodule(cmd.callback).__name__.startswith("evalgate.commands."), name  # type: ignore
    assert not [n for n, v in vars(cli).items() if isinstance(v, click.Command) and v is not main]
