"""``evalgate init``: the files it writes freeze and validate at once, a second init refuses and changes nothing, and
a failure writes nothing. The CLI runs in a temporary working directory, in this process (click's runner); the
workflow test runs every step as a user's CI does, in processes of their own."""

from __future__ import annotations

import csv
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.gate.policy import load_policy
from evalgate.protocol.spec import load_protocol
from tests.conftest import REPO, SHARED_DATA
from tests.helpers.cli import cli

pytestmark = pytest.mark.integration  # init writes and encrypts whole benchmarks: seconds each

HUMANEVAL_FILES = [  # hand-listed: what a user's repository holds after 'evalgate init --benchmark humaneval'
    ".github/workflows/evalgate-humaneval.yml", ".gitignore", "gates/humaneval.yaml", "protocols/humaneval.yaml",
    "splits/humaneval-dev.jsonl", "splits/humaneval-dev.yaml", "splits/humaneval-private.jsonl.enc",
    "splits/humaneval-private.yaml", "splits/humaneval-public.jsonl", "splits/humaneval-public.yaml",
    "splits/humaneval-smoke.jsonl", "splits/humaneval-smoke.yaml"]


def evalgate(cwd: Path, *args: str, env: dict[str, str] | None = None,
             unset: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """This checkout's CLI in ``cwd`` (``env``: variables set, ``unset``: removed, for the call only), in this
    process: its exit code, stdout and stderr as a shell sees them."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        r = cli(*args, env={**(env or {}), **dict.fromkeys(unset)})
    return subprocess.CompletedProcess(["evalgate", *args], r.exit_code, r.stdout, r.stderr)


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root`` with its bytes and modification time."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_init_writes_files_that_freeze_and_validate_at_once(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    r = evalgate(tmp_path, "init", "--benchmark", "humaneval", "--dir", "repo", "--json")
    assert r.returncode == 0, r.stderr
    assert files(repo) == HUMANEVAL_FILES
    # --json lists what init wrote: the protocol's lock is only refused when it exists, never written
    assert sorted(f["path"] for f in json.loads(r.stdout)["files"]) == HUMANEVAL_FILES
    assert json.loads(r.stdout)["counts"] == {"smoke": 8, "dev": 52, "public": 52, "private": 52}  # 164 = 8 + 3*52

    frozen = evalgate(repo, "protocol", "freeze", "protocols/humaneval.yaml")
    assert frozen.returncode == 0, frozen.stderr
    assert (repo / "protocols" / "humaneval.yaml.lock").is_file()
    assert evalgate(repo, "protocol", "verify", "protocols/humaneval.yaml").returncode == 0

    policy = load_policy(repo / "gates" / "humaneval.yaml", {"EVALGATE_BASELINE": str(tmp_path / "base")})
    assert (policy.protocol, policy.selection_split, policy.decision_split) == (
        "humaneval@1", "humaneval-dev", "humaneval-private")
    assert policy.protocol_file == str((repo / "protocols" / "humaneval.yaml").resolve())
    assert policy.baseline.checkpoint == str(tmp_path / "base")

    listed = evalgate(repo, "splits", "list", "--json", env={"EVALGATE_SPLITS": "splits"})
    assert listed.returncode == 0, listed.stderr
    tiers = {m["name"]: (m["tier"], m["count"], m["encrypted"]) for m in json.loads(listed.stdout)}
    assert tiers == {"humaneval-smoke": ("smoke", 8, False), "humaneval-dev": ("dev", 52, False),
                     "humaneval-public": ("public", 52, False), "humaneval-private": ("private", 52, True)}
    private = (repo / "splits" / "humaneval-private.jsonl.enc").read_bytes()
    assert b"HumanEval/" not in private and b"def " not in private  # only ciphertext of the private tier
    scan = subprocess.run([sys.executable, str(REPO / "tools" / "scan_private_plaintext.py"),
                           *(str(repo / f) for f in HUMANEVAL_FILES if not f.endswith(".jsonl"))],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO), "EVALGATE_SPLITS": str(repo / "splits")})
    # no private item's text in a file init wrote but the other tiers' data (whose items may share words with it)
    assert scan.returncode == 0 and "0 hit(s)" in scan.stdout, scan.stdout + scan.stderr
    audit = evalgate(tmp_path, "audit", "log", "--json")
    added = [row["split"] for row in json.loads(audit.stdout) if row["outcome"] == "added"]
    assert sorted(added) == ["humaneval-dev", "humaneval-private", "humaneval-public", "humaneval-smoke"]


def test_with_the_default_store_the_additions_are_logged_in_the_repositorys(tmp_path: Path) -> None:
    """No $EVALGATE_HOME: the store is ./.evalgate of wherever a command runs, so init --dir repo logs the splits'
    additions in repo/.evalgate, which 'evalgate audit' run in the repository reads."""
    no_env = ("EVALGATE_HOME", "EVALGATE_SPLITS")
    assert evalgate(tmp_path, "init", "--benchmark", "humaneval", "--dir", "repo", unset=no_env).returncode == 0
    assert not (tmp_path / ".evalgate").exists()
    audit = evalgate(tmp_path / "repo", "audit", "log", "--json", unset=no_env)
    assert audit.returncode == 0, audit.stderr
    assert sorted(r["split"] for r in json.loads(audit.stdout) if r["outcome"] == "added") == [
        "humaneval-dev", "humaneval-private", "humaneval-public", "humaneval-smoke"]


def test_a_second_init_refuses_and_changes_nothing(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    assert evalgate(repo, "init", "--benchmark", "humaneval").returncode == 0
    assert evalgate(repo, "protocol", "freeze", "protocols/humaneval.yaml").returncode == 0
    before = snapshot(repo)
    log_rows = len(json.loads(evalgate(repo, "audit", "log", "--json").stdout))

    again = evalgate(repo, "init", "--benchmark", "humaneval", "--checkpoint-glob", "other/*")
    assert again.returncode == 2
    assert "protocols/humaneval.yaml" in again.stderr and "--force" in again.stderr and "--dir" in again.stderr
    assert "Traceback" not in again.stderr
    # --force replaces the starter files, never the lock or a split: refused just the same
    forced = evalgate(repo, "init", "--benchmark", "humaneval", "--force")
    assert forced.returncode == 2 and "splits/humaneval-private.jsonl.enc" in forced.stderr
    assert snapshot(repo) == before
    assert len(json.loads(evalgate(repo, "audit", "log", "--json").stdout)) == log_rows


def test_force_replaces_a_starter_file_and_without_it_nothing_is_written(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    mine = repo / "gates" / "humaneval.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("name: mine\n")
    r = evalgate(repo, "init", "--benchmark", "humaneval")
    assert r.returncode == 2 and "gates/humaneval.yaml (pass --force to replace these)" in r.stderr
    assert files(repo) == ["gates/humaneval.yaml"] and mine.read_text() == "name: mine\n"
    assert evalgate(repo, "init", "--benchmark", "humaneval", "--force").returncode == 0
    assert files(repo) == HUMANEVAL_FILES
    assert yaml.safe_load(mine.read_text())["name"] == "humaneval"


def test_a_file_where_init_puts_a_folder_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "protocols").write_text("mine\n")
    (repo / ".github").write_text("mine\n")
    r = evalgate(repo, "init", "--benchmark", "humaneval")
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: init writes into the folders .github, protocols, but they are files, so "
                               "nothing was written; move them aside or choose another --dir"), r.stderr
    assert "internal error" not in r.stderr and files(repo) == [".github", "protocols"]


def test_bad_data_writes_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    with data.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "problem", "solution"])
        w.writerows([[i, f"{i} + 1?", str(i + 1)] for i in range(20)])
    repo = tmp_path / "repo"
    r = evalgate(tmp_path, "init", "--benchmark", "custom", "--name", "sums", "--from", str(data), "--dir", "repo",
                 "--map", "question=problem")
    assert r.returncode == 2
    assert "has no 'answer' field" in r.stderr and "--map answer=COLUMN" in r.stderr
    assert not repo.exists()
    r = evalgate(tmp_path, "init", "--benchmark", "custom", "--from", str(data), "--map", "question=problem",
                 "--map", "answer=nope", "--dir", "repo")
    assert r.returncode == 2 and "nope" in r.stderr and "solution" in r.stderr  # names the columns there are
    assert not repo.exists()
    r = evalgate(tmp_path, "init", "--benchmark", "gsm8k", "--dir", "repo")
    assert r.returncode == 2 and "--from" in r.stderr and not repo.exists()


def test_init_from_a_private_splits_items_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    """Adversary: 'evalgate init --benchmark custom --from' a copy of a private split's items dealt them into the new
    dev, public and smoke splits in clear. Refused now (exit 2) as 'splits add' refuses it, logged, nothing written."""
    env = {"EVALGATE_SPLITS": str(tmp_path / "splits"), "EVALGATE_HOME": str(tmp_path / "store")}
    items = [{"id": f"s{i}", "question": f"What is {i} times 37?", "answer": str(37 * i)} for i in range(20)]
    data = tmp_path / "secret.jsonl"
    data.write_text("".join(json.dumps(it) + "\n" for it in items))
    assert evalgate(tmp_path, "splits", "add", "secret", "--tier", "private", "--file", str(data),
                    env=env).returncode == 0
    copy = tmp_path / "copy.csv"  # the same items, ids renamed, as CSV
    with copy.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "question", "answer"])
        w.writerows([[f"c{i}", it["question"], it["answer"]] for i, it in enumerate(items)])
    r = evalgate(tmp_path, "init", "--benchmark", "custom", "--name", "fresh", "--from", str(copy), "--dir", "repo",
                 env=env)
    assert r.returncode == 2, r.stderr
    assert "repeat private split secret" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "repo").exists()
    log = json.loads(evalgate(tmp_path, "audit", "log", "--split", "secret", "--json", env=env).stdout)
    assert [row["outcome"] for row in log] == ["added", "refused"]


def test_custom_csv_data_with_a_mapping(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    with data.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["problem", "solution"])
        w.writerows([[f"What is {i} + 1?", str(i + 1)] for i in range(20)])
    r = evalgate(tmp_path, "init", "--benchmark", "custom", "--name", "sums", "--from", str(data), "--row-ids",
                 "--map", "question=problem", "--map", "answer=solution", "--dir", "repo")
    assert r.returncode == 0, r.stderr
    repo = tmp_path / "repo"
    assert evalgate(repo, "protocol", "freeze", "protocols/sums.yaml").returncode == 0
    smoke = [json.loads(line) for line in (repo / "splits" / "sums-smoke.jsonl").read_text().splitlines()]
    assert len(smoke) == 8 and all(it["answer"] == str(int(it["id"]) + 1) for it in smoke)
    assert set(smoke[0]) == {"id", "question", "answer"}
    assert load_policy(repo / "gates" / "sums.yaml", {"EVALGATE_BASELINE": "/base"}).decision_split == "sums-private"


@pytest.mark.skipif(not (SHARED_DATA / "gsm8k" / "test.jsonl").is_file(), reason="GSM8K's test.jsonl not found")
def test_custom_data_in_gsm8ks_format_needs_gold_and_gets_it(tmp_path: Path) -> None:
    """The neighbour of 'splits add --gold' (new-user finding): 'init --benchmark custom' from GSM8K-shaped rows
    (the first 40 of the real test.jsonl) kept each worked solution as the gold answer, which the starter
    exact-match protocol's run then refuses. Refused at init now, naming --gold; with --gold gsm8k the number after
    '####' is the answer (the first rows' by hand: Janet's ducks 18, the robe 3, Josh's house 70,000)."""
    from evalgate.protocol.spec import load_protocol
    from evalgate.runner.plan import check_items
    from evalgate.scoring.base import get_scorer

    rows = (SHARED_DATA / "gsm8k" / "test.jsonl").read_text().splitlines()[:40]
    data = tmp_path / "mine.jsonl"
    data.write_text("\n".join(rows) + "\n")
    r = evalgate(tmp_path, "init", "--benchmark", "custom", "--name", "gs", "--from", str(data), "--row-ids",
                 "--dir", "repo")
    assert r.returncode == 2 and "--gold gsm8k" in r.stderr and "#### N" in r.stderr, r.stderr
    assert not (tmp_path / "repo").exists()
    r = evalgate(tmp_path, "init", "--benchmark", "custom", "--name", "gs", "--from", str(data), "--row-ids",
                 "--gold", "gsm8k", "--dir", "repo")
    assert r.returncode == 0, r.stderr
    repo = tmp_path / "repo"
    items = [json.loads(line) for name in ("smoke", "dev", "public")
             for line in (repo / "splits" / f"gs-{name}.jsonl").read_text().splitlines()]
    gold = {it["id"]: it["answer"] for it in items}
    by_hand = {k: v for k, v in {"0": "18", "1": "3", "2": "70000"}.items() if k in gold}  # those not private
    assert by_hand and {k: gold[k] for k in by_hand} == by_hand, sorted(gold)
    assert all(json.loads(rows[int(it["id"])])["answer"] == it["solution"] for it in items)
    assert not any("#" in it["answer"] for it in items)
    check_items(items, get_scorer(load_protocol(repo / "protocols" / "gs.yaml")), "gs")
    r = evalgate(tmp_path, "init", "--benchmark", "gsm8k", "--gold", "gsm8k", "--from", str(data), "--dir", "x")
    assert r.returncode == 2 and "--gold are for --benchmark custom" in r.stderr


@pytest.mark.parametrize(("benchmark", "data", "project_protocol"), [
    ("humaneval", None, "humaneval-smoke.yaml"),
    ("gsm8k", SHARED_DATA / "gsm8k" / "test.jsonl", "gsm8k-cot.yaml"),
    ("math500", SHARED_DATA / "math500" / "test.jsonl", "math500.yaml"),
    ("mmlu-pro", SHARED_DATA / "mmlu-pro" / "test.jsonl", "mmlu-pro-cot.yaml"),
    ("xstest-safe", SHARED_DATA / "xstest" / "xstest_prompts.csv", "xstest-safe-2.yaml"),  # the version gates use
    ("xstest-unsafe", SHARED_DATA / "xstest" / "xstest_prompts.csv", "xstest-unsafe.yaml")])
def test_the_starter_protocol_is_the_projects_own(tmp_path: Path, benchmark: str, data: Path | None,
                                                  project_protocol: str) -> None:
    """Each starter protocol evaluates as evalgate's own protocol for that benchmark does: every resolved field
    but the name and version is the same."""
    if data is not None and not data.is_file():
        pytest.skip(f"{data} is absent (../shared/data holds the benchmark files on developer machines and CI)")
    r = evalgate(tmp_path, "init", "--benchmark", benchmark, "--dir", "repo", *(["--from", str(data)] if data else []))
    assert r.returncode == 0, r.stderr

    def fields(path: Path) -> dict[str, Any]:
        return {k: v for k, v in load_protocol(path).resolved.items() if k not in ("name", "version")}

    starter = tmp_path / "repo" / "protocols" / f"{benchmark}.yaml"
    assert fields(starter) == fields(REPO / "protocols" / project_protocol)


def test_the_workflow_installs_evalgate_from_a_checkout_and_names_the_files(tmp_path: Path) -> None:
    r = evalgate(tmp_path, "init", "--benchmark", "humaneval", "--name", "he", "--checkpoint-glob",
                 "/mnt/runs/*/seed-*/checkpoint-*", "--dir", "repo")
    assert r.returncode == 0, r.stderr
    doc = yaml.safe_load((tmp_path / "repo" / ".github" / "workflows" / "evalgate-he.yml").read_text())
    env = doc["env"]
    assert (env["EVALGATE_PROTOCOL"], env["EVALGATE_POLICY"]) == ("protocols/he.yaml", "gates/he.yaml")
    assert (env["EVALGATE_DEV_SPLIT"], env["EVALGATE_PRIVATE_SPLIT"]) == ("he-dev", "he-private")
    assert env["EVALGATE_CHECKPOINTS"] == "/mnt/runs/*/seed-*/checkpoint-*"
    (job,) = doc["jobs"].values()
    reqs = []
    for step in job["steps"]:
        for line in str(step.get("run", "")).splitlines():
            if "pip install" in line:
                args = shlex.split(line.split("pip install", 1)[1])
                skip = {i + 1 for i, a in enumerate(args) if a in ("--index-url", "-i", "--extra-index-url")}
                reqs += [a for i, a in enumerate(args) if not a.startswith("-") and i not in skip]
    assert reqs == ["torch==2.13.0", "$EVALGATE_SRC[hf]"]  # never 'evalgate' by name: on PyPI that is another project
    (src,) = [s for s in job["steps"] if s.get("with", {}).get("path") == ".evalgate-src"]
    assert src["with"]["repository"] == "${{ vars.EVALGATE_REPOSITORY }}"


def test_the_log_key_appears_where_the_workflows_comment_says(tmp_path: Path) -> None:
    """The workflow's comment on secrets.EVALGATE_LOG_KEY: 'evalgate audit verify' on a new store makes no key
    (it said the key appeared after a first verify), 'evalgate init' makes log-signing.key beside the private key
    when it logs the splits it adds, and 'audit verify' then checks the head with that key (and leaves it be)."""
    config = tmp_path / "config" / "evalgate"
    assert evalgate(tmp_path, "audit", "verify").returncode == 0
    assert not config.exists()
    assert evalgate(tmp_path, "init", "--benchmark", "humaneval", "--dir", "repo").returncode == 0
    assert sorted(p.name for p in config.iterdir()) == ["log-signing.key", "private.key"]
    key = (config / "log-signing.key").read_bytes()
    verify = evalgate(tmp_path, "audit", "verify")
    assert verify.returncode == 0 and f"from {config / 'log-signing.key'}" in verify.stdout, verify.stdout
    comment = (tmp_path / "repo" / ".github" / "workflows" / "evalgate-humaneval.yml").read_text()
    assert "after a first `evalgate audit verify`" not in comment and "log-signing.key beside" in comment
    assert (config / "log-signing.key").read_bytes() == key


def test_a_failed_rename_leaves_nothing_and_restores_a_replaced_file(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The move into place fails half-way (a full disk, say): the files moved in are removed, the one --force set
    aside is back, and no staging folder is left."""
    from evalgate.scaffold import starter as scaffold

    repo = tmp_path / "repo"
    mine = repo / "gates" / "humaneval.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("name: mine\n")
    real, calls = os.replace, []

    def flaky(src: Any, dst: Any) -> None:
        calls.append(dst)
        if len(calls) == 6:
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(scaffold.os, "replace", flaky)
    with pytest.raises(OSError):
        scaffold.init_project(scaffold.InitOptions("humaneval", directory=repo, force=True))
    assert files(repo) == ["gates/humaneval.yaml"] and mine.read_text() == "name: mine\n"
    assert len(calls) == 6


def test_every_registered_benchmark_has_a_starter() -> None:
    from evalgate import datasets
    from evalgate.datasets.preference import PREFERENCE_DATASETS  # reward-model data: init scaffolds no RM gate
    from evalgate.scaffold import starter as scaffold

    assert set(scaffold.BENCHMARKS) == {*datasets.known(), "custom"} - set(PREFERENCE_DATASETS)
    for name in scaffold.BENCHMARKS:
        assert (REPO / "evalgate" / "scaffold" / "templates" / f"protocol-{name}.yaml.j2").is_file()


@pytest.mark.timeout(900)  # the workflow's steps each load torch and a model (10 min seen on a loaded machine)
def test_the_workflow_init_writes_runs_its_steps_on_a_temporary_store(home: Path, tiny_checkpoint: Path) -> None:
    """The workflow ``init`` writes, run step by step by tests/test_ci_recipe.py's harness (``pip`` and ``gh``
    recorded, ``evalgate`` this checkout) on a repository init made from 14 addition items, with one checkpoint (the
    tiny random one): every step succeeds and the gate reaches a verdict."""
    from evalgate.demo.train import addition_items
    from evalgate.splits import load_key
    from tests.gate.test_real import _variant
    from tests.test_ci_recipe import _log_key_pem, run_workflow, shims

    repo, data = home / "repo", home / "items.jsonl"
    data.write_text("".join(json.dumps(it) + "\n" for it in addition_items("dev", 14)))  # 8 smoke, 2 per tier
    r = evalgate(home, "init", "--benchmark", "custom", "--name", "add", "--from", str(data), "--dir", "repo",
                 "--checkpoint-glob", str(home / "train" / "seed-*" / "checkpoint-*"))
    assert r.returncode == 0, r.stderr
    proto = repo / "protocols" / "add.yaml"
    proto.write_text(proto.read_text().replace("max_tokens: 256", "max_tokens: 8"))  # the user's edit, before freezing
    gate = repo / "gates" / "add.yaml"  # and the one the starter policy asks of a supervised fine-tune (no reward log)
    assert "  reward_hacking: true " in gate.read_text()
    gate.write_text(gate.read_text().replace("  reward_hacking: true ", "  reward_hacking: false "))
    assert evalgate(repo, "protocol", "freeze", "protocols/add.yaml",
                    env={"EVALGATE_HOME": str(home / "dev-machine")}).returncode == 0
    ck = _variant(tiny_checkpoint, home / "train" / "seed-1" / "checkpoint-4", 4)
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": 4, "log_history": [
        {"step": s, "loss": 1.0 / s, "grad_norm": 1.0, "learning_rate": 1e-4} for s in range(1, 5)]}))
    shims(home / "bin", home / "shim.log")
    env = {"PATH": f"{home / 'bin'}:/usr/bin:/bin", "HOME": str(home), "GITHUB_ACTIONS": "true", "CI": "true",
           "GITHUB_STEP_SUMMARY": str(home / "summary.md"), "EVALGATE_MODELS": os.environ["EVALGATE_MODELS"],
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "XDG_CONFIG_HOME": str(home / "runner-config")}
    context = {"github.workspace": str(repo), "github.actor": "octo", "github.run_id": "1",
               "secrets.EVALGATE_PRIVATE_KEY": load_key().decode(), "secrets.EVALGATE_VARS_TOKEN": "t",
               "secrets.EVALGATE_LOG_KEY": _log_key_pem(), "vars.EVALGATE_BASELINE": str(tiny_checkpoint)}
    results = {name: (code, out) for name, code, out in
               run_workflow(repo, context, env, workflow=repo / ".github" / "workflows" / "evalgate-add.yml")}
    assert list(results) == ["Install evalgate", "Check the store against the pinned access-log head",
                             "Check the protocol against its committed lock",
                             "Evaluate the checkpoints on the dev split", "Gate", "Pin the access-log head"]
    for name, (code, out) in results.items():
        assert code == (results["Gate"][0] if name == "Gate" else 0), f"{name}: exit {code}\n{out}"
    assert results["Gate"][0] in (0, 1)  # PASS or FAIL: a verdict, not bad input (2) or a crash (3)
    sweep = json.loads((repo / "reports" / "sweep.json").read_text())
    assert [(u["split"], u["status"]) for u in sweep["units"]] == [("add-dev", "done")]
    gate = json.loads((repo / "reports" / "gate.json").read_text())
    assert gate["verdict"] in ("PASS", "FAIL") and gate["seeds"][0]["train_seed"] == 1
    assert re.search(r"ci-octo +add-private \(private\) +release-gate +read", results["Pin the access-log head"][1])


def test_an_eighteen_row_csv_gets_a_human_audit_split_an_ignored_store_and_a_warning(tmp_path: Path) -> None:
    """Issue 44, items 8, 10, 11, 13: the issue's 18-row CSV became a 3-item private split without a word; blind
    rating had no human-audit split; '.evalgate/' (the store, a 500 MB converted model) was not ignored; the starter
    policy did not state the budget arithmetic. 18 rows with --human-audit 2: 8 smoke, 2 human-audit, then 8 dealt
    round-robin (dev 3, public 3, private 2)."""
    data = tmp_path / "data.csv"
    with data.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["question", "answer"])
        w.writerows([[f"What is {i} + 1?", str(i + 1)] for i in range(18)])
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text("__pycache__/")  # the user's, without a final newline
    r = evalgate(tmp_path, "init", "--benchmark", "custom", "--name", "sums", "--from", str(data), "--row-ids",
                 "--dir", "repo", "--human-audit", "2", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["counts"] == {"smoke": 8, "human-audit": 2, "dev": 3, "public": 3, "private": 2}
    assert doc["splits"]["human-audit"] == "sums-human-audit"
    manifest = yaml.safe_load((repo / "splits" / "sums-human-audit.yaml").read_text())
    assert (manifest["tier"], manifest["count"]) == ("human-audit", 2)
    (warning,) = doc["warnings"]
    assert "sums-private has 2 items" in warning and "needs at least 32 items" in warning
    assert f"warning: {warning}" in r.stderr
    assert (repo / ".gitignore").read_text().splitlines()[0] == "__pycache__/"
    assert ".evalgate/" in (repo / ".gitignore").read_text().splitlines()
    assert {"path": ".gitignore", "kind": "gitignore"} in doc["files"]
    policy = (repo / "gates" / "sums.yaml").read_text()
    assert "Reads per gate = one per training seed whose best checkpoint was never read + one" in policy
    assert "4 seeds + a baseline checkpoint: 5 > 4, refused every time" in policy
    assert "# train_run: NAME" in policy


def test_a_gitignore_that_ignores_the_store_is_left_alone(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text("/.evalgate\n")
    r = evalgate(tmp_path, "init", "--benchmark", "humaneval", "--dir", "repo", "--json")
    assert r.returncode == 0, r.stderr
    assert (repo / ".gitignore").read_text() == "/.evalgate\n"
    assert ".gitignore" not in [f["path"] for f in json.loads(r.stdout)["files"]]
    assert json.loads(r.stdout)["warnings"] == []  # 52 private items: 0.389 detectable, not too small


def test_train_run_names_the_run_the_starter_policy_gates(tmp_path: Path) -> None:
    """Issue 44, item 1: init's glob runs/*/seed-*/checkpoint-* matches several training runs, which the gate
    refuses together; --train-run writes the policy's train_run and narrows the default glob to that run."""
    r = evalgate(tmp_path, "init", "--benchmark", "humaneval", "--dir", "repo", "--train-run", "grpo")
    assert r.returncode == 0, r.stderr
    repo = tmp_path / "repo"
    assert load_policy(repo / "gates" / "humaneval.yaml", resolve_paths=False).train_run == "grpo"
    workflow = yaml.safe_load((repo / ".github" / "workflows" / "evalgate-humaneval.yml").read_text())
    assert workflow["env"]["EVALGATE_CHECKPOINTS"] == "runs/grpo/seed-*/checkpoint-*"
    bad = evalgate(tmp_path, "init", "--benchmark", "humaneval", "--dir", "other", "--train-run", "../x")
    assert bad.returncode == 2 and "--train-run '../x'" in bad.stderr and not (tmp_path / "other").exists()
