"""Gate outputs: a self-contained HTML release report (jinja2), JSON and JUnit XML.

The HTML file has no external scripts, styles, fonts or images: everything is inline, so it opens offline and
from a CI artifact store.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jinja2

from evalgate.gate import Verdict
from evalgate.store import now

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("evalgate", "templates"),
                          autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "n/a" if v != v else f"{v:.4f}"
    return "" if v is None else str(v)


_ENV.filters["fmt"] = _fmt


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def render_html(verdict: Verdict, audit: dict[str, Any] | None = None) -> str:
    """The release report as one HTML document."""
    return _ENV.get_template("report.html.j2").render(
        v=verdict, d=verdict.as_dict(), generated_at=now().isoformat(timespec="seconds"), audit=audit or {})


def write_html(verdict: Verdict, path: str | Path, audit: dict[str, Any] | None = None) -> Path:
    p = Path(path)
    _atomic_write(p, render_html(verdict, audit))
    return p


def write_json(verdict: Verdict, path: str | Path) -> Path:
    p = Path(path)
    _atomic_write(p, json.dumps(verdict.as_dict(), indent=2, default=str))
    return p


def junit_xml(verdict: Verdict) -> str:
    """JUnit XML: one testsuite for the gate, one testcase per rule; failed rules carry a <failure>."""
    suite = ET.Element("testsuite", name=f"evalgate.{verdict.policy.name}", tests=str(len(verdict.rules)),
                       failures=str(sum(not r.passed for r in verdict.rules)), errors="0")
    for r in verdict.rules:
        case = ET.SubElement(suite, "testcase", classname=f"evalgate.{verdict.policy.name}", name=r.rule)
        if not r.passed:
            ET.SubElement(case, "failure", message=r.detail).text = r.detail
        else:
            ET.SubElement(case, "system-out").text = r.detail
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def write_junit(verdict: Verdict, path: str | Path) -> Path:
    p = Path(path)
    _atomic_write(p, junit_xml(verdict))
    return p
