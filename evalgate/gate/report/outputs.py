"""Gate outputs: a self-contained HTML release report (jinja2, charts as inline SVG from matplotlib), JSON, JUnit XML
and a Markdown summary (appended to ``$GITHUB_STEP_SUMMARY`` when set), and ``gate_and_report`` (what ``evalgate
gate`` does). This module imports the gate; the gate never imports it.

The HTML file has no external scripts, styles, fonts or images: everything is inline, so it opens offline and
from a CI artifact store. No output holds per-item outputs of the private split.
"""

from __future__ import annotations

import json
import math
import os
import signal
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from evalgate.core.environment import utc_now
from evalgate.core.errors import BadInput, EvalgateError, ProtocolDrift, RefusedByPolicy, Terminated
from evalgate.core.fileio import atomic_write, replace_set, signals_held
from evalgate.core.html import chart_axes, fit_axes, render, svg
from evalgate.core.html import fmt as _fmt
from evalgate.gate import SeedResult, Verdict, load_policy, run_gate
from evalgate.store import RunRepo, Store

if TYPE_CHECKING:
    from evalgate.sweep import SweepSummary

# (title, canonical training-log key or None for the dev metric)
CHARTS: tuple[tuple[str, str | None], ...] = (
    ("dev metric", None), ("training reward", "reward"), ("KL", "kl"), ("entropy", "entropy"),
    ("completion length", "completion_length"), ("loss", "loss"), ("grad norm", "grad_norm"),
)
_MAX_POINTS = 400


def _thin(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    if len(points) <= _MAX_POINTS:
        return points
    stride = math.ceil(len(points) / _MAX_POINTS)
    return points[::stride] + ([points[-1]] if (len(points) - 1) % stride else [])


def charts(verdict: Verdict) -> list[dict[str, str]]:
    """Inline SVG charts, one per series that any seed has: dev metric per checkpoint (best and failed marked),
    training reward, KL, entropy, completion length, loss and grad norm over steps, one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams.update({"svg.fonttype": "none", "font.size": 9, "svg.hashsalt": "evalgate"})
    out = []
    for title, key in CHARTS:
        series: list[tuple[SeedResult, list[tuple[int, float]]]] = []
        for s in verdict.seeds:
            if key is None:
                pts = [(c.step, c.value) for c in s.checkpoints
                       if c.step is not None and isinstance(c.value, float) and math.isfinite(c.value)]
            else:
                pts = _thin(s.train_series.get(key, []))
            if pts:
                series.append((s, pts))
        if not series:
            continue
        with chart_axes("report", (5.2, 2.6)) as (fig, ax):
            _draw(ax, verdict, title, key, series)
            fit_axes(fig, ax)
            out.append({"title": title, "svg": svg(fig)})
    return out


def _draw(ax: Any, verdict: Verdict, title: str, key: str | None,
          series: list[tuple[SeedResult, list[tuple[int, float]]]]) -> None:
    """One chart of ``charts`` on ``ax``: a line per seed (``series``), the dev metric's best and failed checkpoints
    and the baseline, each seed's diagnostics as dotted verticals, the title, axis label, grid and legend."""
    for s, pts in series:
        (line,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o" if key is None else None,
                          markersize=3, linewidth=1.2, label=f"seed {s.train_seed}")
        if key is None:
            best = s.best
            if best and best.step is not None and best.value is not None:
                ax.plot([best.step], [best.value], marker="*", markersize=12,
                        color=line.get_color(), linestyle="none")
            for c in s.failed:
                if c.step is not None and isinstance(c.value, float) and math.isfinite(c.value):
                    ax.plot([c.step], [c.value], marker="x", markersize=8, color="#cf222e",
                            linestyle="none")
        for d in s.diagnostics:
            if d.step is not None and (key is not None or d.signal == "reward_hacking"):
                ax.axvline(d.step, color=line.get_color(), linestyle=":", linewidth=1)
    if key is None and verdict.baseline and verdict.baseline.dev:
        v = verdict.baseline.dev.metrics.get(verdict.policy.metric)
        if isinstance(v, float):
            ax.axhline(v, color="#57606a", linestyle="--", linewidth=1, label="baseline")
    ax.set_xlabel("training step")
    ax.set_title(f"{verdict.policy.metric} on {verdict.policy.selection_split}" if key is None else title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def diagnostics_section(verdict: Verdict) -> dict[str, Any]:
    """The per-seed training-log diagnostics for the report: ``diagnostics.diagnose.summary`` over every seed's
    diagnosis (an HTML table on the page: one row per signal, per seed its status and first step) and one small
    plot per signal that fired at warn or fail on some seed (``diagnostics.report.plot_signal``: every seed's
    series, its first step dashed), as inline SVG. Empty when no seed has a training log."""
    from evalgate.diagnostics.diagnose import summary
    from evalgate.diagnostics.report import plot_signal
    from evalgate.diagnostics.signals import SIGNAL_SERIES

    diags = [s.guards.diagnosis for s in verdict.seeds if s.guards is not None and s.guards.diagnosis is not None]
    if not diags:
        return {}
    fired = {f.signal for d in diags for f in d.fired("warn")}
    plots = []
    for sig in SIGNAL_SERIES:
        chart = plot_signal(sig, diags) if sig in fired else None
        if chart:
            plots.append({"signal": sig, "svg": chart})
    return {"summary": summary(diags), "plots": plots}


def judge_section(store: RunRepo, verdict: Verdict) -> list[dict[str, Any]]:
    """The judge's results for the report, one entry per training seed's best checkpoint whose runs were scored by
    the ``judge`` scorer: the selection run's ``metrics["judge"]`` (pairwise: win rate with its paired bootstrap CI,
    LC win rate, position-flip rate and the per-item table) and the decision run's summary (its per-item table is
    never kept for a private split, ``scoring.judge``). Empty when no judge scored them."""
    out = []
    for s in verdict.seeds:
        if s.best is None:
            continue
        rows = store.runs(run_id=s.best.run_id)
        judge = rows[0].metrics.get("judge") if rows and rows[0].metrics else None
        decision = s.decision.metrics.get("judge") if s.decision else None
        if judge or decision:
            out.append({"train_seed": s.train_seed, "step": s.best.step, "run_id": s.best.run_id,
                        "selection": judge, "decision": decision})
    return out


def _atomic_write(path: Path, text: str) -> None:
    atomic_write(path, text)


def render_html(verdict: Verdict, audit: dict[str, Any] | None = None) -> str:
    """The release report as one self-contained HTML document. Every value is HTML-escaped (autoescape), model
    text and tool results included; an agentic protocol's audit samples show their trajectories (turns, calls,
    results, violations, parse errors) in a collapsed ``<details>`` each, and the behaviour table gains the decision
    runs' tool-use columns."""
    agentic = any(r.trajectory is not None for r in verdict.samples.rows())
    runs = [s.decision for s in verdict.seeds if s.decision] + (
        [verdict.baseline.decision] if verdict.baseline and verdict.baseline.decision else [])
    return render("report.html.j2",
        v=verdict, d=verdict.as_dict(), charts=charts(verdict), generated_at=utc_now().isoformat(timespec="seconds"),
        audit=audit or {}, diag=diagnostics_section(verdict), agentic=agentic,
        tools_columns=any(r.metrics.get("tools") for r in runs))


def write_html(verdict: Verdict, path: str | Path, audit: dict[str, Any] | None = None) -> Path:
    """The ``html`` report writer: the release report (``render_html``) to ``path``, written atomically."""
    p = Path(path)
    _atomic_write(p, render_html(verdict, audit))
    return p


def write_json(verdict: Verdict, path: str | Path, audit: dict[str, Any] | None = None) -> Path:
    """The verdict as JSON (``Verdict.as_dict`` plus, under ``access``, the decision split's access table and the judge
    section, ``judge_section``)."""
    p = Path(path)
    _atomic_write(p, json.dumps({**verdict.as_dict(), "access": audit or {}}, indent=2, default=str))
    return p


def junit_xml(verdict: Verdict) -> str:
    """JUnit XML: one testsuite for the gate, one testcase per rule; failed rules carry a <failure> (type
    ``GateRuleNotCheckable`` for a rule that checked nothing), one accepted as not checkable a <skipped>. The suite's
    properties hold the machine-readable ``reason`` (``pass`` / ``fail``), the verdict, the gate id and
    ``accept_not_checkable``."""
    suite = ET.Element("testsuite", name=f"evalgate.{verdict.policy.name}", tests=str(len(verdict.rules)),
                       failures=str(sum(not r.passed for r in verdict.rules)), errors="0",
                       skipped=str(sum(r.passed and not r.checkable for r in verdict.rules)))
    props = {"reason": verdict.reason, "verdict": "PASS" if verdict.passed else "FAIL",
             "gate_id": verdict.gate_id or "",
             "accept_not_checkable": str(verdict.policy.rules.accept_not_checkable).lower()}
    if verdict.broken_chain:
        props["access_log_chain"] = _broken_text(verdict)
    size = verdict.decision_size()
    if size:
        props["decision_split_size"] = size.detail
    if verdict.decision_not_read:
        props["decision_not_read"] = verdict.decision_not_read
    _properties(suite, props)
    warnings = [("access_log_chain", _broken_text(verdict))] if verdict.broken_chain else []
    warnings += [("decision_split_size", size.detail)] if size and size.too_small else []
    for name, text in warnings:  # not rules, but never silent: a test case each, with the warning as output
        case = ET.SubElement(suite, "testcase", classname=f"evalgate.{verdict.policy.name}", name=name)
        ET.SubElement(case, "system-err").text = text
    suite.set("tests", str(len(verdict.rules) + len(warnings)))
    for r in verdict.rules:
        case = ET.SubElement(suite, "testcase", classname=f"evalgate.{verdict.policy.name}", name=r.rule)
        if not r.passed:
            kind = "GateRuleFailed" if r.checkable else "GateRuleNotCheckable"
            ET.SubElement(case, "failure", message=r.detail, type=kind).text = r.detail
        elif not r.checkable:  # accepted: shown as skipped, never as a plain pass
            ET.SubElement(case, "skipped", message=r.detail)
        else:
            ET.SubElement(case, "system-out").text = r.detail
    root = ET.Element("testsuites", name="evalgate", tests=suite.get("tests", "0"),
                      failures=suite.get("failures", "0"))
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def _properties(suite: ET.Element, values: dict[str, str]) -> None:
    props = ET.SubElement(suite, "properties")
    for k, v in values.items():
        ET.SubElement(props, "property", name=k, value=v)


def write_junit(verdict: Verdict, path: str | Path) -> Path:
    p = Path(path)
    _atomic_write(p, junit_xml(verdict))
    return p


def _broken_text(verdict: Verdict) -> str:
    b = verdict.broken_chain
    assert b is not None
    return (f"WARNING: the access log's hash chain is BROKEN at row {b.first_bad_seq} ({b.reason}): the private "
            f"budget could not be counted; gated anyway (accept_broken_chain: {b.accepted_because})")


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _calibration_lines(calibration: list[dict[str, Any]]) -> list[str]:
    """The Markdown table of each proxy scorer's agreement with raters (``Verdict.calibration``); none when empty."""
    if not calibration:
        return []

    def ci(value: Any, interval: list[float] | None) -> str:
        return (_fmt(value, 3) or "n/a") + (f" [{_fmt(interval[0], 3)}, {_fmt(interval[1], 3)}]" if interval else "")

    lines = ["", "Calibration against people (human-audit tier, 95% bootstrap CIs):", "",
             "| protocol | scorer | rated samples | Spearman rho | kappa | weighted kappa | Krippendorff alpha |",
             "|---|---|---|---|---|---|---|"]
    for c in calibration:
        cells = [ci(c["spearman"]["rho"], c["spearman"]["ci"])]
        cells += [ci(c[k]["value"], c[k]["ci"]) for k in ("kappa", "weighted_kappa", "alpha")]
        lines.append(f"| {c['protocol']} | {c['scorer']} | {c['n_samples']} | {' | '.join(cells)} |")
    return lines


def _proxy_lines(proxies: list[dict[str, Any]]) -> list[str]:
    """The Markdown table of the proxy protocols' numbers (``Verdict.proxies``; ``gate.proxies``); none when empty."""
    if not proxies:
        return []
    lines = ["", "Proxy scores (informational: no rule reads them; dev-tier split; 95% paired bootstrap CI):", "",
             "| proxy | split | checkpoint | mean score | mean reward | judged | mean rating | judge win rate [CI] "
             "| LC win rate | flip rate |", "|---|---|---|---|---|---|---|---|---|---|"]
    for p in proxies:
        for r in p["checkpoints"]:
            who = "baseline" if r["role"] == "baseline" else f"seed {r['train_seed']} best (step {r['step']})"
            j = r.get("judge") or {}
            pw = j.get("pairwise") or {}
            win = f"{_fmt(pw['win_rate'], 3)} [{_fmt(pw['low'], 3)}, {_fmt(pw['high'], 3)}]" if pw else ""
            reward = (f"{_fmt(r['reward_mean'], 3)} ± {_fmt(r['reward_mean_stderr'], 3)}" if "reward_mean" in r
                      else "")
            # how many answers the judge judged (one cut at max_tokens is not), as the HTML section says
            judged = f"{j.get('judged')} of {r.get('samples')} ({j.get('unparseable')} unparseable)" if j else ""
            rating = (f"{_fmt(j['mean_rating'], 3)} on {j['scale'][0]}-{j['scale'][1]}"
                      if j.get("mean_rating") is not None and j.get("scale") else "")
            lines.append(f"| {p['protocol']} ({p['scorer']}) | {p['split']} | {who} | "
                         f"{_fmt(r['mean_score'], 3)} ± {_fmt(r['mean_score_stderr'], 3)} | {reward} | {judged} | "
                         f"{rating} | {win} | {_lc(pw)} | "
                         f"{_fmt(pw.get('position_flip_rate'), 3)} |")
    for p in proxies:
        lines += _bt_lines(p)
    return lines


def _bt_lines(proxy: dict[str, Any]) -> list[str]:
    """The Markdown table of a pairwise judge proxy's Bradley-Terry ratings (``gate.proxies.bradley_terry``)."""
    bt = proxy.get("bradley_terry")
    if not bt:
        return []
    if "note" in bt:
        return ["", f"{proxy['protocol']}: {bt['note']}."]
    lines = ["", f"{proxy['protocol']}: Bradley-Terry ratings (Elo-like scale, {bt['anchor']} = "
                 f"{bt['anchor_rating']:g}; {bt['confidence']:.0%} bootstrap CI over {bt['games']} games, "
                 f"{bt['resamples']} refits; ties half):", "",
             "| checkpoint | rating [CI] | fitted win rate vs anchor | games |", "|---|---|---|---|"]
    for r in bt["players"]:
        lines.append(f"| {r['player']} | {_bt_rating(r)} | {_fmt(r['win_rate_vs_anchor'], 3)} | {r['games']} |")
    return lines


def _bt_rating(r: dict[str, Any]) -> str:
    """A Bradley-Terry rating with its CI; an unbounded one says why (it won, or lost, every game)."""
    if r["rating"] is None:
        return {"above": "unbounded above (won every game)", "below": "unbounded below (lost every game)"}.get(
            r["bound"], "not linked to the anchor")
    return f"{r['rating']:.1f} [{_bt_end(r['low'], '-inf')}, {_bt_end(r['high'], '+inf')}]"


def _bt_end(v: float | None, open_end: str) -> str:
    return open_end if v is None else f"{v:.1f}"


def _lc(pw: dict[str, Any]) -> str:
    """The LC win rate ± its bootstrap standard error, and AlpacaEval's extreme-change warning when it fires."""
    if pw.get("lc_win_rate") is None:
        return ""
    se = f" ± {_fmt(pw['lc_standard_error'], 3)}" if pw.get("lc_standard_error") is not None else ""
    return f"{_fmt(pw['lc_win_rate'], 3)}{se}" + (" (far from the raw rate)" if pw.get("lc_extreme_change") else "")


def markdown_summary(verdict: Verdict) -> str:
    """A short Markdown summary: verdict, rules table, per-seed best/last/failed."""
    d = verdict.as_dict()
    lines = [f"## evalgate gate `{d['gate']}`: **{d['verdict']}**", "",
             f"protocol `{d['protocol']}` (sha256 `{(d['protocol_hash'] or 'n/a')[:16]}`), metric {d['metric']}, "
             f"selection on `{d['selection_split']}`, decision on `{d['decision_split']}`", "",
             "| rule | outcome | detail |", "|---|---|---|"]
    lines += [f"| {r.rule} | {r.label if r.passed else f'**{r.label}**'} | {_md(r.detail)} |" for r in verdict.rules]
    lines += ["", f"Rules that can check nothing are {'accepted' if d['accept_not_checkable'] else 'failed'} "
                  f"(rules.accept_not_checkable: {str(d['accept_not_checkable']).lower()})."]
    lines += ["", "| seed | best (step, dev) | decision | last step | failed steps |", "|---|---|---|---|---|"]
    for s in d["seeds"]:
        b = s["best"]
        dec = s.get("decision", {})
        best = f"{b['step']}, {_fmt(b['value'])}" if b else "none"
        lines.append(f"| {s['train_seed']} | {best} | "
                     f"{_fmt(dec.get('value'))} ± {_fmt(dec.get('stderr'))} | "
                     f"{s['last']['step'] if s['last'] else ''} | "
                     f"{', '.join(str(c['step']) for c in s['failed']) or 'none'} |")
    ship = d["ship"]
    lines += ["", f"**Ship:** `{ship['checkpoint']}` ({_md(ship['why'])})" if ship["checkpoint"]
              else f"**Ship:** none ({_md(ship['why'])})"]
    if verdict.broken_chain:
        lines += ["", f"**{_md(_broken_text(verdict))}**"]
    if verdict.decision_not_read:
        lines += ["", f"Decision split not read: {_md(verdict.decision_not_read)}."]
    size = d.get("decision_split_size")
    if size:
        lines += ["", f"**{_md(size['detail'])}**" if size["too_small"] else _md(size["detail"]) + "."]
    if d["rereads"]:
        lines += ["", f"{len(d['rereads'])} decision read(s) showed stored results again (logged, not charged)."]
    if d["reused_from"]:
        lines += ["", f"Decision reused from gate `{d['reused_from']['gate_id']}` ({d['reused_from']['created_at']}): "
                      "inputs unchanged, no private read."]
    lines += _proxy_lines(d["proxies"])
    lines += _calibration_lines(d["calibration"])
    aside = [f"{len(d[k])} {k}" for k in ("stale", "ignored", "failures") if d[k]]
    if aside:
        lines += ["", f"Runs set aside: {', '.join(aside)} (listed with reasons in the JSON and HTML reports)."]
    return "\n".join(lines) + "\n"


def write_all(verdict: Verdict, out_dir: str | Path, stem: str, audit: dict[str, Any] | None = None) -> dict[str, str]:
    """Every registered report format (``gate.report.writers.WRITERS``) beside each other: ``<out_dir>/<stem><suffix>``
    (``.html``, ``.json``, ``.junit.xml``, ``.md``, a plugin's ``.<name>``); the Markdown summary is also appended to
    ``$GITHUB_STEP_SUMMARY`` when set.

    Args:
        audit: ``audit.audit_summary`` of the decision split, shown in the HTML and JSON; None: none shown.

    Returns:
        Format name -> the path written.
    """
    from evalgate.gate.report.writers import WRITERS, suffix_of

    o = Path(out_dir)
    out = _write_outputs(verdict, {name: o / f"{stem}{suffix_of(name)}" for name in WRITERS.names()}, audit)
    _step_summary(markdown_summary(verdict))
    return out


def _write_outputs(verdict: Verdict, paths: Mapping[str, Path], audit: dict[str, Any] | None) -> dict[str, str]:
    """Write each format of ``paths`` (format name -> path; names already checked) as one set (``replace_set``: a
    signal or an error while writing leaves the earlier files, never some of each); format name -> path written."""
    from evalgate.gate.report.writers import WRITERS

    written = replace_set(paths, lambda name, tmp: WRITERS[name].writer()(verdict, tmp, audit))
    return {name: str(path) for name, path in written.items()}


# -- a gate that decided nothing -----------------------------------------------------------------------------------
# the machine-readable reason of each outcome, beside the exit code (drift and FAIL both exit 1; docs/GATING.md table)
ERROR_REASONS: tuple[tuple[type[EvalgateError], str], ...] = (
    (ProtocolDrift, "drift"), (RefusedByPolicy, "refused"), (BadInput, "invalid"))


def error_reason(error: BaseException) -> str:
    """``drift`` (protocol drift, exit 1), ``refused`` (policy or budget, exit 2), ``invalid`` (bad input, exit 2),
    ``interrupted`` (Ctrl-C, exit 130; SIGTERM, 143) or ``error`` (internal or engine error, exit 3)."""
    if isinstance(error, KeyboardInterrupt):
        return "interrupted"
    return next((reason for kind, reason in ERROR_REASONS if isinstance(error, kind)), "error")


def error_document(policy_path: str | Path, gate: str, error: BaseException) -> dict[str, Any]:
    """The JSON document of a gate that decided nothing: ``verdict`` None, ``reason``, ``error``, ``exit_code``
    and ``ship`` (none, and why)."""
    message = error.message if isinstance(error, EvalgateError) else f"{type(error).__name__}: {error}"
    code = error.exit_code if isinstance(error, EvalgateError) else 3
    if isinstance(error, KeyboardInterrupt):  # the CLI's exit codes for these (evalgate.commands.handle_errors)
        message, code = (("terminated (SIGTERM) before the gate decided", 128 + signal.SIGTERM)
                         if isinstance(error, Terminated) else
                         ("interrupted (Ctrl-C) before the gate decided", 128 + signal.SIGINT))
    reason = error_reason(error)
    return {"verdict": None, "gate": gate, "policy": str(policy_path), "reason": reason, "error": message,
            "exit_code": code, "ship": {"checkpoint": None, "train_seed": None, "step": None,
                                        "why": f"gate {reason}: {message}"}}


def error_junit(doc: dict[str, Any]) -> str:
    """JUnit XML of a gate that decided nothing: one testcase ``gate`` with an <error> saying why."""
    suite = ET.Element("testsuite", name=f"evalgate.{doc['gate']}", tests="1", failures="0", errors="1", skipped="0")
    _properties(suite, {"reason": doc["reason"], "verdict": "NONE", "gate_id": ""})
    case = ET.SubElement(suite, "testcase", classname=f"evalgate.{doc['gate']}", name="gate")
    ET.SubElement(case, "error", message=doc["error"], type=f"Gate{doc['reason'].capitalize()}").text = doc["error"]
    root = ET.Element("testsuites", name="evalgate", tests="1", failures="0", errors="1")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def error_markdown(doc: dict[str, Any]) -> str:
    """The Markdown summary of a gate that decided nothing."""
    return (f"## evalgate gate `{doc['gate']}`: **{doc['reason'].upper()}** (no verdict, exit {doc['exit_code']})\n\n"
            f"{_md(doc['error'])}\n\n**Ship:** none\n")


def junit_output(verdict: Verdict, path: str | Path, audit: dict[str, Any] | None = None) -> Path:
    """The ``junit`` report writer (``gate.report.writers.WRITERS``): ``write_junit``."""
    return write_junit(verdict, path)


def markdown_output(verdict: Verdict, path: str | Path, audit: dict[str, Any] | None = None) -> Path:
    """The ``markdown`` report writer: the summary to ``path`` (the step summary is ``write_reports``'s)."""
    p = Path(path)
    _atomic_write(p, markdown_summary(verdict))
    return p


def error_junit_output(doc: dict[str, Any], path: str | Path) -> Path:
    """The ``junit`` writer of a gate that decided nothing (``error_junit``)."""
    _atomic_write(Path(path), error_junit(doc))
    return Path(path)


def error_json_output(doc: dict[str, Any], path: str | Path) -> Path:
    """The ``json`` writer of a gate that decided nothing: the ``error_document``."""
    _atomic_write(Path(path), json.dumps(doc, indent=2))
    return Path(path)


def error_markdown_output(doc: dict[str, Any], path: str | Path) -> Path:
    """The ``markdown`` writer of a gate that decided nothing (``error_markdown``)."""
    _atomic_write(Path(path), error_markdown(doc))
    return Path(path)


def _checked(outputs: Mapping[str, str | Path] | None) -> dict[str, Path]:
    from evalgate.gate.report.writers import WRITERS

    outputs = dict(outputs or {})
    for name in outputs:
        WRITERS.require(name, " (report outputs)")
    return {name: Path(path) for name, path in outputs.items() if path}


def _step_summary(text: str) -> list[Path]:
    """Append ``text`` to ``$GITHUB_STEP_SUMMARY`` when that is set; the files appended to."""
    gh = os.environ.get("GITHUB_STEP_SUMMARY")
    if not gh:
        return []
    with open(gh, "a", encoding="utf-8") as f:
        f.write(text + "\n")
    return [Path(gh)]


def error_html(doc: dict[str, Any]) -> str:
    """The HTML release report of a gate that decided nothing: one page saying why (no verdict, ship none)."""
    title = f"evalgate gate {doc['gate']}: {doc['reason'].upper()} (no verdict, exit {doc['exit_code']})"
    return render("gate_error.html.j2", title=title, policy=str(doc["policy"]), error=doc["error"])


def error_html_output(doc: dict[str, Any], path: str | Path) -> Path:
    """The ``html`` writer of a gate that decided nothing (``error_html``)."""
    _atomic_write(Path(path), error_html(doc))
    return Path(path)


def write_error_outputs(doc: dict[str, Any], outputs: Mapping[str, Path]) -> None:
    """Write each requested report of a gate that decided nothing (``doc``: ``error_document``): the format's error
    writer, and for a format with none (a plugin's) the file an earlier gate left at that path removed, so no
    report of another run is taken for this one's. The Markdown error summary goes to ``$GITHUB_STEP_SUMMARY``."""
    from evalgate.gate.report.writers import WRITERS

    writers = {name: WRITERS[name].error_writer() for name in outputs}
    replace_set({name: Path(p) for name, p in outputs.items() if writers[name] is not None},
                lambda name, tmp: writers[name](doc, tmp),  # type: ignore[misc]
                remove=[Path(p) for name, p in outputs.items() if writers[name] is None])
    _step_summary(error_markdown(doc))


def clear_outputs(outputs: Mapping[str, str | Path]) -> None:
    """Delete the files at a gate's requested report paths before it starts, so that a gate killed on the way (even
    by SIGKILL, which writes no error report) leaves no report of an earlier gate to be taken for its own."""
    with signals_held():
        for p in outputs.values():
            if Path(p).is_file():
                Path(p).unlink()


def gate_and_report(policy_path: str | Path, store: Store,
                    outputs: Mapping[str, str | Path] | None = None, actor: str | None = None,
                    accept_broken_chain: str | None = None,
                    expect_head: tuple[int, str] | None = None, progress: bool = False,
                    swept: SweepSummary | None = None, train_run: str | None = None) -> GateReport:
    """Load a policy, run the gate and write the requested outputs (what ``evalgate gate`` does).
    ``outputs``: report format name (``gate.report.writers.WRITERS``: html, json, junit, markdown, a plugin's) -> path.
    ``accept_broken_chain``: a reason to gate on a broken access-log chain (sets the policy's field for this run);
    ``expect_head`` and ``progress`` (stderr: what is evaluated, sample counts) as in ``run_gate``; ``swept``: the
    ``--evaluate-missing`` sweep run before it (``gate.missing.evaluate_missing``), carried into the report;
    ``train_run``: the training run to gate (sets the policy's field for this run).

    The Markdown summary is also appended to ``$GITHUB_STEP_SUMMARY`` when that is set. A gate that decides
    nothing (refused, invalid policy, protocol drift, internal error, Ctrl-C or SIGTERM) still writes, in each
    format that has an error writer (JUnit: one error testcase; JSON: ``error_document``; Markdown), the output it
    was asked for, saying why, then raises. The files at the requested paths are deleted first (``clear_outputs``)
    and every set is written as one (``core.fileio.replace_set``), so a reader never sees an earlier gate's report
    beside this one's, nor an earlier report as this gate's when it was killed.

    Returns:
        The ``GateReport``: the verdict and the paths written.

    Raises:
        BadInput: an unknown report format in ``outputs``.
        EvalgateError: see ``evalgate.gate.load_policy`` and ``evalgate.gate.run_gate``.
    """
    paths = _checked(outputs)
    clear_outputs(paths)
    try:
        policy = load_policy(policy_path)
        if accept_broken_chain:
            policy = policy.model_copy(update={"accept_broken_chain": accept_broken_chain})
        if train_run:
            policy = policy.model_copy(update={"train_run": train_run})
    except BaseException as e:
        write_error_outputs(error_document(policy_path, Path(policy_path).stem, e), paths)
        raise
    try:
        verdict = run_gate(policy, store, actor, expect_head=expect_head, progress=progress)
        report = write_reports(verdict, paths, store)
    except BaseException as e:  # Ctrl-C or SIGTERM included: the reports say the gate was interrupted
        write_error_outputs(error_document(policy_path, policy.name, e), paths)
        raise
    return report if swept is None else replace(report, swept=swept)


class Decided(Protocol):
    """What a report holds: a gate's ``Verdict`` or a suite's ``SuiteVerdict`` (``gate.suite_run``)."""

    @property
    def passed(self) -> bool: ...

    def as_dict(self) -> dict[str, Any]: ...


V = TypeVar("V", bound=Decided)


@dataclass(frozen=True)
class Report(Generic[V]):
    """A verdict and the report files written from it (``evalgate gate``, ``evalgate report``), for a single gate
    (``GateReport``) and a suite (``gate.report.suite.SuiteReport``) alike.

    Attributes:
        verdict: the gate's ``Verdict`` or the suite's ``SuiteVerdict``.
        files: writer key (``gate.report.writers.key_of``: ``report``, ``json_out``, ``junit``, ``markdown``, a
            plugin's) -> the path written, in the writers' order.
        step_summary: the ``$GITHUB_STEP_SUMMARY`` files the Markdown summary was appended to (not the
            ``markdown`` output itself).
        swept: the ``--evaluate-missing`` sweep that ran before the gate (None: none ran).
    """

    verdict: V
    files: dict[str, str]
    step_summary: list[str]
    swept: SweepSummary | None = None

    @property
    def passed(self) -> bool:
        """The verdict is PASS."""
        return self.verdict.passed

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` document: the verdict's (``as_dict``), then the paths written under their writer keys,
        ``step_summary``, and with ``swept`` its ``counts`` and ``ignored`` as ``evaluate_missing``."""
        doc = {**self.verdict.as_dict(), **self.files, "step_summary": list(self.step_summary)}
        if self.swept is not None:
            doc["evaluate_missing"] = {"counts": self.swept.counts, "ignored": self.swept.ignored}
        return doc


class GateReport(Report[Verdict]):
    """A single gate's ``Report``: its ``Verdict`` and the files written from it."""


def write_reports(verdict: Verdict, outputs: Mapping[str, str | Path] | None, store: Store) -> GateReport:
    """Write a verdict in each requested format (``outputs``: format name -> path; the HTML and JSON with the
    decision split's access table as it is now; reading the access log reads no split) and append the Markdown
    summary to ``$GITHUB_STEP_SUMMARY`` when set.

    Returns:
        The ``GateReport`` (``as_dict()``: the verdict's JSON document with the paths written).

    Raises:
        BadInput: an unknown format name (lists the known ones).
    """
    from evalgate.gate.report.writers import key_of
    from evalgate.views.audit import audit_summary

    paths = _checked(outputs)
    # the judge's per-item table comes from the selection runs the gate read (and logged); none of the private split
    audit = {**audit_summary(store, verdict.policy.decision_split).as_dict(), "judge": judge_section(store, verdict)}
    files = {key_of(name): path for name, path in _write_outputs(verdict, paths, audit).items()}
    summaries = [str(p) for p in _step_summary(markdown_summary(verdict)) if p != paths.get("markdown")]
    return GateReport(verdict, files, summaries)


def report_stored(gate_id: str, store: Store,
                  outputs: Mapping[str, str | Path] | None = None) -> GateReport:
    """Write the outputs of a stored gate again (``evalgate report GATE_ID``) from its stored verdict: no split is
    read and nothing is logged, so no budget is spent. The stored verdict must be the one the access log recorded
    (``gate.history.check_recorded``). ``outputs`` as in ``write_reports``.

    Raises:
        BadInput: no stored gate ``gate_id``, or an unknown report format.
        RefusedByPolicy: the access log does not hold, or does not record this verdict (``check_recorded``).
    """
    from evalgate.gate.history import check_recorded, stored_verdict

    row, verdict = stored_verdict(store, gate_id)
    check_recorded(store, row)
    return write_reports(verdict, outputs, store)
