"""The CI recipe (``.github/workflows/evalgate-example.yml``, docs/CI.md) run without GitHub: its ``run:`` steps in
order, under ``bash -eo pipefail`` as GitHub runs them, on a temporary repository and store, with ``${{ ... }}``
filled from a context like the one Actions provides. ``uses:`` steps (checkout, setup-python, cache, artifact)
are GitHub's and skipped: the store simply stays where it is between two runs, as a restored cache or a
persistent volume leaves it. In the whole-workflow test ``pip`` and ``gh`` are stand-ins that record their
arguments and ``evalgate`` is this checkout's CLI; the install step's own commands run for real in
``test_the_install_step_installs_evalgate_from_the_checkout``. The checkpoint is the tiny random checkpoint
(SmolLM2's tokenizer; training seed 1, step 4) on 2-item splits.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalgate.demo.train import addition_items
from evalgate.splits import load_key, write_split
from tests.conftest import REPO
from tests.gate.test_real import _variant

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # a venv install and model runs: 15 min, not 5

WORKFLOW = REPO / ".github" / "workflows" / "evalgate-example.yml"
EXPR = re.compile(r"\$\{\{\s*([A-Za-z_][\w.]*)\s*\}\}")


def substitute(text: str, context: dict[str, str]) -> str:
    """Fill ``${{ a.b }}`` from ``context`` (unset ``vars``/``secrets`` are empty, as on GitHub); any other
    expression fails the test, so the workflow uses only what this harness understands."""
    def one(m: re.Match[str]) -> str:
        key = m.group(1)
        if key in context:
            return context[key]
        assert key.startswith(("vars.", "secrets.")), f"the workflow uses ${{{{ {key} }}}}, unknown to the test"
        return ""
    return EXPR.sub(one, text)


def run_workflow(repo: Path, context: dict[str, str], env: dict[str, str],
                 stop_after: str | None = None, workflow: Path = WORKFLOW) -> list[tuple[str, int, str]]:
    """Run the job's steps of ``workflow`` (default the example) in order as GitHub would: after a failed step only
    steps whose ``if:`` holds ``always()`` run; ``steps.ID.outcome == 'success'`` terms are evaluated on the steps
    run so far.

    Returns:
        (step name, exit code, output) per ``run:`` step that ran.
    """
    doc = yaml.safe_load(workflow.read_text())
    (job,) = doc["jobs"].values()
    base = {**env, **{k: substitute(str(v), {**context}) for k, v in doc["env"].items()}}
    context = {**context, **{f"env.{k}": v for k, v in base.items()}}
    results: list[tuple[str, int, str]] = []
    outcome: dict[str, str] = {}
    failed = False
    for step in job["steps"]:
        if "run" not in step or not condition(step.get("if"), failed, outcome):
            continue
        step_env = {**base, **{k: substitute(str(v), context) for k, v in step.get("env", {}).items()}}
        r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", substitute(step["run"], context)],
                           cwd=repo, env=step_env, capture_output=True, text=True, timeout=600)
        results.append((step["name"], r.returncode, r.stdout + r.stderr))
        failed = failed or r.returncode != 0
        if "id" in step:
            outcome[step["id"]] = "success" if r.returncode == 0 else "failure"
        if step["name"] == stop_after:
            break
    return results


def condition(expr: str | None, failed: bool, outcome: dict[str, str]) -> bool:
    """GitHub's ``if:`` for the forms the workflow uses: none (``success()``), ``always()``, and terms
    ``steps.ID.outcome == 'success'`` joined by ``&&``; any other form fails the test."""
    if expr is None:
        return not failed
    ok = True
    for term in (t.strip() for t in expr.split("&&")):
        m = re.fullmatch(r"steps\.([\w-]+)\.outcome == 'success'", term)
        assert term == "always()" or m, f"if: {expr!r} is a form the test does not evaluate"
        ok = ok and (m is None or outcome.get(m.group(1)) == "success")
    return ok


def shims(bin_dir: Path, log: Path) -> None:
    """``evalgate`` runs this checkout; ``pip`` and ``gh`` only record their arguments (no network, no GitHub)."""
    bin_dir.mkdir()
    scripts = {
        "evalgate": f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m evalgate.cli "$@"\n',
        "pip": f'#!/bin/sh\necho "pip $*" >> "{log}"\n',
        "gh": f'#!/bin/sh\necho "gh $*" >> "{log}"\n',
        "python": f'#!/bin/sh\nexec "{sys.executable}" "$@"\n',
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)


def user_repo(home: Path, tiny_checkpoint: Path) -> tuple[Path, Path]:
    """A user's repository as the workflow expects it (protocol with its committed lock, split manifests with the
    private data encrypted, a gate policy) and a training run's checkpoints outside it."""
    repo = home / "repo"
    (repo / "protocols").mkdir(parents=True)
    (repo / "gates").mkdir()
    os.environ["EVALGATE_SPLITS"] = str(repo / "splits")  # the home fixture restores it after the test
    write_split("my-dev", "dev", addition_items("dev", 2), {"source": "test"})
    write_split("my-private", "private", addition_items("private", 2), {"source": "test"})
    proto = yaml.safe_load((REPO / "protocols" / "addition.yaml").read_text())
    proto.update(name="my-protocol")
    proto["sampling"]["max_tokens"] = 3
    (repo / "protocols" / "my-protocol.yaml").write_text(yaml.safe_dump(proto))
    subprocess.run([sys.executable, "-m", "evalgate.cli", "protocol", "freeze", "protocols/my-protocol.yaml"],
                   cwd=repo, env={**os.environ, "PYTHONPATH": str(REPO), "EVALGATE_HOME": str(home / "dev-machine")},
                   check=True, capture_output=True)
    (repo / "gates" / "release.yaml").write_text(yaml.safe_dump({
        "name": "release", "protocol": "my-protocol@1", "protocol_file": "../protocols/my-protocol.yaml",
        "selection_split": "my-dev", "decision_split": "my-private", "baseline": {"checkpoint": "$EVALGATE_BASELINE"},
        "rules": {"min_seeds": 1, "max_truncation_rate": 1.0, "reward_hacking": False}}))  # an SFT log: no reward
    train = home / "train"
    # one checkpoint (the tiny random one: the workflow's plumbing, not the model, is tested): each costs a process
    # that loads torch
    ck = _variant(tiny_checkpoint, train / "seed-1" / "checkpoint-4", 4)
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": 4, "log_history": [
        {"step": s, "loss": 1.0 / s, "grad_norm": 1.0, "learning_rate": 1e-4} for s in range(1, 5)]}))
    return repo, train


def test_the_example_workflow_runs_its_steps_on_a_temporary_store(home: Path, tiny_checkpoint: Path) -> None:
    repo, train = user_repo(home, tiny_checkpoint)
    key = load_key().decode()
    log = home / "shim.log"
    shims(home / "bin", log)
    summary = home / "step-summary.md"
    env = {"PATH": f"{home / 'bin'}:/usr/bin:/bin", "HOME": str(home), "GITHUB_ACTIONS": "true", "CI": "true",
           "GITHUB_STEP_SUMMARY": str(summary), "EVALGATE_MODELS": os.environ["EVALGATE_MODELS"],
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "XDG_CONFIG_HOME": str(home / "runner-config")}  # no key file on the runner: the secret is the key
    context: dict[str, Any] = {"github.workspace": str(repo), "github.actor": "octo", "github.run_id": "1",
                               "secrets.EVALGATE_PRIVATE_KEY": key, "secrets.EVALGATE_VARS_TOKEN": "t",
                               "secrets.EVALGATE_LOG_KEY": _log_key_pem(),
                               "vars.EVALGATE_BASELINE": str(tiny_checkpoint),
                               "vars.EVALGATE_CHECKPOINT_ROOT": str(train)}

    # first run, fresh store, no head pinned
    results = {name: (code, out) for name, code, out in run_workflow(repo, context, env)}
    assert list(results) == ["Install evalgate", "Check the store against the pinned access-log head",
                             "Check the protocol against its committed lock",
                             "Evaluate the checkpoints on the dev split", "Gate", "Pin the access-log head"]
    for name, (code, out) in results.items():
        assert code == (results["Gate"][0] if name == "Gate" else 0), f"{name}: exit {code}\n{out}"
    assert results["Gate"][0] in (0, 1)  # PASS or FAIL: a verdict either way, not bad input (2) or a crash (3)
    assert "first run on a fresh store" in results["Check the store against the pinned access-log head"][1]
    assert "seed 1" in results["Evaluate the checkpoints on the dev split"][1]  # the runs --by-step table
    run = json.loads((repo / "reports" / "run-seed-1-checkpoint-4.json").read_text())
    assert run["status"] == "complete" and (run["checkpoint"]["train_seed"], run["checkpoint"]["step"]) == (1, 4)
    gate = json.loads((repo / "reports" / "gate.json").read_text())
    assert gate["verdict"] in ("PASS", "FAIL") and gate["seeds"][0]["train_seed"] == 1
    assert (repo / "reports" / "gate.junit.xml").read_text().startswith("<?xml")
    assert (repo / "reports" / "release.html").is_file() and (repo / "reports" / "gate.md").is_file()
    assert summary.read_text().strip() == (repo / "reports" / "gate.md").read_text().strip()
    head = (repo / "reports" / "access-log-head.txt").read_text().strip()
    assert re.fullmatch(r"\d+:[0-9a-f]{64}", head)
    assert f"gh variable set EVALGATE_LOG_HEAD --body {head}" in log.read_text().splitlines()
    pinned = results["Pin the access-log head"][1]
    assert re.search(r"ci-octo +my-private \(private\) +release-gate +read ci", pinned)  # the audit log rows

    # next run, on a fresh runner (nothing of the first one's config left): the restored store holds the pinned
    # head, and its signature verifies with the key from the secret, so the check passes
    shutil.rmtree(home / "runner-config", ignore_errors=True)
    context["vars.EVALGATE_LOG_HEAD"] = head
    (name, code, out), = run_workflow(repo, context, env, stop_after="Check the store against the pinned "
                                      "access-log head")[1:]
    assert code == 0 and f"head {head}" in out
    # a lost store (no cache restored, or an older one): the check fails and nothing else runs
    shutil.move(repo / ".evalgate-store", home / "lost-store")
    results2 = run_workflow(repo, context, env)
    # nothing else runs: no new head is pinned and no store saved over the last good one; a person looks first
    assert [(n, c) for n, c, _ in results2] == [("Install evalgate", 0),
                                                ("Check the store against the pinned access-log head", 1)]
    assert "BROKEN" in results2[1][2]


def _log_key_pem() -> str:
    """A new Ed25519 key as PEM text, as a repository's ``EVALGATE_LOG_KEY`` secret holds it."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()).decode()


def install_step() -> str:
    doc = yaml.safe_load(WORKFLOW.read_text())
    (job,) = doc["jobs"].values()
    (step,) = [s for s in job["steps"] if s.get("name") == "Install evalgate"]
    return str(step["run"])


def test_no_pip_command_names_evalgate_on_an_index() -> None:
    """Every requirement a pip command of the workflow names is the CPU torch pin or a path: ``evalgate`` (and its
    extras) on the package index is another project, which the Gate step would hand the private key."""
    reqs = []
    for line in WORKFLOW.read_text().splitlines():
        if "pip install" not in line:
            continue
        args = shlex.split(line.split("pip install", 1)[1])
        values = {i + 1 for i, a in enumerate(args) if a in ("--index-url", "-i", "--extra-index-url")}
        reqs += [a for i, a in enumerate(args) if not a.startswith("-") and i not in values]
    assert reqs == ["torch==2.13.0", "$EVALGATE_SRC[hf]"]
    first = install_step().strip().splitlines()[0]
    assert "torch==2.13.0" in first and "download.pytorch.org/whl/cpu" in first  # before anything pulls torch in


def _throwaway_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A new venv that sees this environment's packages (a .pth line); returns (venv, its site-packages)."""
    import sysconfig

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv, site


def _copy_checkout(dst: Path) -> Path:
    """The checkout's files (tracked and untracked, not ignored) copied to ``dst``, as a fresh clone holds them."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dst / name)
    return dst


def test_the_install_step_installs_evalgate_from_the_checkout(tmp_path: Path) -> None:
    """The step's own commands, run by bash in a throwaway venv that sees this environment's packages (a .pth
    line): evalgate is built from a copy of this checkout as evalgate-gate, and the venv's ``evalgate`` command
    and ``import evalgate`` are that copy. PIP_NO_DEPS=1 keeps pip from touching the shared packages (they
    satisfy every dependency already; on a runner pip installs them)."""
    venv, site = _throwaway_venv(tmp_path)
    src = _copy_checkout(tmp_path / "ws" / ".evalgate-src")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "EVALGATE_SRC": str(src),
           "PIP_NO_DEPS": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", install_step()], cwd=tmp_path / "ws",
                       env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "evalgate (evalgate-gate), version 0.1.0" in r.stdout
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import evalgate, importlib.metadata as m; "
                            "print(evalgate.__file__); print(m.distribution('evalgate-gate').read_text('RECORD'))"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(site / "evalgate" / "__init__.py"))
    assert "evalgate/cli.py" in where.stdout


def readme_block(containing: str) -> str:
    """The README's fenced bash block holding ``containing``."""
    blocks = re.findall(r"^```bash\n(.*?)^```", (REPO / "README.md").read_text(), re.M | re.S)
    (block,) = [b for b in blocks if containing in b]
    return str(block)


def test_the_readme_installs_evalgate_into_a_training_environment(tmp_path: Path) -> None:
    """Issue 44, item 5: the README never said how to reach evalgate from your own repository or the trainer's
    environment, and the Quick start's ``python -c 'from evalgate.checkpoints.wheels import ...'`` failed with the
    system python. The README's commands run here as written (``/path/to/evalgate`` is a copy of this checkout): its
    install block in a throwaway venv standing for the trainer's (PIP_NO_DEPS=1 as above), then the Quick start's
    first lines from a user's repository, with the checkout's environment activated as the Quick start says."""
    venv, site = _throwaway_venv(tmp_path)
    src = _copy_checkout(tmp_path / "evalgate")
    user = tmp_path / "my-repo"
    user.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "PIP_NO_DEPS": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1"}
    install = readme_block("pip install -e").replace("/path/to/evalgate", str(src))
    r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", install], cwd=user, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "evalgate (evalgate-gate), version 0.1.0" in r.stdout
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import evalgate.training.callback; print(evalgate.__file__)"],
                           cwd=user, env=env, capture_output=True, text=True, timeout=300)
    assert where.returncode == 0, where.stderr
    assert where.stdout.strip() == str(src / "evalgate" / "__init__.py")  # editable: the checkout itself

    # the Quick start, with the checkout's .venv (here the venv above, as `make setup` would have made it)
    (src / ".venv").symlink_to(venv)
    quick = readme_block("evalgate init --benchmark humaneval").replace("/path/to/evalgate", str(src))
    lines = [ln for ln in quick.splitlines() if ln.startswith(("source ", "CKPT="))] + ['echo "CKPT=$CKPT"']
    bare = {**env, "PATH": "/usr/bin:/bin"}  # a new shell: the system python, nothing activated
    r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", "\n".join(lines)], cwd=user,
                       env=bare, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    ckpt = Path(r.stdout.split("CKPT=")[-1].strip())
    assert ckpt.suffix == ".gguf" and ckpt.is_file()
    # without the Quick start's first line, the system python has no evalgate (what the user hit)
    r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", "\n".join(lines[1:])], cwd=user,
                       env=bare, capture_output=True, text=True, timeout=300)
    assert r.returncode != 0, r.stdout


def test_the_splits_the_recipe_commits_are_not_ignored() -> None:
    """docs/CI.md commits split manifests and their data (private data encrypted): git must not ignore them, or a
    fresh checkout lacks the splits."""
    for name in ("splits/my-dev.yaml", "splits/my-dev.jsonl", "splits/my-private.yaml", "splits/my-private.jsonl.enc"):
        r = subprocess.run(["git", "check-ignore", "--no-index", "-q", name], cwd=REPO, capture_output=True)
        assert r.returncode == 1, f"{name} is ignored by .gitignore"
    assert subprocess.run(["git", "check-ignore", "--no-index", "-q", "splits/.my-dev.yaml.0a1b.tmp"],
                          cwd=REPO).returncode == 0
