"""The one registry mechanism (``evalgate.core.registry.Registry``) and a scorer added as one module plus one
registration, through a real entry point (an installed dist-info on ``sys.path``), scored end to end."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.core.errors import BadInput
from evalgate.core.registry import ENTRY_POINT_GROUPS, Registry
from evalgate.scoring.base import SCORERS, STATUSES, score_statuses
from evalgate.store import Store
from tests.conftest import REPO
from tests.plugin_fixtures import _forget_plugins, install_dist  # noqa: F401 - the fixture is autouse

LAZY = "evalgate_registry_lazy_target"


def test_a_lazy_entry_is_imported_only_when_looked_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / f"{LAZY}.py").write_text("VALUE = {'answer': 42}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry[dict] = Registry("widget", dict)
    reg.register("w", f"{LAZY}:VALUE")
    assert "w" in reg and reg.names() == ["w"]
    assert LAZY not in sys.modules  # listing and membership import nothing
    assert reg["w"] == {"answer": 42} and LAZY in sys.modules
    sys.modules.pop(LAZY)


def test_unknown_name_is_one_error_with_the_nearest_and_every_known_name() -> None:
    reg: Registry[int] = Registry("gadget", int)
    reg.register("alpha", 1)
    reg.register("beta", 2)
    with pytest.raises(BadInput) as err:
        reg.require("alpah", " in file x.yaml")
    assert err.value.message == ("unknown gadget 'alpah' in file x.yaml; did you mean 'alpha'? "
                                 "known gadgets: alpha, beta")
    assert reg.get("gamma") is None and reg.get("beta") == 2


def test_a_name_registered_twice_is_refused() -> None:
    reg: Registry[int] = Registry("gadget", int)
    reg.register("alpha", 1)
    with pytest.raises(BadInput, match="gadget 'alpha' is registered twice"):
        reg.register("alpha", 2)


def test_every_entry_point_group_is_named_once() -> None:
    assert ENTRY_POINT_GROUPS == ("evalgate.backends", "evalgate.scorers", "evalgate.datasets",
                                  "evalgate.extract_rules", "evalgate.log_readers", "evalgate.report_writers",
                                  "evalgate.metrics", "evalgate.tools")


def test_a_plugin_of_the_wrong_type_is_refused_and_a_builtin_name_wins(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    install_dist(tmp_path, monkeypatch, "evalgate-bad-plugin",
                 {"evalgate_bad_plugin": "NOT_AN_ENTRY = 'text'\nSHADOW = 'text'\n"},
                 {"evalgate.scorers": {"notentry": "evalgate_bad_plugin:NOT_AN_ENTRY",
                                       "exact": "evalgate_bad_plugin:SHADOW"}}, (SCORERS,))
    assert SCORERS.origin("notentry") == "plugin" and SCORERS.origin("exact") == "built-in"
    with pytest.raises(BadInput, match=r"scorer 'notentry' \(plugin evalgate_bad_plugin:NOT_AN_ENTRY\) is a str, "
                                       r"not a ScorerEntry"):
        SCORERS.require("notentry")
    assert SCORERS["exact"].scorer == "evalgate.scoring.exact:ExactScorer"


# --- a scorer, added as one module and one registration (an entry point) -------------------------------------------

LENGTH_SCORER = '''
"""A third-party scorer: correct when the completion is at most ``max_chars`` characters, else ``too_long``."""
from evalgate.scoring.base import ScoreResult, ScorerEntry, ScorerOptions


class LengthOptions(ScorerOptions):
    """Options of the ``brevity`` scorer."""

    max_chars: int = 10
    """Longest completion that counts as correct, in characters. Default: 10."""


class BrevityScorer:
    name = "brevity"
    required_fields = ()

    def __init__(self, protocol, options):
        self.max_chars = options.max_chars

    def score(self, samples):
        return [ScoreResult(1.0, "correct", s.text, None) if len(s.text) <= self.max_chars
                else ScoreResult(0.0, "too_long", None, f"{len(s.text)} > {self.max_chars} characters")
                for s in samples]


ENTRY = ScorerEntry(LengthOptions, BrevityScorer, statuses=("correct", "too_long"))
'''


def replay_run(tmp_path: Path, scorer: dict[str, Any], texts: dict[str, str], **protocol: Any) -> tuple[Path, Any]:
    """A frozen protocol, a split ``sums`` of the items in ``texts`` and replay RunOptions playing ``texts`` back
    (no model runs)."""
    from evalgate.protocol.freeze import freeze
    from evalgate.runner.evaluate import RunOptions
    from evalgate.splits import write_split

    proto = tmp_path / "p.yaml"
    proto.write_text(yaml.safe_dump({
        "name": "plugin", "version": "1", "prompt": {"chat_template": "none", "template": "{{ prompt }}"},
        "sampling": {"max_tokens": 8}, "scorer": scorer, **protocol}))
    freeze(proto, Store)
    write_split("sums", "dev", [{"id": k, "prompt": "1+1?", "answer": "2"} for k in texts], {"source": "test"})
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({"item_id": k, "turn": 0, "text": t}) + "\n" for k, t in texts.items()))
    return proto, RunOptions(backend="replay", backend_options={"file": str(replay)}, progress=False)


def model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkpoint directory without a tokenizer (chat_template none needs none)."""
    from evalgate.runner import prompts

    def no_tokenizer(model_dir: Path) -> None:
        raise BadInput("no tokenizer")

    monkeypatch.setattr(prompts, "load_tokenizer", no_tokenizer)
    import numpy as np
    from safetensors.numpy import save

    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "llama"}')
    (d / "model.safetensors").write_bytes(save({"w": np.zeros(4, dtype=np.uint8)}))
    return d


@pytest.mark.usefixtures("memory_store")
def test_a_scorer_plugin_is_validated_at_freeze_and_scores_a_run(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.runner.evaluate import evaluate
    from evalgate.store import Store
    from evalgate.views.samples import sample_statuses

    install_dist(tmp_path / "site", monkeypatch, "evalgate-brevity", {"evalgate_brevity": LENGTH_SCORER},
                 {"evalgate.scorers": {"brevity": "evalgate_brevity:ENTRY"}}, (SCORERS,))
    assert "brevity" in SCORERS and "evalgate_brevity" not in sys.modules
    with pytest.raises(BadInput, match=r"scorer.options.max_char: unknown key 'max_char'; did you mean 'max_chars'"):
        replay_run(tmp_path, {"name": "brevity", "options": {"max_char": 3}}, {"a": "2"})
    proto, opts = replay_run(tmp_path, {"name": "brevity", "options": {"max_chars": 3}},
                             {"a": "2", "b": "it is two"})
    doc = evaluate(proto, model_dir(tmp_path, monkeypatch), "sums", opts, Store())
    assert doc["counts"]["by_status"] == {"correct": 1, "too_long": 1}
    assert float(doc["metrics"]["pass@1"]) == 0.5
    assert "too_long" in score_statuses() and "too_long" in sample_statuses() and "too_long" not in STATUSES


# --- a backend, added as one module and one registration (an entry point) ------------------------------------------

ECHO_BACKEND = '''
"""A third-party backend: answers every prompt with the prompt itself, upper-cased when ``shout`` is set."""
from pydantic import Field

from evalgate.backends.base import (CHANGES_OUTPUTS, BackendEntry, BackendOptions, Completion, GenerationResult)


class EchoOptions(BackendOptions):
    """Options of the ``echo`` backend."""

    shout: bool = Field(False, json_schema_extra=CHANGES_OUTPUTS)
    """Upper-case the echo. Default: false."""


class EchoBackend:
    name = "echo"

    def __init__(self, model_dir, options, tokenizer=None):
        self.options = options

    def generate(self, requests, on_result=None):
        out = []
        for r in requests:
            text = r.prompt.upper() if self.options.shout else r.prompt
            res = GenerationResult(r, tuple(Completion(text, len(text.split()), "stop") for _ in r.seeds))
            if on_result is not None:
                on_result(res)
            out.append(res)
        return out

    def info(self):
        return {"engine": "echo"}


ENTRY = BackendEntry(EchoOptions, EchoBackend, extra="test", engine="json", context="none",
                     resources=lambda o: {"num_cpus": 2})
'''


@pytest.mark.usefixtures("memory_store")
def test_a_backend_plugin_runs_an_evaluation_with_its_own_cache_key(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.backends.base import BACKENDS, check_backend
    from evalgate.backends.settings import generation_settings
    from evalgate.runner.agent.checks import structured_call_backends
    from evalgate.runner.evaluate import RunOptions, evaluate
    from evalgate.store import Store
    from evalgate.sweep.ray_cluster import unit_resources

    install_dist(tmp_path / "site", monkeypatch, "evalgate-echo", {"evalgate_echo": ECHO_BACKEND},
                 {"evalgate.backends": {"echo": "evalgate_echo:ENTRY"}}, (BACKENDS,))
    with pytest.raises(BadInput, match=r"unknown echo backend option\(s\) \['shuot'\]; known: shout"):
        check_backend("echo", {"shuot": True})
    proto, _ = replay_run(tmp_path, {"name": "exact", "options": {"answer_field": "answer"}}, {"a": "", "b": ""})
    ckpt, store = model_dir(tmp_path, monkeypatch), Store()
    # the prompt is "1+1?"; the exact scorer's gold is "2": the echo is wrong, and says so for both items
    doc = evaluate(proto, ckpt, "sums", RunOptions(backend="echo", progress=False), store)
    assert doc["counts"]["by_status"] == {"wrong": 2} and doc["counts"]["generated"] == 2
    assert generation_settings("echo", check_backend("echo", {"shout": True})) == {
        "backend": "echo", "versions": {}, "shout": True}  # no versions declared: none recorded
    shouted = evaluate(proto, ckpt, "sums", RunOptions(backend="echo", backend_options={"shout": True},
                                                       progress=False), store)
    assert shouted["counts"]["generated"] == 2  # another cache key: nothing reused from the plain echo
    assert unit_resources(RunOptions(backend="echo"), check_backend("echo", {})) == {"num_cpus": 2}
    assert "echo" not in structured_call_backends() and structured_call_backends() == ["openai", "replay"]


# --- a report format, added as one module and one registration (an entry point) ------------------------------------

CSV_WRITER = '''
"""A third-party report format: one CSV line per gate rule (rule, outcome)."""
import csv
from pathlib import Path

from evalgate.gate.report.writers import ReportWriter


def write(verdict, path, audit):
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["rule", "outcome"])
        w.writerows([r.rule, "pass" if r.passed else "fail"] for r in verdict.rules)
    return path


WRITER = ReportWriter(write, "Write the rules as CSV here.", flags=("--rules-csv",))
'''


@pytest.mark.integration
def test_a_report_format_plugin_gets_its_flag_and_is_written_by_the_cli(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import subprocess

    from evalgate.gate import load_policy, run_gate
    from evalgate.gate.report.writers import WRITERS
    from tests import gate_fixtures as fx

    site = install_dist(tmp_path / "site", monkeypatch, "evalgate-rules-csv", {"evalgate_rules_csv": CSV_WRITER},
                        {"evalgate.report_writers": {"rules-csv": "evalgate_rules_csv:WRITER"}}, (WRITERS,))
    built = fx.build(tmp_path / "runs", seeds=(1, 2))
    policy = tmp_path / "gate.yaml"
    policy.write_text(yaml.safe_dump(fx.policy_dict(built["baseline"], min_seeds=2)))
    v = run_gate(load_policy(policy), built["store"], evaluate_decision=False)
    assert not v.passed  # seed 1's reward-hacking triad (tests/gate/test_gate.py)
    out = tmp_path / "rules.csv"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    r = subprocess.run([sys.executable, "-m", "evalgate.cli", "report", v.gate_id or "", "--rules-csv", str(out),
                        "--junit", str(tmp_path / "r.xml")], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1, r.stderr  # FAIL, as the gate decided
    assert f"rules_csv: {out}" in r.stdout
    lines = out.read_text().splitlines()
    assert lines[0] == "rule,outcome" and len(lines) == 1 + len(v.rules)
    assert f"{v.rules[0].rule},{'pass' if v.rules[0].passed else 'fail'}" in lines
    assert (tmp_path / "r.xml").is_file()  # the built-in formats alongside
    helped = subprocess.run([sys.executable, "-m", "evalgate.cli", "gate", "--help"], capture_output=True, text=True,
                            env=env, timeout=300)
    assert "--rules-csv FILE" in helped.stdout and "Write the rules as CSV here." in helped.stdout


def test_write_reports_refuses_an_unknown_format(tmp_path: Path) -> None:
    from evalgate.gate.report.outputs import write_reports

    with pytest.raises(BadInput, match=r"unknown report format 'sarif' \(report outputs\); known report formats: "
                                       r"html, json, junit, markdown"):
        write_reports(None, {"sarif": tmp_path / "x"}, None)  # type: ignore[arg-type]


# --- a dataset, added as one module and one registration (an entry point) ------------------------------------------

TOY_DATASET = '''
"""A third-party benchmark: sums, read from a JSONL file of ``{"q": "1+1", "a": "2"}`` records."""
from evalgate.datasets.base import Dataset
from evalgate.core.fileio import iter_jsonl


def toy_items(path):
    raw = path.read_bytes()
    records = iter_jsonl(raw, path)
    return [{"id": f"toy/{n}", "question": r["q"], "answer": r["a"]} for n, (_, r) in enumerate(records)], raw


DATASET = Dataset("toy", "Toy sums (a plugin); --from toy.jsonl", toy_items, {"source": "tests", "license": "CC0"})
MISNAMED = Dataset("other", "registered under another name", toy_items)
'''


@pytest.mark.usefixtures("memory_store")
def test_a_dataset_plugin_is_imported_as_tiered_splits_by_the_cli(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from evalgate.cli import main
    from evalgate.datasets import DATASETS, known
    from evalgate.splits import load_manifest, read_items

    install_dist(tmp_path / "site", monkeypatch, "evalgate-toy", {"evalgate_toy": TOY_DATASET},
                 {"evalgate.datasets": {"toy": "evalgate_toy:DATASET", "toy2": "evalgate_toy:MISNAMED"}}, (DATASETS,))
    assert known() == ["gsm8k", "gsm8k-pref", "humaneval", "humaneval-pref", "ifeval", "math500", "math500-pref",
                       "mmlu-pro", "rewardbench", "toy", "toy2", "xstest-safe", "xstest-unsafe"] and (
        "evalgate_toy" not in sys.modules)
    src = tmp_path / "toy.jsonl"
    src.write_text("".join(json.dumps({"q": f"{i}+{i}", "a": str(2 * i)}) + "\n" for i in range(12)))
    r = CliRunner().invoke(main, ["splits", "import", "toy", "--from", str(src)])
    assert r.exit_code == 0, r.output
    # 12 items: 8 smoke (SMOKE_SIZE), the other 4 dealt round-robin dev, public, private, dev
    assert {t: load_manifest(f"toy-{t}").count for t in ("smoke", "dev", "public", "private")} == \
        {"smoke": 8, "dev": 2, "public": 1, "private": 1}
    assert load_manifest("toy-dev").provenance["license"] == "CC0"
    smoke = read_items(load_manifest("toy-smoke"))
    assert all(int(it["answer"]) == 2 * int(it["question"].split("+")[0]) for it in smoke)
    r = CliRunner().invoke(main, ["splits", "import", "toy2", "--from", str(src)])
    assert r.exit_code == 2 and "dataset 'toy2' (plugin) is a Dataset named 'other'" in r.output


# --- a training-log format, added as one module and one registration (an entry point) ------------------------------

CSV_LOG = '''
"""A third-party training-log format: a CSV file with a header row (``step`` and metric columns)."""
import csv
from pathlib import Path

from evalgate.diagnostics.log import LogReader, from_records


def read_csv_log(path):
    with Path(path).open(newline="", encoding="utf-8") as f:
        records = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
    return from_records(records, str(path), "csv")


READER = LogReader(read_csv_log, "a metrics .csv file", recognises=lambda t: t.endswith(".csv"),
                   find=lambda d: sorted(d.glob("*.csv")))
'''


def test_a_log_format_plugin_is_read_found_in_a_run_directory_and_diagnosed(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from evalgate.cli import main
    from evalgate.diagnostics import find_train_log, read_path
    from evalgate.diagnostics.log import LOG_READERS

    install_dist(tmp_path / "site", monkeypatch, "evalgate-csv-log", {"evalgate_csv_log": CSV_LOG},
                 {"evalgate.log_readers": {"csv": "evalgate_csv_log:READER"}}, (LOG_READERS,))
    run = tmp_path / "run"
    (run / "checkpoint-2").mkdir(parents=True)
    # the checkpoint's trainer state stops at step 2; the CSV log goes on to step 4, so it is the run's log
    (run / "checkpoint-2" / "trainer_state.json").write_text(json.dumps(
        {"log_history": [{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}]}))
    (run / "metrics.csv").write_text("step,reward,kl\n1,0.1,0.01\n2,0.2,0.02\n3,0.3,0.03\n4,0.4,0.04\n")
    log = read_path(run / "metrics.csv")
    assert log.format == "csv" and log.steps == (1, 4)
    assert log.series["reward"] == [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.4)] and log.used["kl"] == "kl"
    found = find_train_log(run)
    assert found is not None and found.format == "csv" and found.source == str(run / "metrics.csv")
    assert found.choice is not None and "checkpoint-2/trainer_state.json (steps 1..2)" in found.choice
    r = CliRunner().invoke(main, ["diagnose", str(run), "--json"])
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(r.output)
    assert doc["seeds"][0]["format"] == "csv" and doc["seeds"][0]["steps"] == [1, 4]


# --- an extraction rule, added as one module and one registration (an entry point) --------------------------------

LAST_WORD_RULE = '''
"""A third-party extraction rule: the completion's last whitespace-separated word, trailing period dropped."""
from evalgate.scoring.extract import ExtractionRule


def last_word(text):
    words = text.split()
    return words[-1].rstrip(".") or None if words else None


RULE = ExtractionRule(last_word, "the last word, a trailing period dropped")
'''


@pytest.mark.usefixtures("memory_store")
def test_an_extraction_rule_plugin_validates_in_a_protocol_and_scores_a_run(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.runner.evaluate import evaluate
    from evalgate.scoring.extract import RULES
    from evalgate.store import Store

    scorer = {"name": "exact", "options": {"answer_field": "answer"}}
    with pytest.raises(BadInput, match=r"p.yaml:2: extraction.rule: unknown extraction rule 'last_word'; did you mean "
                                       r"'last_number'\? known extraction rules: boxed, code, gsm8k, last_number, "
                                       r"mmlu_pro, mmlu_pro_l1, raw"):
        replay_run(tmp_path, scorer, {"a": "x"}, extraction={"rule": "last_word"})
    install_dist(tmp_path / "site", monkeypatch, "evalgate-last-word", {"evalgate_last_word": LAST_WORD_RULE},
                 {"evalgate.extract_rules": {"last_word": "evalgate_last_word:RULE"}}, (RULES,))
    proto, opts = replay_run(tmp_path, scorer, {"a": "so the sum is 2.", "b": "2 is not it, three"},
                             extraction={"rule": "last_word"})
    doc = evaluate(proto, model_dir(tmp_path, monkeypatch), "sums", opts, Store())
    assert doc["counts"]["by_status"] == {"correct": 1, "wrong": 1}  # "2" matches the gold 2; "three" does not
