"""The gate policy file's reference (``docs/GATE.md``), generated from the models in ``gate/policy.py`` with the
protocol reference's table writer (``evalgate protocol docs --gate``)."""

from __future__ import annotations

from evalgate.gate import policy as policy_module
from evalgate.gate import suite as suite_module
from evalgate.protocol.docs import _checks, _fields_table, _md, _sections

GATE_DOC_PATH = "docs/GATE.md"


def gate_reference() -> str:
    """The Markdown reference of the gate policy file format (the content of ``docs/GATE.md``).

    Returns:
        Markdown text: the policy module's description, then one section per model (top level first) with a
        table of key, type (with constraints), default and meaning (whose text gives the unit), the model it is
        read from (its source in the code), and the checks made at load.
    """
    lines = [
        "# Gate policy reference",
        "",
        "<!-- Generated from the pydantic models in evalgate/gate/policy.py by `evalgate protocol docs --gate`;",
        f"     do not edit. Regenerate: evalgate protocol docs --gate > {GATE_DOC_PATH} (a test checks it). -->",
        "",
    ]
    lines += [_md(par) + "\n" for par in (policy_module.__doc__ or "").split("\n\n") if par.strip()]
    lines += ["Unknown keys are errors: the message names the file, the line, the key and the nearest known key. "
              "Paths are relative to the policy file's directory and may use `$VARS`. The gate's decision itself "
              "(best / last / failed per seed, the paired bootstrap, the verdict) is described in "
              "[GATING.md](GATING.md).", "",
              "An example: `gates/demo.yaml`.", ""]
    for key, model in _sections(policy_module.GatePolicy, ""):
        title = "Top level" if not key else f"`{key}`"
        lines += _model_section(model, f"{title}: {_md(model.__doc__ or '')}")
    lines += ["# Suite policies", "", _md(" ".join((suite_module.__doc__ or "").split())), "",
              "A policy file whose top level lists `members:` is a suite; the members' nested sections (`rules`, "
              "`guards`, `selection`) override the suite's key by key. An example: `gates/release-suite.yaml`.", ""]
    for model in (suite_module.SuitePolicy, suite_module.Member):
        lines += _model_section(model, _md(model.__doc__ or ""))
    return "\n".join(lines)


def _model_section(model: type, intro: str) -> list[str]:
    """One model's section of the reference: heading, ``intro``, source, field table, load-time checks."""
    lines = [f"## {model.__name__}", "", intro, "", f"Source: `{model.__module__}.{model.__qualname__}`.", ""]
    lines += _fields_table(model)
    checks = _checks(model)
    if checks:
        lines += ["", "Checked at load: " + " ".join(checks)]
    lines.append("")
    return lines
