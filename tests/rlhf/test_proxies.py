"""The gate's proxy protocols (``proxy_protocols``, ``evalgate.gate.proxies``): an LLM judge and a reward model scored
on each seed's best checkpoint and the baseline on a dev-tier split, shown in the release report (HTML, JSON,
Markdown) as proxies that decide nothing; checked before any read.

No model: the policies' completions are replayed, the judge is the scripted stand-in of
tests/scoring/test_judge_scorer.py (it prefers the answer that is the right sum, a tie when both or neither are) and
the reward model a scripted one (reward +1 for the right sum, -1 otherwise), so every number below is known by hand.
The real SmolLM2 judge and the tiny trained reward model in a gate are in tests/rlhf/test_proxies_real.py.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.backends.base import BACKENDS, BackendEntry, HFOptions
from evalgate.checkpoints.resolve import Checkpoint
from evalgate.core.errors import BadInput, ProtocolDrift, RefusedByPolicy
from evalgate.demo.rlhf import proxy_lines
from evalgate.gate import load_policy, run_gate
from evalgate.gate.report.outputs import markdown_summary, render_html, report_stored, write_json
from evalgate.gate.results import BradleyTerry, BradleyTerryPlayer, ProxyEntry, ProxyScores
from evalgate.protocol.freeze import freeze
from evalgate.rlhf import judge_calls, reward
from evalgate.runner.evaluate import RunOptions, evaluate
from evalgate.runner.grant import _reserve_release_reads
from evalgate.splits import RELEASE_GATE, SplitManager, load_manifest, write_split
from evalgate.store import Store
from tests.scoring.test_judge_scorer import ChatTokenizer, ScriptedJudge

pytestmark = pytest.mark.usefixtures("memory_store")

JUDGE_DIGEST = "blake3:" + "1" * 64
RM_DIGEST = "blake3:" + "2" * 64
BASE, SEED, SEED2 = "blake3:" + "b" * 64, "blake3:" + "c" * 64, "blake3:" + "d" * 64
PAIRS = [(12, 30), (25, 17), (40, 44), (61, 19)]
ITEMS = [{"id": f"p{i}", "question": f"What is {a} + {b}?", "answer": str(a + b)} for i, (a, b) in enumerate(PAIRS)]
# proxy split: the base model answers item 0 right, the seed's best items 0-2
ANSWERS = {BASE: ["42", "I do not know", "It is 80.", "70"], SEED: ["42", "42", "84", "70"],
           SEED2: ["41", "42", "It is 80.", "70"]}  # a second seed (when asked for): item 0 wrong, item 1 right
PAIRWISE = "Q: {question}\n[A] {answer_a}\n[B] {answer_b}\nWhich is {rubric}? [[A]], [[B]] or [[C]] for a tie."


def _prefer_the_right_sum(prompt: str) -> str:
    a, b = map(int, re.search(r"What is (\d+) \+ (\d+)\?", prompt).groups())  # type: ignore[union-attr]
    right = [str(a + b) in re.search(rf"\[{side}\] (.*)", prompt).group(1) for side in "AB"]  # type: ignore[union-attr]
    return {(True, False): "[[A]]", (False, True): "[[B]]"}.get((right[0], right[1]), "[[C]]")


class ScriptedRM:
    """Reward +1 when the completion holds the right sum of the prompt's two numbers, -1 otherwise."""

    def rewards(self, pairs: list[tuple[str, str]]) -> list[float]:
        out = []
        for prompt, completion in pairs:
            a, b = map(int, re.findall(r"\d+", prompt))
            out.append(1.0 if str(a + b) in completion else -1.0)
        return out


@pytest.fixture
def proxies(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The scripted judge as backend ``hf`` (its checkpoint resolves to ``JUDGE_DIGEST``) and the scripted RM."""
    monkeypatch.setitem(BACKENDS, "hf", BackendEntry(HFOptions, ScriptedJudge, extra="hf", engine="json"))
    monkeypatch.setattr(ScriptedJudge, "asked", [])
    monkeypatch.setattr(ScriptedJudge, "verdict", staticmethod(_prefer_the_right_sum))

    def resolve(self: judge_calls.JudgeCalls) -> ChatTokenizer:
        self._model_dir = tmp_path
        return ChatTokenizer()

    monkeypatch.setattr(judge_calls.JudgeCalls, "_resolve", resolve)
    monkeypatch.setattr(reward, "load_reward_model", lambda ref, env: ScriptedRM())
    monkeypatch.setattr(reward, "load_rm_conversations", lambda ref, env: lambda p, c: f"{p}\n\n{c}")  # cache keys


def _protocol(tmp_path: Path, name: str, scorer: dict[str, Any]) -> Path:
    doc = {"name": name, "version": "1", "prompt": {"chat_template": "none", "template": "{{ question }}"},
           "sampling": {"temperature": 0.0, "max_tokens": 12, "n": 1, "seed": 0}, "pass_at_k": [1],
           "scorer": scorer, "extraction": {"rule": "last_number"}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    freeze(p, Store)
    return p


def _judge_protocol(tmp_path: Path) -> Path:
    return _protocol(tmp_path, "add-judge", {"name": "judge", "options": {
        "mode": "pairwise", "judge": {"backend": "hf", "checkpoint": "judge-model", "digest": JUDGE_DIGEST},
        "template": PAIRWISE, "rubric": "the right sum", "question_field": "question", "parse": r"\[\[([ABC])\]\]",
        "scale": None, "verdicts": {"A": "A", "B": "B", "C": "tie"}, "baseline": {"checkpoint": BASE},
        "sampling": {"temperature": 0.0, "max_tokens": 8, "seed": 0}}})


def _rm_protocol(tmp_path: Path) -> Path:
    return _protocol(tmp_path, "add-rm", {"name": "reward_model", "options": {
        "reward_model": {"checkpoint": "rm-model", "digest": RM_DIGEST}, "prompt_field": "question"}})


def _replay(tmp_path: Path, digest: str, split: str, texts: list[str]) -> RunOptions:
    f = tmp_path / f"{digest[-4:]}-{split}.jsonl"
    f.write_text("".join(json.dumps({"item_id": f"p{i}", "turn": 0, "text": t}) + "\n" for i, t in enumerate(texts)))
    return RunOptions(backend="replay", backend_options={"file": str(f)}, progress=False)


def _setup(tmp_path: Path, proxy_split: str = "add-proxy", seeds: int = 1) -> tuple[Path, dict[str, Checkpoint]]:
    """Splits, the gated protocol, a baseline and one seed's checkpoint with their selection and decision runs, the
    proxies' runs on ``add-proxy`` (baseline first), and a policy listing both proxies; returns the policy file."""
    for name, tier in (("add-dev", "dev"), ("add-proxy", "dev"), ("add-private", "private")):
        write_split(name, tier, ITEMS, {"source": "test"})
    gated = _protocol(tmp_path, "add", {"name": "exact"})
    judge, rm = _judge_protocol(tmp_path), _rm_protocol(tmp_path)
    store = Store()
    ckpts = {}
    for name, digest, seed in (("base", BASE, None), ("run-seed1/checkpoint-10", SEED, 1),
                               ("run-seed2/checkpoint-10", SEED2, 2))[:seeds + 1]:
        d = tmp_path / name
        d.mkdir(parents=True)
        ckpts[digest] = Checkpoint(d, "hf", digest, d, "run" if seed else None, seed, 10 if seed else None)
    grant = _reserve_release_reads("fixture", SplitManager(store), load_manifest("add-private"), "fixture",
                                   [{"detail": f"fixture read {i}"} for i in range(seeds + 1)], "refused")
    for digest, ck in ckpts.items():
        texts = ANSWERS[digest]
        evaluate(gated, ck, "add-dev", _replay(tmp_path, digest, "dev", texts), store)
        opts = _replay(tmp_path, digest, "private", texts)
        evaluate(gated, ck, "add-private", dataclasses.replace(opts, purpose=RELEASE_GATE, grant=grant), store)
        for proto in (judge, rm):
            evaluate(proto, ck, "add-proxy", _replay(tmp_path, digest, "proxy", texts), store)
    policy = {"name": "rlhf", "protocol": "add@1", "protocol_file": str(gated), "selection_split": "add-dev",
              "decision_split": "add-private", "backend": "replay", "bootstrap_resamples": 4000,
              "baseline": {"checkpoint": str(ckpts[BASE].path)},
              "rules": {"training_guards": False, "reward_hacking": False},
              "proxy_protocols": [{"protocol": "add-judge@1", "protocol_file": str(judge), "split": proxy_split},
                                  {"protocol": "add-rm@1", "protocol_file": str(rm), "split": proxy_split}]}
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path, ckpts


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_the_report_shows_the_judges_win_rate_and_the_rms_mean_score_per_checkpoint(
        tmp_path: Path, proxies: None) -> None:
    path, _ = _setup(tmp_path)
    store = Store()
    verdict = run_gate(load_policy(path), store, evaluate_decision=False)
    assert verdict.rules == [] and verdict.passed  # the policy sets no rule and the proxies add none
    assert all(isinstance(p, ProxyEntry) for p in verdict.proxies)
    judge, rm = (p.as_dict() for p in verdict.proxies)  # the document every report format renders
    assert (judge["protocol"], judge["scorer"], judge["split"]) == ("add-judge@1", "judge", "add-proxy")
    assert "bradley_terry" not in judge  # two checkpoints: the win rate says it all
    assert [(r["role"], r["train_seed"], r["step"], r["digest"]) for r in judge["checkpoints"]] == [
        ("baseline", None, None, BASE), ("seed", 1, 10, SEED)]
    assert [(r["samples"], r["by_status"]) for r in judge["checkpoints"] + rm["checkpoints"]] == [
        (4, {"judged": 4})] * 2 + [(4, {"scored": 4})] * 2
    base_j, seed_j = (r["judge"] for r in judge["checkpoints"])
    # the baseline against itself: every verdict a tie; no position bias to see, no decided verdict
    assert base_j["pairwise"]["win_rate"] == 0.5 and base_j["pairwise"]["position_flip_rate"] == 0.0
    assert (base_j["pairwise"]["low"], base_j["pairwise"]["high"]) == (0.5, 0.5)
    assert base_j["pairwise"]["first_position_rate"] is None
    # the seed against the baseline: item preferences 0.5 (both right), 1, 1 (only the seed right), 0.5 (neither);
    # a resample's mean is 0.5 + k/8, k ~ Binomial(4, 1/2) the draws of a 1; P(k = 0) = P(k = 4) = 1/16 > 2.5%, so
    # the 95% percentile interval is [0.5, 1.0]
    pw = seed_j["pairwise"]
    assert pw["win_rate"] == 0.75 and (pw["low"], pw["high"]) == (0.5, 1.0)
    assert (pw["wins"], pw["ties"], pw["losses"], pw["items"], pw["unparseable_items"]) == (4, 4, 0, 4, 0)
    assert pw["position_flip_rate"] == 0.0 and pw["first_position_rate"] == 0.5  # 2 of the 4 decided verdicts say A
    assert (seed_j["mode"], seed_j["judged"], seed_j["unparseable"]) == ("pairwise", 4, 0)
    assert seed_j["baseline"] == {"checkpoint": BASE}
    # the reward model: +1 for a right sum, -1 otherwise; mean over items, stderr sd/sqrt(4) with sd = 1 both times
    base_r, seed_r = rm["checkpoints"]
    assert base_r["reward_mean"] == pytest.approx(-0.5) and seed_r["reward_mean"] == pytest.approx(0.5)
    assert base_r["reward_mean_stderr"] == pytest.approx(0.5) and seed_r["reward_mean_stderr"] == pytest.approx(0.5)
    assert base_r["mean_score"] == pytest.approx((_sigmoid(1) + 3 * _sigmoid(-1)) / 4)
    assert seed_r["mean_score"] == pytest.approx((3 * _sigmoid(1) + _sigmoid(-1)) / 4)
    assert "judge" not in seed_r and "reward_mean" not in seed_j
    # each proxy is also listed in the calibration section: no rated sample, so not calibrated
    assert [(c.protocol, c.role, c.n_samples) for c in verdict.calibration] == [
        ("add-judge@1", "proxy", 0), ("add-rm@1", "proxy", 0)]

    md = markdown_summary(verdict)
    assert "Proxy scores (informational" in md
    assert ("| add-judge@1 (judge) | add-proxy | seed 1 best (step 10) | 0.750 ± 0.144 |  | 4 of 4 (0 unparseable) |  "
            "| 0.750 [0.500, 1.000] |") in md
    assert f"| add-rm@1 (reward_model) | add-proxy | baseline | {(_sigmoid(1) + 3 * _sigmoid(-1)) / 4:.3f} ± " in md
    assert "| -0.500 ± 0.500 |" in md
    html = render_html(verdict)
    section = html[html.index("Proxy scores (informational"):html.index("Calibration against people")]
    assert "add-judge@1 (judge) on add-proxy" in section and "add-rm@1 (reward_model) on add-proxy" in section
    assert "0.750 [0.500, 1.000]" in section and "(itself)" in section and "-0.500 ± 0.500" in section
    assert "4 of 4: " in section and "0 unparseable" in section
    # what make demo prints of them (stderr of the sigmoids {0.731, 0.269 x 3}: sd 0.231 over 4 items = 0.116)
    assert proxy_lines(verdict.as_dict()["proxies"])[2:5] == [
        "    seed 1 best (step 10): win rate vs base 0.750 [0.500, 1.000], position-flip rate 0.000; 4 of 4 answers "
        "judged (0 verdicts unparseable, 0 answers cut at max_tokens)",
        "  proxy add-rm@1 (reward_model, add-proxy; informational, decides nothing):",
        f"    base model: mean score {(_sigmoid(1) + 3 * _sigmoid(-1)) / 4:.3f} ± 0.116, mean reward -0.500 ± 0.500"]
    doc = json.loads(write_json(verdict, tmp_path / "v.json").read_text())
    assert doc["proxies"][0]["checkpoints"][1]["judge"]["pairwise"]["win_rate"] == 0.75
    # the LC win rate stands with its standard error, and AlpacaEval's extreme-change warning shows where it fires
    # (issue 46: an LC rate far from the raw one passed silently): here the seed's wins are where its answers are
    # longer, the LC rate is near 0.5, under min(0.75 - 0.75 / 4, 0.75 - 0.10) = 0.5625, so the warning fires
    lc = f"{pw['lc_win_rate']:.3f} ± {pw['lc_standard_error']:.3f}"
    assert pw["lc_win_rate"] < 0.5625 and pw["lc_extreme_change"] is True
    assert f"| {lc} (far from the raw rate) |" in md
    assert "far from the raw rate (AlpacaEval's extreme-change warning)" in section
    entry, (base_row, seed_row) = verdict.proxies[0], verdict.proxies[0].checkpoints
    judged = seed_row.scores.judge
    assert judged is not None and judged.pairwise is not None and judged.pairwise.lc_extreme_change is True
    calm = judged.model_copy(update={"pairwise": judged.pairwise.model_copy(update={"lc_extreme_change": False})})
    calm_row = dataclasses.replace(seed_row, scores=seed_row.scores.model_copy(update={"judge": calm}))
    quiet = [dataclasses.replace(entry, checkpoints=[base_row, calm_row]), *verdict.proxies[1:]]
    shown = dataclasses.replace(verdict, proxies=quiet)
    assert f"| {lc} |" in markdown_summary(shown) and "far from the raw rate" not in render_html(shown)
    # the stored verdict renders the same section again, reading no split
    again = report_stored(verdict.gate_id or "", store, {"markdown": tmp_path / "again.md"}).verdict
    assert again.proxies == verdict.proxies
    # the stored proxy runs were shown through logged reads of their dev split, one per checkpoint and proxy
    rows = [r for r in store.access_rows("add-proxy") if r.purpose == "gate-proxy"]
    assert len(rows) == 4 and all(r.outcome == "read" and r.cached for r in rows)


def test_three_checkpoints_judged_pairwise_get_bradley_terry_ratings_in_every_format(tmp_path: Path,
                                                                                   proxies: None) -> None:
    """Issue 46: more than two checkpoints compared pairwise (the baseline and two seeds' best, each judged against
    the baseline) get Bradley-Terry ratings, the baseline at 1000. By hand: seed 1's items are ties, wins, wins, ties
    (8 games: 4 wins, 4 ties: 0.75), seed 2's a loss, a win, a tie, a tie in both orders (0.5); each rating puts the
    fitted win rate at that share: 1000 + 400 log10(0.75 / 0.25) = 1190.85 and 1000."""
    path, _ = _setup(tmp_path, seeds=2)
    store = Store()
    verdict = run_gate(load_policy(path), store, evaluate_decision=False)
    judge, rm = (p.as_dict() for p in verdict.proxies)
    # a reward model compares nothing pairwise
    assert verdict.proxies[1].bradley_terry is None and "bradley_terry" not in rm
    bt = judge["bradley_terry"]
    typed = verdict.proxies[0].bradley_terry
    assert isinstance(typed, BradleyTerry) and (typed.anchor, typed.games) == ("baseline", 16)
    assert typed.players[0] == BradleyTerryPlayer("seed 1 best (step 10)", typed.players[0].rating,
                                                  typed.players[0].low, typed.players[0].high,
                                                  typed.players[0].win_rate_vs_anchor, 8, None, "seed", 1, 10,
                                                  typed.players[0].run_id)
    assert (bt["anchor"], bt["anchor_rating"], bt["games"], bt["confidence"]) == ("baseline", 1000.0, 16, 0.95)
    by = {p["player"]: p for p in bt["players"]}
    assert [p["player"] for p in bt["players"]] == ["seed 1 best (step 10)", "baseline", "seed 2 best (step 10)"]
    s1, s2, base = by["seed 1 best (step 10)"], by["seed 2 best (step 10)"], by["baseline"]
    assert s1["rating"] == pytest.approx(1000 + 400 * math.log10(3), abs=1e-6)
    assert s2["rating"] == pytest.approx(1000.0, abs=1e-6) and base["rating"] == 1000.0
    assert (s1["win_rate_vs_anchor"], s2["win_rate_vs_anchor"]) == pytest.approx((0.75, 0.5))
    assert [(p["role"], p["train_seed"], p["games"]) for p in (s1, s2, base)] == [("seed", 1, 8), ("seed", 2, 8),
                                                                                   ("baseline", None, 16)]
    assert (base["low"], base["high"]) == (1000.0, 1000.0)
    assert s1["low"] < s1["rating"] < s1["high"] and s2["low"] < s2["rating"] < s2["high"]
    # seed 1's fitted win rate is its judge win rate: only games against the baseline
    assert s1["win_rate_vs_anchor"] == pytest.approx(judge["checkpoints"][1]["judge"]["pairwise"]["win_rate"])
    md = markdown_summary(verdict)
    assert "add-judge@1: Bradley-Terry ratings (Elo-like scale, baseline = 1000; 95% bootstrap CI over 16 games" in md
    assert f"| seed 1 best (step 10) | 1190.8 [{s1['low']:.1f}, {s1['high']:.1f}] | 0.750 | 8 |" in md
    html = render_html(verdict)
    section = html[html.index("Proxy scores (informational"):html.index("Calibration against people")]
    assert "Bradley-Terry ratings (baseline = 1000)" in section
    assert f"<td>seed 1 best (step 10)</td><td class=\"num\">1190.8 [{s1['low']:.1f}, {s1['high']:.1f}]</td>" in section
    doc = json.loads(write_json(verdict, tmp_path / "v.json").read_text())
    assert doc["proxies"][0]["bradley_terry"] == bt


def test_the_mean_score_column_is_the_judges_preference_mean(tmp_path: Path, proxies: None) -> None:
    # the judge's sample score is the item preference, so its run's mean_score is the win rate when nothing is
    # unparseable: (0.5 + 1 + 1 + 0.5) / 4, with stderr sd/sqrt(4), sd = sqrt(4 * 0.25^2 / 3)
    path, _ = _setup(tmp_path)
    seed = run_gate(load_policy(path), Store(), evaluate_decision=False).proxies[0].checkpoints[1]
    assert isinstance(seed.scores, ProxyScores) and seed.scores.mean_score == 0.75
    assert seed.scores.mean_score_stderr == pytest.approx(math.sqrt(0.25 / 3) / 2)


def _private_reads(store: Store) -> int:
    return sum(1 for r in store.access_rows("add-private") if r.purpose == RELEASE_GATE
               and r.outcome == "read")


def test_the_markdown_table_shows_a_pointwise_judges_judged_count_and_mean_rating() -> None:
    """RLHF.md: per proxy and checkpoint the judged and unparseable counts and, pointwise, the mean rating; the
    Markdown table showed neither (only 'unparseable'), so a judge that judged none of 8 answers (all cut at
    max_tokens) read as a mean score of 0.000 with 0 unparseable (what a new user saw)."""
    from evalgate.gate.proxies import proxy_row
    from evalgate.gate.report.outputs import _proxy_lines

    def row(judged: int, unparseable: int, rating: float | None) -> dict[str, Any]:
        judge = {"mode": "pointwise", "judged": judged, "unparseable": unparseable, "baseline": None,
                 "mean_rating": rating, "scale": [1, 10]}
        return {"role": "baseline", "train_seed": None, "step": None,
                **proxy_row({"mean_score": 0.5, "mean_score_stderr": 0.1, "judge": judge},
                            {"samples": 8, "by_status": {}})}

    lines = _proxy_lines([{"protocol": "j@1", "scorer": "judge", "split": "d",
                           "checkpoints": [row(5, 1, 6.25), row(0, 0, None)]}])
    assert lines[3].count("|") == lines[4].count("|") == lines[5].count("|")  # the header, its rule and a row agree
    assert lines[5] == ("| j@1 (judge) | d | baseline | 0.500 ± 0.100 |  | 5 of 8 (1 unparseable) | 6.250 on 1-10 "
                        "|  |  |  |")
    assert lines[6] == "| j@1 (judge) | d | baseline | 0.500 ± 0.100 |  | 0 of 8 (0 unparseable) |  |  |  |  |"


def test_a_proxy_on_a_private_split_is_refused_before_any_read(tmp_path: Path, proxies: None) -> None:
    path, _ = _setup(tmp_path, proxy_split="add-private")
    store = Store()
    before = _private_reads(store)
    with pytest.raises(RefusedByPolicy, match="split add-private is tier private; a proxy runs on a dev-tier split"):
        run_gate(load_policy(path), store, evaluate_decision=False)
    assert _private_reads(store) == before


def test_a_proxy_without_a_stored_run_stops_the_gate_before_the_decision_reads(tmp_path: Path,
                                                                                proxies: None) -> None:
    path, _ = _setup(tmp_path)
    write_split("add-proxy-2", "dev", ITEMS[:2], {"source": "test"})  # nothing evaluated on it
    doc = yaml.safe_load(path.read_text())
    doc["proxy_protocols"][1]["split"] = "add-proxy-2"
    path.write_text(yaml.safe_dump(doc))
    store = Store()
    before = _private_reads(store)
    with pytest.raises(BadInput, match=r"no complete run of .*base under proxy protocol add-rm@1 on add-proxy-2"):
        run_gate(load_policy(path), store, evaluate_decision=False)
    assert _private_reads(store) == before


@pytest.mark.parametrize(("entry", "error", "message"), [
    ({"protocol": "add@1"}, BadInput, r"proxy_protocols: entry 0: add@1 is the gated protocol"),
    ({"protocol": "add-rm@1", "sample": 3}, BadInput, r"unknown key 'sample'"),
    ({"protocol": "add-rm"}, BadInput, r"proxy_protocols.0.protocol: 'add-rm' is not name@version"),
])
def test_a_bad_proxy_entry_is_refused_at_load_with_its_line(tmp_path: Path, entry: dict[str, Any],
                                                             error: type[Exception], message: str) -> None:
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump({"name": "g", "protocol": "add@1", "selection_split": "d", "decision_split": "p",
                                    "baseline": {"value": 0.5}, "proxy_protocols": [entry]}, sort_keys=False))
    with pytest.raises(error, match=message) as e:
        load_policy(path)
    assert "gate.yaml:" in str(e.value)


def test_proxy_files_default_beside_the_gated_protocol_and_expand_variables(tmp_path: Path) -> None:
    (tmp_path / "gates").mkdir()
    path = tmp_path / "gates" / "g.yaml"
    path.write_text(yaml.safe_dump({"name": "g", "protocol": "add@1", "selection_split": "d", "decision_split": "p",
                                    "baseline": {"value": 0.5}, "proxy_protocols": [
                                        {"protocol": "add-judge@1"},
                                        {"protocol": "add-rm@2", "protocol_file": "$PROXIES/rm.yaml"}]}))
    p = load_policy(path, {"PROXIES": "/work/proxies"})
    assert [(x.protocol_file, x.split) for x in p.proxy_protocols] == [
        (str(tmp_path / "protocols" / "add-judge.yaml"), None), ("/work/proxies/rm.yaml", None)]


def test_a_verified_scorer_or_a_drifted_proxy_is_refused_before_any_read(tmp_path: Path, proxies: None) -> None:
    path, _ = _setup(tmp_path)
    store = Store()
    before = _private_reads(store)
    doc = yaml.safe_load(path.read_text())
    exact = _protocol(tmp_path, "add-exact", {"name": "exact"})
    doc["proxy_protocols"][1] = {"protocol": "add-exact@1", "protocol_file": str(exact)}
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(BadInput, match="its scorer exact is no proxy for people"):
        run_gate(load_policy(path), store, evaluate_decision=False)
    judge = Path(doc["proxy_protocols"][0]["protocol_file"])
    judge.write_text(judge.read_text().replace("the right sum", "brevity"))
    with pytest.raises(ProtocolDrift, match="rubric"):
        run_gate(load_policy(path), store, evaluate_decision=False)
    assert _private_reads(store) == before
