"""Proxy scores in the release report: what an LLM judge and a reward model say about the checkpoints the gate
decides on, shown beside the verified metric and never deciding (``GatePolicy.proxy_protocols``).

RLHF is trained against a proxy that keeps improving after true preference has turned down (Gao et al. 2022,
"Scaling Laws for Reward Model Overoptimization"); the RL-debugging chapter's rule is that an evaluation never looks
at the proxy alone, nor ignores it. So a policy may list proxy protocols (scorers whose registry entry sets
``ScorerEntry.proxy``: ``judge``, ``reward_model``) and the gate evaluates each on every seed's best checkpoint and on
the baseline checkpoint (first: a pairwise judge's ``baseline.checkpoint`` reads the baseline's stored completions
under the same protocol, so the baseline's own run compares it with itself), on a dev-tier split, with purpose
``gate-proxy``. That happens before any decision read, so a proxy that cannot run stops the gate having spent nothing
private. A complete run of the same checkpoint digest, protocol hash, split content and backend (and, when the gate
evaluates, generation settings) already in the store is taken instead, its read logged as cached; a gate that
evaluates nothing (``evaluate_decision=False``) takes stored runs only.

A proxy adds no rule. Its numbers are informational: a judge or reward metric decides a release only as the gated
protocol, where ``rules.min_proxy_agreement`` first asks for its agreement with people
(``evalgate.rlhf.calibration``, whose section lists the proxies here too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalgate.core.enums import Tier
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.gate.results import ProxyEntry
from evalgate.splits.guard import SplitManager
from evalgate.store import RunRow, Store

if TYPE_CHECKING:
    from evalgate.gate.policy import GatePolicy, ProxyProtocol

PROXY_PURPOSE = "gate-proxy"
"""The purpose of a proxy protocol's reads (logged on its dev-tier split)."""

_PAIRWISE_KEYS = ("win_rate", "low", "high", "lc_win_rate", "lc_standard_error", "lc_extreme_change",
                  "position_flip_rate", "first_position_rate", "items", "parsed_items", "unparseable_items",
                  "unparseable_as", "wins", "ties", "losses")


@dataclass(frozen=True)
class CheckedProxy:
    """A proxy protocol after ``check_proxies``: the policy's entry, its loaded protocol (``LoadedProtocol``), its
    split's manifest and its scorer's name."""

    entry: ProxyProtocol
    protocol: Any
    manifest: Any
    scorer: str


@dataclass(frozen=True)
class Target:
    """A checkpoint the proxies score: ``role`` ``baseline`` or ``seed`` (a seed's best), its path and digest, and
    for a seed its training run, seed and step."""

    role: str
    path: str
    digest: str | None
    train_run: str | None = None
    train_seed: int | None = None
    step: int | None = None


def check_proxies(policy: GatePolicy, manager: SplitManager) -> list[CheckedProxy]:
    """Check every proxy protocol before the gate reads anything: its file exists, is the protocol the policy
    names and matches its lock; its scorer is a proxy (``ScorerEntry.proxy``); its split is dev tier.

    Raises:
        BadInput: a missing file, another ``name@version``, a scorer that is no proxy, an unknown split.
        ProtocolDrift: the file no longer matches its lock.
        RefusedByPolicy: the split is not dev tier.
    """
    from pathlib import Path

    from evalgate.protocol.spec import load_protocol, verify
    from evalgate.scoring.base import SCORERS

    out = []
    for p in policy.proxy_protocols:
        where = f"gate policy {policy.name}: proxy_protocols entry {p.protocol}"
        path = p.protocol_file or ""
        if not Path(path).is_file():
            raise BadInput(f"{where}: protocol file {path} not found; set its protocol_file")
        lp = load_protocol(path)
        if lp.ref != p.protocol:
            raise BadInput(f"{where}: its protocol_file {path} is {lp.ref}; make them agree")
        scorer = lp.spec.scorer.name
        entry = SCORERS.require(scorer, f" in protocol {path}")
        if not entry.proxy:
            raise BadInput(f"{where}: its scorer {scorer} is no proxy for people (a verified score); gate on it, or "
                           "list only judge or reward-model protocols here")
        verify(lp)
        m = manager.manifest(p.split or policy.selection_split)
        if m.tier != Tier.DEV:
            raise RefusedByPolicy(f"{where}: split {m.name} is tier {m.tier}; a proxy runs on a dev-tier split only "
                                  "(a read of a public or private split spends its budget on a number that decides "
                                  "nothing): set its split to a dev-tier split")
        out.append(CheckedProxy(p, lp, m, scorer))
    return out


def proxy_row(metrics: dict[str, Any], counts: dict[str, Any] | None = None) -> dict[str, Any]:
    """One proxy run's numbers for the report, by what its metrics hold: the run's ``samples`` and their count
    ``by_status`` (from ``counts``: a judge leaves a completion cut at max_tokens unjudged, ``truncated``);
    ``mean_score`` and its stderr (every scorer); ``reward_mean``, its stderr and ``reward_errors`` (a reward model);
    ``judge``: mode, judged and unparseable samples, pairwise the win rate against the judge's baseline with its
    paired bootstrap CI (``low``/``high``), LC win rate, position-flip and first-position rates and verdict counts
    (``rlhf.pairwise.win_rate``), pointwise the mean rating and scale. Never a per-item value."""
    row: dict[str, Any] = {"samples": (counts or {}).get("samples"), "by_status": (counts or {}).get("by_status"),
                           "mean_score": metrics.get("mean_score"),
                           "mean_score_stderr": metrics.get("mean_score_stderr")}
    if "reward_mean" in metrics:
        row.update({k: metrics.get(k) for k in ("reward_mean", "reward_mean_stderr", "reward_errors")})
    judge = metrics.get("judge")
    if judge:
        j: dict[str, Any] = {k: judge.get(k) for k in ("mode", "judged", "unparseable", "baseline")}
        if judge.get("pairwise"):
            j["pairwise"] = {k: judge["pairwise"].get(k) for k in _PAIRWISE_KEYS}
        if judge.get("mode") == "pointwise":
            j.update(mean_rating=judge.get("mean_rating"), scale=judge.get("scale"),
                     unparseable_as=judge.get("unparseable_as"))
        row["judge"] = j
    return row


def _stored(store: Store, c: CheckedProxy, digest: str | None, backend: str,
            settings: str | None) -> RunRow | None:
    """The newest complete run of checkpoint ``digest`` under the proxy's protocol on its split's content."""
    if digest is None:
        return None
    runs = store.runs(checkpoint_digest=digest, protocol_hash=c.protocol.sha256, split_sha256=c.manifest.content_sha256,
                      backend=backend, status="complete")
    runs = [r for r in runs if settings is None or r.settings_sha256 == settings]
    return runs[-1] if runs else None


def proxy_section(policy: GatePolicy, checked: list[CheckedProxy], targets: list[Target], store: Store,
                  manager: SplitManager, actor: str, evaluate: bool, progress: bool = False) -> list[ProxyEntry]:
    """Score ``targets`` (the baseline first, then each seed's best) under every checked proxy protocol.

    Args:
        evaluate: evaluate a target without a stored run (``reads.evaluate_for_gate``, purpose ``gate-proxy``);
            False: stored runs only.
        progress: say on stderr what each evaluation reads, with its bars.

    Returns:
        Per proxy a ``ProxyEntry`` (its document: ``{"protocol", "protocol_hash", "scorer", "split", "checkpoints":
        [{"role", "path", "digest", "train_run", "train_seed", "step", "run_id", **proxy_row}]}``), in the policy's
        order; a pairwise judge that compared more than two checkpoints (its baseline included) has
        ``bradley_terry`` (``bradley_terry``).

    Raises:
        BadInput: not evaluating, and a target has no stored run (names the command to run).
        EvalgateError: an evaluation failed (nothing private was read yet).
    """
    from evalgate.gate.reads import decision_settings_sha256, evaluate_for_gate

    settings = decision_settings_sha256(policy.backend) if evaluate else None
    out = []
    for c in checked:
        m = c.manifest
        manager.check(m.name, PROXY_PURPOSE, actor)
        rows: list[dict[str, Any]] = []
        judged: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for t in targets:
            run = _stored(store, c, t.digest, policy.backend, settings)
            if run is not None:
                manager.log_read(m, actor, PROXY_PURPOSE, cached=True, checkpoint_digest=t.digest,
                                 protocol_hash=c.protocol.sha256, run_id=run.run_id,
                                 detail=f"gate {policy.name}: proxy {c.protocol.ref}, stored run")
                run_id, metrics, counts = run.run_id, run.metrics.as_dict() if run.metrics else {}, run.counts or {}
            elif evaluate:
                doc = evaluate_for_gate(str(c.protocol.path), t.path, m.name, PROXY_PURPOSE, actor, store,
                                        {"train_run": t.train_run, "train_seed": t.train_seed, "step": t.step},
                                        policy.backend, progress=progress)
                run_id, metrics, counts = doc["run_id"], doc["metrics"], doc["counts"]
            else:
                raise BadInput(f"gate policy {policy.name}: no complete run of {t.path} under proxy protocol "
                               f"{c.protocol.ref} on {m.name} (backend {policy.backend}); evaluate it (evalgate run "
                               f"--protocol {c.protocol.path} --checkpoint {t.path} --split {m.name})")
            rows.append({"role": t.role, "path": t.path, "digest": t.digest, "train_run": t.train_run,
                         "train_seed": t.train_seed, "step": t.step, "run_id": run_id,
                         **proxy_row(metrics, counts)})
            judged.append((rows[-1], metrics))
        entry = {"protocol": c.protocol.ref, "protocol_hash": c.protocol.sha256, "scorer": c.scorer,
                 "split": m.name, "checkpoints": rows}
        bt = bradley_terry(judged, policy.bootstrap_seed)
        if bt is not None:
            entry["bradley_terry"] = bt
        out.append(ProxyEntry.from_document(entry))
    return out


BT_RESAMPLES = 1000
"""Bootstrap refits of the proxies' Bradley-Terry ratings (Chatbot Arena's 1000; Arena-Hard v0.1 defaults to 100)."""


def player_label(row: dict[str, Any]) -> str:
    """A proxy row's checkpoint as a Bradley-Terry player: ``baseline`` or ``seed K best (step S)``."""
    return "baseline" if row["role"] == "baseline" else f"seed {row['train_seed']} best (step {row['step']})"


def bradley_terry(judged: list[tuple[dict[str, Any], dict[str, Any]]], seed: int) -> dict[str, Any] | None:
    """Bradley-Terry ratings of the checkpoints a pairwise judge proxy compared with its baseline, when they are
    more than two together with that baseline (``rlhf.bradley_terry.ratings``: the Elo-like scale, the judge's
    baseline at 1000, 95 % bootstrap CI over games, a tie half a win; each verdict a game, weighted verdicts that
    many games, an unparseable item two losses). The judge's baseline is the anchor: the gate's baseline when it is
    the same checkpoint (whose own run compares it with itself and adds no game), a player otherwise.

    Args:
        judged: per target, its proxy row and its run's metrics (``judge.items``: the per-item verdicts).
        seed: the bootstrap's numpy seed (the policy's ``bootstrap_seed``).

    Returns:
        ``rlhf.bradley_terry.ratings``' document (players by rating, each with its ``role``, ``train_seed``,
        ``step`` and ``run_id``), or ``{"note": ...}`` when a run holds no per-item verdicts; None for a pointwise
        judge, another scorer, or fewer than three checkpoints in all.
    """
    from evalgate.rlhf.bradley_terry import judge_games, ratings

    pairwise = [(r, mt) for r, mt in judged if (mt.get("judge") or {}).get("mode") == "pairwise"]
    if not pairwise:
        return None
    base = pairwise[0][1]["judge"].get("baseline") or {}
    anchor_digest = base.get("checkpoint")
    players = [(r, mt) for r, mt in pairwise if r["digest"] != anchor_digest or anchor_digest is None]
    anchor_is_target = len(players) < len(pairwise)
    if len(players) + 1 < 3:
        return None
    anchor = "baseline" if anchor_is_target and any(r["role"] == "baseline" and r["digest"] == anchor_digest
                                                    for r, _ in pairwise) else \
        f"judge's baseline ({anchor_digest or 'run ' + str(base.get('run_id'))})"
    lacking = [player_label(r) for r, mt in players if not mt["judge"].get("items")]
    if lacking:
        return {"note": f"no Bradley-Terry rating: the judge runs of {', '.join(lacking)} hold no per-item verdicts "
                        "(a private or human-audit split, or a run stored before they were kept)"}
    games = [g for r, mt in players for g in judge_games(player_label(r), anchor, mt["judge"]["items"])]
    doc = ratings(games, anchor, resamples=BT_RESAMPLES, seed=seed)
    meta = {player_label(r): {k: r[k] for k in ("role", "train_seed", "step", "run_id")} for r, _ in pairwise}
    for p in doc["players"]:
        p.update(meta.get(p["player"], {"role": "judge baseline", "train_seed": None, "step": None, "run_id": None}))
    return doc
