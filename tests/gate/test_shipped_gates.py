"""Every shipped gate file (gates/*.yaml, single gates and each suite member) is right for a checkpoint without a
training log: no rule fails as "not checkable" there. A rule that needs the log is off, accepted, or the file
requires a log signal explicitly (``guards.require``), so a log-less candidate fails for that stated reason.

Issue 46: once a not-checkable rule failed by default, gates/xstest-*.yaml and gates/safety-benign.yaml kept the
log-based rules' defaults and failed every supervised fine-tune without a log as "not checkable".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.diagnostics.guards import guard_seed
from evalgate.gate.decide import selection_rules
from evalgate.gate.policy import GatePolicy, load_policy
from evalgate.gate.results import CheckpointResult, RuleOutcome, SeedResult
from evalgate.gate.suite import is_suite, load_suite
from tests.conftest import REPO

VARIABLES = {"EVALGATE_DEMO_BASE": "/models/base.gguf", "EVALGATE_SAFETY_BASELINE": "/models/base",
             "EVALGATE_DEMO_PROXIES": "/proxies"}
SHIPPED = sorted((REPO / "gates").glob("*.yaml"))


def _policies(path: Path) -> list[GatePolicy]:
    if is_suite(path):
        return [m.policy for m in load_suite(path, VARIABLES).members]
    return [load_policy(path, VARIABLES)]


def _logless_seeds(policy: GatePolicy) -> list[SeedResult]:
    """Two training seeds whose checkpoints have no training log (what the gate builds when none is found: the
    guards' diagnosis None, no training reward, no triad step checked), each with a good best checkpoint."""
    seeds = []
    for k in (1, 2):
        ck = CheckpointResult(f"blake3:{k:064x}", f"/ckpt/seed-{k}/checkpoint-3", 3, "sft", f"run{k}", "complete",
                              0.5, 0.1, {})
        seeds.append(SeedResult(k, "sft", [ck], ck, ck, guards=guard_seed(None, policy.guards, [3], k)))
    return seeds


def _silent_failures(policy: GatePolicy) -> list[RuleOutcome]:
    return [r for r in selection_rules(policy, _logless_seeds(policy)) if not r.checkable and not r.passed]


def test_every_gate_file_is_found() -> None:
    names = {p.name for p in SHIPPED}
    assert {"xstest-safe.yaml", "xstest-unsafe.yaml", "safety-benign.yaml", "demo.yaml"} <= names, names


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_no_shipped_gate_fails_a_logless_checkpoint_as_not_checkable(path: Path) -> None:
    for policy in _policies(path):
        bad = _silent_failures(policy)
        assert not bad, f"{path.name} ({policy.name}): " + "; ".join(f"{r.rule}: {r.detail}" for r in bad)
        outcomes = {r.rule: r for r in selection_rules(policy, _logless_seeds(policy))}
        if "training_guards" in outcomes:  # left on only where the file requires a signal: it fails, and says why
            assert policy.guards.require, f"{path.name}: training_guards on without guards.require"
            tg = outcomes["training_guards"]
            assert tg.checkable and not tg.passed and "no training log" in tg.detail, tg.detail


def test_the_check_fails_a_file_that_keeps_the_log_rules_defaults(tmp_path: Path) -> None:
    """The check above can fail: xstest-safe.yaml with its two log-based rules at their defaults (as before issue 46)
    fails both as not checkable."""
    policy = load_policy(REPO / "gates" / "xstest-safe.yaml", VARIABLES)
    defaults = policy.model_copy(update={"rules": policy.rules.model_copy(update={"training_guards": True,
                                                                                  "reward_hacking": True})})
    assert sorted(r.rule for r in _silent_failures(defaults)) == ["reward_hacking", "training_guards"]
    accepted = defaults.model_copy(update={"rules": defaults.rules.model_copy(update={"accept_not_checkable": True})})
    assert _silent_failures(accepted) == []
