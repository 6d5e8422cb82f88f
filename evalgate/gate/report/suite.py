"""A suite gate's one report (``evalgate gate --policy SUITE``): a members x seeds table (CI, threshold, pass/fail,
which member decided), then each member's section; as JSON, JUnit (one test case per member), Markdown and HTML.
No output holds per-item outputs of a private split."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.core.errors import BadInput
from evalgate.core.fileio import atomic_write, replace_set
from evalgate.core.html import fmt as _fmt
from evalgate.core.html import render
from evalgate.gate.report.outputs import GateReport, Report, _md, _step_summary, error_document, markdown_summary
from evalgate.gate.suite import load_suite
from evalgate.gate.suite_results import SuiteVerdict, is_suite_row, stored_suite
from evalgate.gate.suite_run import run_suite
from evalgate.store import Store

if TYPE_CHECKING:
    from evalgate.sweep import SweepSummary

FORMATS = ("html", "json", "junit", "markdown")
"""The built-in report formats a suite writes; a plugin's format writes a suite when its ``ReportWriter`` has a
``write_suite`` (docs/PLUGINS.md)."""


def _ci(row: dict[str, Any]) -> str:
    if row["ci"] is None:
        return "n/a"
    return f"{_fmt(row['diff'], 4)} [{_fmt(row['ci'][0], 4)}, {_fmt(row['ci'][1], 4)}]"


def _need(row: dict[str, Any]) -> str:
    return (f"lower >= {row['threshold']:+g}" + (f" (margin {-row['threshold']:g})" if row["role"] == "guard"
                                                  else " (min_improvement)"))


def _outcome(row: dict[str, Any], fail: str) -> str:
    """A member's outcome cell: pass, FAIL with its failed rules, or not read (the suite failed before any private
    read on another member's non-private rule)."""
    if row["passed"]:
        return "pass"
    if row["failed_rules"]:
        return f"{fail} ({', '.join(row['failed_rules'])})"
    return "not read (the suite failed before its private reads)"


def _seed_names(v: SuiteVerdict) -> list[str]:
    return [str(p.key[1]) for p in v.picks.values()]


def suite_markdown(v: SuiteVerdict) -> str:
    """The Markdown report: verdict and which member decided, the members x seeds table, the picks, then each
    member's single-gate summary (``outputs.markdown_summary``)."""
    d = v.as_dict()
    seeds = _seed_names(v)
    lines = [f"# evalgate suite `{d['suite']}`: **{d['verdict']}**", "",
             f"Decided by: {_md(d['decided_by'])}. The suite passes only when every member passes (intersection-union "
             f"test, Berger 1982: each member at one-sided level {d['alpha']:g}).", "",
             "| member | role | metric | baseline | " + " | ".join(f"seed {s}" for s in seeds)
             + " | candidate - baseline [CI] | needs | p | " + ("Holm p | " if d["holm"] else "") + "outcome |",
             "|" + "---|" * (8 + len(seeds) + (1 if d["holm"] else 0))]
    for r in d["table"]:
        cells = [r["member"], r["role"], r["metric"], _fmt(r["baseline"], 4) or "n/a"]
        cells += [_fmt(r["seeds"].get(s), 4) or "n/a" for s in seeds]
        cells += [_ci(r), _need(r), _fmt(r["p_value"], 4) or "n/a"]
        cells += [_fmt(r["holm_p"], 4) or "n/a"] if d["holm"] else []
        cells.append(_outcome(r, "**FAIL**"))
        lines.append("| " + " | ".join(_md(str(c)) for c in cells) + " |")
    if d["holm"]:
        lines += ["", f"At least one target improved (Holm 1979, family-wise level {d['alpha']:g}): "
                      f"**{'yes' if d['any_target_improved'] else 'no'}**."]
    lines += ["", "Shipped checkpoint per seed (one for the whole suite; docs/GATING.md, \"Suite gates\"):", "",
              "| seed | step | selecting targets' dev mean | checkpoint |", "|---|---|---|---|"]
    for p in d["picks"]:
        lines.append(f"| {p['train_seed']} | {p['step'] if p['step'] is not None else 'none'} | "
                     f"{_fmt(p['objective'], 4) or 'n/a'} | {_md(str(p['checkpoint'] or 'none qualified'))} |")
    ship = d["ship"]
    lines += ["", f"**Ship:** `{ship['checkpoint']}` ({_md(ship['why'])})" if ship["checkpoint"]
              else f"**Ship:** none ({_md(ship['why'])})", ""]
    for m in v.members:
        lines += [f"## Member `{m.name}` ({m.role})", "", markdown_summary(m.verdict).replace("## evalgate gate",
                                                                                            "### gate")]
    return "\n".join(lines) + "\n"


def suite_junit(v: SuiteVerdict) -> str:
    """JUnit XML: one testsuite, one testcase per member (a failed member carries a <failure> naming its failed
    rules); properties hold the reason, the verdict and which member decided."""
    name = f"evalgate.suite.{v.suite.name}"
    rows = v.table()
    unread = sum(not r["passed"] and not r["failed_rules"] for r in rows)
    ts = ET.Element("testsuite", name=name, tests=str(len(v.members)),
                    failures=str(sum(not r["passed"] for r in rows) - unread), errors="0", skipped=str(unread))
    props = ET.SubElement(ts, "properties")
    for k, val in {"reason": v.reason, "verdict": "PASS" if v.passed else "FAIL", "decided_by": v.decided_by()}.items():
        ET.SubElement(props, "property", name=k, value=val)
    for m, row in zip(v.members, rows, strict=True):
        case = ET.SubElement(ts, "testcase", classname=name, name=m.name)
        text = f"{m.role} {row['metric']}: candidate - baseline {_ci(row)}; {_need(row)}"
        if m.passed:
            ET.SubElement(case, "system-out").text = text
        elif not row["failed_rules"]:  # not decided: another member failed before any private read
            ET.SubElement(case, "skipped", message=m.verdict.decision_not_read or "not read")
        else:
            detail = text + "; " + "; ".join(m.verdict.reasons)
            ET.SubElement(case, "failure", message=detail, type="SuiteMemberFailed").text = detail
    root = ET.Element("testsuites", name="evalgate", tests=ts.get("tests", "0"), failures=ts.get("failures", "0"))
    root.append(ts)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def suite_html(v: SuiteVerdict) -> str:
    """A self-contained HTML report (``core/templates/suite.html.j2``; no external resource): the table, the picks
    with the checkpoints each seed rejected, each member's rules."""
    d = v.as_dict()
    seeds = _seed_names(v)
    head = ["member", "role", "metric", "baseline", *[f"seed {s}" for s in seeds], "candidate - baseline [CI]",
            "needs", "p", *(["Holm p"] if d["holm"] else []), "outcome"]
    rows = [("pass" if r["passed"] else "fail",
             [r["member"], r["role"], r["metric"], _fmt(r["baseline"], 4) or "n/a",
              *[_fmt(r["seeds"].get(s), 4) or "n/a" for s in seeds], _ci(r), _need(r),
              _fmt(r["p_value"], 4) or "n/a", *([_fmt(r["holm_p"], 4) or "n/a"] if d["holm"] else []),
              _outcome(r, "FAIL")]) for r in d["table"]]
    picks = [{"seed": p["train_seed"], "step": p["step"], "objective": _fmt(p["objective"], 4) or "n/a",
              "checkpoint": p["checkpoint"] or "none qualified", "rejected": p["rejected"]} for p in d["picks"]]
    members = [{"name": m.name, "role": m.role, "verdict": "PASS" if m.passed else "FAIL", "rules": m.verdict.rules,
                "gate_id": m.verdict.gate_id} for m in v.members]
    return render("suite.html.j2", d=d, head=head, rows=rows, picks=picks, members=members)


def _write(fmt: str, v: SuiteVerdict, path: Path) -> Path:
    """Write ``v`` in format ``fmt``: a built-in one, or a plugin's ``ReportWriter.write_suite``."""
    from evalgate.gate.report.writers import WRITERS

    if fmt not in FORMATS:
        suite_writer = WRITERS[fmt].suite_writer()
        assert suite_writer is not None  # _checked_suite refused the format otherwise
        return suite_writer(v, path)
    text = {"html": suite_html, "junit": suite_junit, "markdown": suite_markdown}.get(fmt)
    atomic_write(path, text(v) if text else json.dumps(v.as_dict(), indent=2, default=str))
    return path


def _checked_suite(outputs: Mapping[str, str | Path] | None) -> dict[str, Path]:
    """``outputs`` as paths, each format one a suite can be written in.

    Raises:
        BadInput: an unknown format (the known ones listed), or a plugin's format with no ``write_suite``.
    """
    from evalgate.gate.report.writers import WRITERS

    paths = {name: Path(p) for name, p in (outputs or {}).items() if p}
    for name in paths:
        WRITERS.require(name, " (report outputs)")
    bad = [n for n in paths if n not in FORMATS and WRITERS[n].write_suite is None]
    if bad:
        raise BadInput(f"report format(s) {', '.join(bad)} have no suite writer: a suite writes "
                       f"{', '.join(FORMATS)} and the plugin formats whose ReportWriter sets write_suite; drop "
                       f"{', '.join('--' + n for n in bad)} for a suite, or give the plugin's ReportWriter a "
                       "write_suite(suite_verdict, path) (docs/PLUGINS.md, \"Report formats\")")
    return paths


def write_suite_reports(verdict: SuiteVerdict, paths: Mapping[str, Path],
                        swept: SweepSummary | None = None) -> SuiteReport:
    """Write a suite verdict in each format of ``paths`` (checked by ``_checked_suite``) as one set
    (``core.fileio.replace_set``) and append its Markdown to ``$GITHUB_STEP_SUMMARY`` when set."""
    from evalgate.gate.report.writers import key_of

    files = {key_of(n): str(p) for n, p in replace_set(paths, lambda n, tmp: _write(n, verdict, tmp)).items()}
    summaries = [str(p) for p in _step_summary(suite_markdown(verdict)) if p != paths.get("markdown")]
    return SuiteReport(verdict, files, summaries, swept)


class SuiteReport(Report[SuiteVerdict]):
    """A suite's ``Report``: its ``SuiteVerdict`` and the files written from it; ``as_dict()``: ``evalgate gate
    --json``'s document."""


def suite_and_report(policy_path: str | Path, store: Store,
                     outputs: Mapping[str, str | Path] | None = None, actor: str | None = None,
                     accept_broken_chain: str | None = None, expect_head: tuple[int, str] | None = None,
                     progress: bool = False, train_run: str | None = None,
                     swept: SweepSummary | None = None,
                     variables: Mapping[str, str] | None = None) -> SuiteReport:
    """Load a suite, run it (``suite_run.run_suite``) and write the requested outputs (what ``evalgate gate`` does
    for a suite). A suite that decides nothing writes, in JSON, JUnit and Markdown, the error document saying why,
    then raises. ``variables``: values for ``$NAME`` in the suite's paths before the environment's (``load_suite``).

    Raises:
        BadInput: a format with no suite writer; and as ``gate.suite.load_suite`` and ``run_suite``.
    """
    from evalgate.gate.report.outputs import clear_outputs, write_error_outputs

    paths = _checked_suite(outputs)
    clear_outputs(paths)
    name = Path(policy_path).stem
    try:
        suite = load_suite(policy_path, variables)
        name = suite.name
        upd = {k: v for k, v in (("accept_broken_chain", accept_broken_chain), ("train_run", train_run)) if v}
        if upd:
            suite = _with(suite, upd)
        verdict = run_suite(suite, store, actor, expect_head=expect_head, progress=progress)
        return write_suite_reports(verdict, paths, swept)
    except BaseException as e:  # Ctrl-C or SIGTERM included (outputs.gate_and_report)
        write_error_outputs(error_document(policy_path, name, e), paths)
        raise


def report_stored(gate_id: str, store: Store,
                  outputs: Mapping[str, str | Path] | None = None) -> GateReport | SuiteReport:
    """Write a stored gate's outputs again (``evalgate report GATE_ID``), reading no split and logging nothing: a
    single gate's (``outputs.report_stored``) or a suite's, rebuilt from the suite's stored row and its members'
    stored gates (``suite_results.stored_suite``; every one checked against the access log).

    Raises:
        BadInput: no stored gate ``gate_id``; an unknown format, or one with no suite writer for a suite.
        RefusedByPolicy: the access log does not hold, or does not record the suite's or a member's verdict.
    """
    from evalgate.gate.history import stored_row
    from evalgate.gate.report import outputs as single

    row = stored_row(store, gate_id)
    if not is_suite_row(row):
        return single.report_stored(gate_id, store, outputs)
    paths = _checked_suite(outputs)
    return write_suite_reports(stored_suite(store, row), paths)


def _with(suite: Any, upd: dict[str, str]) -> Any:
    """``suite`` with ``upd`` (``accept_broken_chain``, ``train_run``) set on the suite and every member."""
    from evalgate.gate.suite import Suite, SuiteMember

    return Suite(suite.policy.model_copy(update=upd), suite.path,
                 [SuiteMember(m.spec, m.policy.model_copy(update=upd)) for m in suite.members])
