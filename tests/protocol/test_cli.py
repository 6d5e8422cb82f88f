"""``evalgate protocol show --json``, ``protocol diff`` and ``protocol docs`` through the click CLI."""

import hashlib
import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.protocol.docs import DOC_PATH, SCORERS_DOC_PATH
from tests.conftest import REPO
from tests.helpers.cli import cli_out


def test_show_json_prints_resolved_protocol_and_its_hash(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("Q: {{ question }}\nA:")
    p = tmp_path / "mini.yaml"
    p.write_text(yaml.safe_dump({"name": "mini", "version": "1", "scorer": {"name": "exact"},
                                 "prompt": {"template_file": "t.j2", "chat_template": "none"}}))
    # Every default as docs/PROTOCOL.md states it, the template file inlined and its path dropped.
    expected = {
        "name": "mini", "version": "1", "description": "",
        "prompt": {"template": "Q: {{ question }}\nA:", "chat_template": "none", "system_prompt": None,
                   "system_role": "merge", "fewshot_target_field": "target", "response_prefix": None,
                   "fewshot": []},
        "sampling": {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_tokens": 256, "stop": [], "n": 1,
                     "seed": 0, "repetition_penalty": 1.0, "allow_greedy_n": False},
        "pass_at_k": [1],
        "scorer": {"name": "exact", "options": {}},
        "extraction": {"rule": "raw", "score_truncated": False},
        "tools": {"allowed": [], "network": False, "timeout_s": 10.0, "max_calls": 0, "memory_mb": 1024},
        "execution": {"timeout_s": 10.0, "cpu_s": 10, "memory_mb": 1024, "file_size_mb": 16, "workers": 0},
    }
    canonical = json.dumps(expected, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    sha = hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    code, out = cli_out("protocol", "show", str(p), "--json")
    assert code == 0
    assert json.loads(out) == {"ref": "mini@1", "sha256": sha, "locked": False, "resolved": expected}
    assert cli_out("protocol", "freeze", str(p))[0] == 0
    assert json.loads(cli_out("protocol", "show", str(p), "--json")[1])["locked"] is True


def test_diff_shows_each_differing_field_with_both_values(tmp_path: Path) -> None:
    base = {"name": "t", "version": "1", "prompt": {"template": "{{ q }}"}, "scorer": {"name": "exact"},
            "sampling": {"temperature": 0.7, "stop": ["\n\n"], "max_tokens": 32}}
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump(base))
    changed = json.loads(json.dumps(base))
    changed["version"] = "2"
    changed["sampling"].update(temperature=1.0, stop=["\n"])
    b.write_text(yaml.safe_dump(changed))

    code, out = cli_out("protocol", "diff", str(a), str(b))
    assert code == 1  # as diff(1): 1 when the inputs differ
    assert out.splitlines() == [
        "3 field(s) differ between t@1 and t@2:",
        '  sampling.stop: a=["\\n\\n"] b=["\\n"]',
        "  sampling.temperature: a=0.7 b=1.0",
        '  version: a="1" b="2"',
    ]
    code, out = cli_out("protocol", "diff", str(a), str(b), "--json")
    assert code == 1
    doc = json.loads(out)
    assert doc["a"]["ref"] == "t@1" and doc["b"]["ref"] == "t@2" and doc["a"]["sha256"] != doc["b"]["sha256"]
    assert doc["diff"] == [{"field": "sampling.stop", "a": ["\n\n"], "b": ["\n"]},
                           {"field": "sampling.temperature", "a": 0.7, "b": 1.0},
                           {"field": "version", "a": "1", "b": "2"}]
    code, out = cli_out("protocol", "diff", str(a), str(a))
    assert code == 0 and out.startswith("identical content (")


def test_verify_prints_field_level_diff_and_exits_1(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    doc = {"name": "t", "version": "1", "prompt": {"template": "{{ q }}"}, "scorer": {"name": "exact"}}
    p.write_text(yaml.safe_dump(doc))
    assert cli_out("protocol", "freeze", str(p))[0] == 0
    assert cli_out("protocol", "verify", str(p))[0] == 0
    doc["prompt"]["system_prompt"] = "Be brief."
    p.write_text(yaml.safe_dump(doc))
    code, out = cli_out("protocol", "verify", str(p))
    assert code == 1
    assert '  prompt.system_prompt: locked=null now="Be brief."' in out.splitlines()


def test_verify_json_prints_one_document_ok_or_the_drift(tmp_path: Path) -> None:
    """A CI step reading 'protocol verify' had no --json (README: '--json prints one JSON document on stdout')."""
    p = tmp_path / "p.yaml"
    doc = {"name": "t", "version": "1", "prompt": {"template": "{{ q }}"}, "scorer": {"name": "exact"}}
    p.write_text(yaml.safe_dump(doc))
    assert cli_out("protocol", "freeze", str(p))[0] == 0
    r = CliRunner().invoke(main, ["protocol", "verify", str(p), "--json"])
    sha = json.loads((tmp_path / "p.yaml.lock").read_text())["sha256"]
    assert r.exit_code == 0 and json.loads(r.stdout) == {"ok": True, "path": str(p), "ref": "t@1", "sha256": sha}
    doc["sampling"] = {"max_tokens": 64}
    p.write_text(yaml.safe_dump(doc))
    r = CliRunner().invoke(main, ["protocol", "verify", str(p), "--json"])
    out = json.loads(r.stdout)
    assert r.exit_code == 1 and (out["ok"], out["exit_code"]) == (False, 1)
    assert out["diff"] == [{"field": "sampling.max_tokens", "locked": 256, "now": 64}]  # 256: the field's default
    assert "no longer matches its lock" in out["error"]


def test_verify_refuses_what_freeze_and_run_refuse(tmp_path: Path, home: Path, monkeypatch) -> None:
    """Issue 28 item 18: a lock that agrees with the file (e.g. committed from another machine's store) while this
    store recorded other content under the same name@version: freeze refuses it (exit 2), so verify must not say ok."""
    p = tmp_path / "p.yaml"
    doc = {"name": "t", "version": "1", "prompt": {"template": "{{ q }}"}, "scorer": {"name": "exact"}}
    p.write_text(yaml.safe_dump(doc))
    assert cli_out("protocol", "freeze", str(p))[0] == 0  # this store: t@1 -> content A
    doc["prompt"]["template"] = "Q: {{ q }}"
    p.write_text(yaml.safe_dump(doc))
    p.with_name("p.yaml.lock").unlink()
    monkeypatch.setenv("EVALGATE_HOME", str(tmp_path / "other-machine"))
    assert cli_out("protocol", "freeze", str(p))[0] == 0  # a fresh store: t@1 -> content B, lock of B written
    monkeypatch.setenv("EVALGATE_HOME", str(home / "home"))
    code, out = cli_out("protocol", "freeze", str(p))
    assert code == 2 and "already frozen" in out
    code, out = cli_out("protocol", "verify", str(p))
    assert code == 2, out
    assert "t@1" in out and "Bump 'version'" in out and "ok:" not in out
    monkeypatch.setenv("EVALGATE_HOME", str(tmp_path / "other-machine"))
    code, out = cli_out("protocol", "verify", str(p))  # where it was frozen, it is fine
    assert code == 0 and out.startswith("ok: t@1")


def test_committed_protocol_reference_is_up_to_date() -> None:
    code, out = cli_out("protocol", "docs")
    assert code == 0
    assert (REPO / DOC_PATH).read_text(encoding="utf-8") == out, (
        f"{DOC_PATH} is stale: regenerate it with 'evalgate protocol docs > {DOC_PATH}'")


def test_committed_scorer_reference_is_up_to_date_and_covers_every_option() -> None:
    from evalgate.scoring.base import SCORERS

    code, out = cli_out("protocol", "docs", "--scorers")
    assert code == 0
    assert (REPO / SCORERS_DOC_PATH).read_text(encoding="utf-8") == out, (
        f"{SCORERS_DOC_PATH} is stale: regenerate it with 'evalgate protocol docs --scorers > {SCORERS_DOC_PATH}'")
    for name, entry in SCORERS.items():
        assert f"## `{name}`" in out
        for field in entry.options_model().model_fields:
            assert f"| `{field}` |" in out


def test_committed_gate_reference_is_up_to_date_and_covers_every_policy_field() -> None:
    """Issue 17: docs/GATE.md is generated from the gate policy models; a field added, renamed or re-documented
    there without regenerating the file fails here."""
    from evalgate.gate.docs import GATE_DOC_PATH
    from evalgate.gate.policy import GatePolicy
    from evalgate.protocol.docs import _sections

    code, out = cli_out("protocol", "docs", "--gate")
    assert code == 0
    assert (REPO / GATE_DOC_PATH).read_text(encoding="utf-8") == out, (
        f"{GATE_DOC_PATH} is stale: regenerate it with 'evalgate protocol docs --gate > {GATE_DOC_PATH}'")
    sections = _sections(GatePolicy, "")
    assert {m.__name__ for _, m in sections} >= {"GatePolicy", "Baseline", "Selection", "Guards", "GateRules"}
    for _, model in sections:
        assert f"## {model.__name__}" in out and f"Source: `{model.__module__}.{model.__qualname__}`" in out
        own = out.split(f"## {model.__name__}\n", 1)[1].split("\n## ", 1)[0]  # a key may recur in other sections
        for name, field in model.model_fields.items():
            row = next(line for line in own.splitlines() if line.startswith(f"| `{name}` |"))
            assert " ".join((field.description or "").split())[:30].replace("``", "`") in row
    # a table row has exactly four cells: a pipe inside a cell (the metric pattern's) is escaped
    assert all(line.replace("\\|", "").count("|") == 5 for line in out.splitlines() if line.startswith("| `"))


def test_run_and_sweep_of_a_drifted_protocol_exit_1_as_their_help_says(tmp_path: Path) -> None:
    """DESIGN.md: exit 1 on protocol drift; 'sweep --help' said only 2 or 3 besides 0."""
    p = tmp_path / "p.yaml"
    doc = {"name": "t", "version": "1", "prompt": {"template": "{{ q }}"}, "scorer": {"name": "exact"}}
    p.write_text(yaml.safe_dump(doc))
    assert cli_out("protocol", "freeze", str(p))[0] == 0
    p.write_text(yaml.safe_dump({**doc, "sampling": {"max_tokens": 64}}))
    nothing = str(tmp_path / "no-checkpoint")  # drift is refused before the checkpoint or split is looked at
    for args in (["run", "--checkpoint", nothing, "--split", "s"], ["sweep", "--checkpoints", nothing, "--split", "s"]):
        code, out = cli_out(*args[:1], "--protocol", str(p), *args[1:])
        assert code == 1 and "no longer matches its lock" in out, (args, out)
    code, out = cli_out("sweep", "--help")
    assert code == 0 and "1 when the protocol no longer matches its lock" in " ".join(out.split())
