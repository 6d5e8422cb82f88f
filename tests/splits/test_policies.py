"""Each tier's policy (allowed, warned, refused, override logged), budget windows, manifest overrides that may only
tighten, the actor and the CI marker."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from evalgate.access import log as accesslog
from evalgate.access.log import _CI_VARS, ci_marker
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.splits import (
    Policy,
    SplitManager,
    actor_name,
    load_manifest,
    splits_dir,
    write_split,
)
from evalgate.splits.guard import ReadRuling, rule_read
from evalgate.store import Store
from evalgate.store.access import CONTAMINATION_CHECKS, READS, Counted
from evalgate.views.audit import verify_chain

ITEMS = [{"id": f"q{i}", "question": f"what is {i} + {i}?"} for i in range(3)]


@pytest.fixture(autouse=True)
def no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in _CI_VARS:  # the suite itself may run in CI
        monkeypatch.delenv(var, raising=False)


def split(name: str, tier: str, policy: Policy | None = None) -> str:
    write_split(name, tier, ITEMS, {"source": "test"}, policy=policy)
    return name


def outcomes(store: Store, name: str) -> list[str]:
    return [r.outcome for r in store.access_rows(name)]


@pytest.mark.usefixtures("memory_store")
@pytest.mark.parametrize("tier", ["smoke", "dev", "human-audit"])
def test_free_tiers_read_freely_and_log_every_read_with_its_purpose(tier: str) -> None:
    store = Store()
    mgr = SplitManager(store)
    split("s", tier)
    for purpose in ("debug", "tuning", "anything"):
        opened = mgr.open("s", purpose, "alice")
        assert len(opened.items) == 3 and opened.warnings == []
    rows = store.access_rows("s")
    assert [(r.purpose, r.outcome, r.tier, r.actor) for r in rows] == [
        ("debug", "read", tier, "alice"), ("tuning", "read", tier, "alice"), ("anything", "read", tier, "alice")]


@pytest.mark.usefixtures("memory_store")
def test_public_soft_budget_warns_from_80_percent_refuses_beyond_and_logs_overrides() -> None:
    store = Store()
    mgr = SplitManager(store)
    split("pub", "public")  # default: 20 reads / 30 days, warn from 80 % (read 16)
    warned = [bool(mgr.open("pub", "trend", "alice").warnings) for _ in range(20)]
    assert warned == [False] * 15 + [True] * 5
    with pytest.raises(RefusedByPolicy, match=r"budget of 20 reads per 30 days \(20 used\).*--override-reason"):
        mgr.open("pub", "trend", "alice")
    # What 'evalgate run --override-reason' does: check, read, log_read with the reason.
    m, warnings = mgr.check("pub", "trend", "bob", override_reason="re-run after the tokenizer fix")
    assert "override" in warnings[0]
    mgr.read(m)
    mgr.log_read(m, "bob", "trend", cached=False, override_reason="re-run after the tokenizer fix")
    rows = store.access_rows("pub")
    assert outcomes(store, "pub") == ["read"] * 20 + ["refused", "override"]
    assert rows[-1].detail == "re-run after the tokenizer fix" and rows[-1].actor == "bob"
    assert "budget of 20" in rows[-2].detail
    assert verify_chain(store)["ok"]


@pytest.mark.usefixtures("memory_store")
def test_an_override_reason_within_budget_is_a_plain_read() -> None:
    store = Store()
    split("pub", "public")
    SplitManager(store).open("pub", "trend", "alice", override_reason="not needed")
    assert outcomes(store, "pub") == ["read"]


@pytest.mark.usefixtures("memory_store")
def test_private_only_release_gate_and_a_hard_budget_no_override() -> None:
    store = Store()
    mgr = SplitManager(store)
    split("priv", "private")  # default: purpose release-gate only, 4 reads / 30 days, hard
    with pytest.raises(RefusedByPolicy, match="only for purpose release-gate, not 'tuning'"):
        mgr.open("priv", "tuning", "alice")
    warned = [bool(mgr.open("priv", "release-gate", "ci-bot").warnings) for _ in range(4)]
    assert warned == [False, False, False, True]  # 4 >= 0.8 * 4 = 3.2: the last read warns
    with pytest.raises(RefusedByPolicy, match="wait for the window to pass"):
        mgr.open("priv", "release-gate", "ci-bot", override_reason="please")
    assert outcomes(store, "priv") == ["refused"] + ["read"] * 4 + ["refused"]


@pytest.mark.usefixtures("memory_store")
def test_budget_window_counts_only_reads_inside_it() -> None:
    t = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    split("priv", "private")

    def backdated_reads(days: float, n: int) -> None:  # rows written through the store API on a shifted clock
        store = Store(clock=lambda: t - timedelta(days=days))
        for _ in range(n):
            accesslog.append(store, accesslog.entry(actor="ci-bot", split="priv", tier="private",
                                                    purpose="release-gate", outcome="read"))

    policy = load_manifest("priv").effective_policy()
    mgr = SplitManager(Store(clock=lambda: t))
    backdated_reads(31, 4)  # outside the 30-day window
    assert mgr.reads_in_window("priv", policy) == 0
    backdated_reads(29, 3)  # inside
    assert mgr.reads_in_window("priv", policy) == 3
    assert mgr.open("priv", "release-gate", "ci-bot").warnings  # read 4 of 4
    with pytest.raises(RefusedByPolicy, match=r"\(4 used\)"):
        mgr.open("priv", "release-gate", "ci-bot")
    # Two days later the three reads from 29 days ago have left the window: one read left in it.
    later = SplitManager(Store(clock=lambda: t + timedelta(days=2)))
    assert later.reads_in_window("priv", policy) == 1
    assert later.open("priv", "release-gate", "ci-bot").items
    assert verify_chain(Store())["ok"]


@pytest.mark.usefixtures("memory_store")
def test_manifest_overrides_may_tighten() -> None:
    store = Store()
    mgr = SplitManager(store)
    split("priv", "private", Policy(max_reads=2))  # only max_reads set: purposes and hard stay the tier's
    p = load_manifest("priv").effective_policy()
    assert (p.max_reads, p.purposes, p.hard, p.window_days) == (2, ["release-gate"], True, 30)
    mgr.open("priv", "release-gate", "a")
    mgr.open("priv", "release-gate", "a")
    with pytest.raises(RefusedByPolicy, match="budget of 2"):
        mgr.open("priv", "release-gate", "a")
    split("dev1", "dev", Policy(purposes=["tuning"], max_reads=1, hard=True))
    with pytest.raises(RefusedByPolicy, match="only for purpose tuning"):
        mgr.open("dev1", "debug", "a")
    mgr.open("dev1", "tuning", "a")
    with pytest.raises(RefusedByPolicy, match="budget of 1"):
        mgr.open("dev1", "tuning", "a", override_reason="hard budgets ignore this")


@pytest.mark.usefixtures("memory_store")
@pytest.mark.parametrize(("tier", "override", "field"), [
    ("public", {"max_reads": 50}, "max_reads"),
    ("public", {"window_days": 7}, "window_days"),
    ("public", {"warn_at": 0.95}, "warn_at"),
    ("private", {"purposes": ["release-gate", "tuning"]}, "purposes"),
    ("private", {"hard": False}, "hard"),
])
def test_manifest_overrides_may_not_loosen(tier: str, override: dict, field: str) -> None:
    split("s", tier)
    path = splits_dir() / "s.yaml"
    doc = yaml.safe_load(path.read_text())
    path.write_text(yaml.safe_dump({**doc, "policy": override}))
    with pytest.raises(BadInput, match=f"loosens the {tier} tier's default in {field}"):
        SplitManager(Store()).open("s", "release-gate", "a")


@pytest.mark.usefixtures("memory_store")
def test_a_private_manifest_edited_to_another_tier_is_refused() -> None:
    split("priv", "private")
    path = splits_dir() / "priv.yaml"
    path.write_text(path.read_text().replace("tier: private", "tier: dev"))
    with pytest.raises(BadInput, match="private splits, and only they, are encrypted"):
        SplitManager(Store()).open("priv", "tuning", "a")


def test_private_reads_without_or_with_a_wrong_key_are_refused_and_logged(home: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from cryptography.fernet import Fernet

    store = Store()
    split("priv", "private")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "nowhere"))  # a store made now has no key
    with pytest.raises(RefusedByPolicy, match="no key was found: set EVALGATE_PRIVATE_KEY"):
        SplitManager(Store()).open("priv", "release-gate", "a")
    monkeypatch.setenv("EVALGATE_PRIVATE_KEY", Fernet.generate_key().decode())
    with pytest.raises(RefusedByPolicy, match="does not decrypt"):
        SplitManager(Store()).open("priv", "release-gate", "a")
    assert outcomes(store, "priv")[0] == "refused"


def test_actor_flag_then_env_then_os_user(monkeypatch: pytest.MonkeyPatch) -> None:
    import getpass

    monkeypatch.setenv("EVALGATE_ACTOR", "from-env")
    assert actor_name("from-flag") == "from-flag"
    assert actor_name(None) == "from-env"
    monkeypatch.delenv("EVALGATE_ACTOR")
    assert actor_name(None) == getpass.getuser()


def test_ci_runs_are_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store()
    split("s", "dev")
    assert ci_marker() is None
    SplitManager(store).open("s", "tuning", "alice")
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # GitHub sets both; the specific one wins
    assert ci_marker() == "github_actions"
    SplitManager(store).open("s", "tuning", "ci-bot")
    monkeypatch.delenv("GITHUB_ACTIONS")
    assert ci_marker() == "ci"
    monkeypatch.setenv("CI", "false")
    assert ci_marker() is None
    assert [r.ci for r in store.access_rows("s")] == [None, "github_actions"]


@pytest.mark.usefixtures("memory_store")
def test_splits_add_cli_policy_options_and_bad_lines(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from evalgate.cli import main

    f = tmp_path / "items.jsonl"
    f.write_text("".join(f'{{"id": "{it["id"]}", "question": "{it["question"]}"}}\n' for it in ITEMS))
    r = CliRunner().invoke(main, ["splits", "add", "pub", "--tier", "public", "--file", str(f), "--max-reads", "5"])
    assert r.exit_code == 0, r.output
    p = load_manifest("pub").effective_policy()
    assert (p.max_reads, p.hard, p.window_days) == (5, False, 30)
    r = CliRunner().invoke(main, ["splits", "add", "pub2", "--tier", "public", "--file", str(f),
                                  "--max-reads", "50"])
    assert r.exit_code == 2 and "loosens the public tier's default in max_reads" in r.stderr
    assert not (splits_dir() / "pub2.yaml").exists()
    f.write_text('{"id": "a"}\n{"id": "b", }\n')
    r = CliRunner().invoke(main, ["splits", "add", "bad", "--tier", "dev", "--file", str(f)])
    assert r.exit_code == 2 and f"{f}:2: not valid JSON" in r.stderr


@pytest.mark.usefixtures("memory_store")
def test_a_changed_data_file_is_refused_and_the_refusal_logged() -> None:
    store = Store()
    split("s", "dev")
    f = splits_dir() / "s.jsonl"
    f.write_bytes(f.read_bytes().replace(b"what is 1", b"what is 7"))
    with pytest.raises(BadInput, match="changed since its manifest was written"):
        SplitManager(store).open("s", "tuning", "alice")
    assert [(r.outcome, r.actor) for r in store.access_rows("s")] == [("refused", "alice")]


@pytest.mark.usefixtures("memory_store")
def test_refusal_ahead_names_what_check_would_refuse_and_logs_nothing() -> None:
    """``SplitManager.refusal_ahead`` (the runner asks it before verifying a checkpoint byte by byte): a purpose the
    tier refuses and a spent hard budget, as ``check`` words them; a soft budget spent, a budget with room and
    the contamination purpose are left to ``check``; nothing is logged either way."""
    store = Store()
    mgr = SplitManager(store)
    split("dev1", "dev", Policy(purposes=["tuning"], max_reads=1, hard=True))
    split("soft", "public", Policy(max_reads=1, hard=False))
    before = len(store.access_rows())
    assert mgr.refusal_ahead("dev1", "tuning") is None  # room left
    assert "only for purpose tuning" in (mgr.refusal_ahead("dev1", "debug") or "")
    mgr.open("dev1", "tuning", "a")
    mgr.open("soft", "evaluation", "a")
    rows = len(store.access_rows())
    assert "budget of 1" in (mgr.refusal_ahead("dev1", "tuning") or "")
    assert mgr.refusal_ahead("soft", "evaluation") is None  # an override may still admit it: check decides
    assert mgr.refusal_ahead("dev1", "contamination-check") is None
    assert len(store.access_rows()) == rows == before + 2


@pytest.mark.usefixtures("memory_store")
def test_rule_read_is_the_one_ruling_and_counts_only_when_a_budget_applies() -> None:
    """``rule_read`` decides alone (``check`` and ``refusal_ahead`` both call it): counts come from the caller and
    are asked for only when a budget applies; a spent soft budget is refused as overridable and admitted under an
    override reason; the reserved read and an unbudgeted tier are never counted."""
    asked: list[object] = []

    def used(n: int) -> Callable[[Counted], int]:
        def count(counted: Counted) -> int:
            asked.append(counted)
            return n
        return count

    soft = load_manifest(split("soft", "public", Policy(max_reads=5, hard=False)))
    hard = load_manifest(split("hard", "dev", Policy(purposes=["tuning"], max_reads=5, hard=True)))
    audit = load_manifest(split("audit", "human-audit", Policy(max_contamination_checks=2)))
    sp, hp, ap = soft.effective_policy(), hard.effective_policy(), audit.effective_policy()
    assert rule_read(soft, sp, "evaluation", used(2)) == ReadRuling()  # read 3 of 5: below 0.8 * 5
    warned = rule_read(soft, sp, "evaluation", used(3))
    assert warned.warnings == ("split soft: this is read 4 of 5 allowed per 30 days",)
    spent = rule_read(soft, sp, "evaluation", used(5))
    assert spent.overridable and "budget of 5 reads per 30 days (5 used)" in (spent.refusal or "")
    over = rule_read(soft, sp, "evaluation", used(5), override_reason="rerun")
    assert over.refusal is None and over.overridden and "override ('rerun'" in over.warnings[0]
    assert asked == [READS] * 4
    asked.clear()
    assert "only for purpose tuning" in (rule_read(hard, hp, "debug", used(0)).refusal or "")
    assert rule_read(hard, hp, "tuning", used(9), reserved=True) == ReadRuling()
    assert asked == []  # a refused purpose and a reserved read are not counted
    gone = rule_read(hard, hp, "tuning", used(5))
    assert gone.refusal and not gone.overridable and "wait for the window" in gone.refusal
    assert "reserved for 'evalgate splits contamination'" in (rule_read(audit, ap, "contamination-check",
                                                                         used(0)).refusal or "")
    asked.clear()
    checks = rule_read(audit, ap, "contamination-check", used(2), contamination_check=True)
    assert "budget of 2 contamination checks" in (checks.refusal or "") and asked == [CONTAMINATION_CHECKS]
