"""Bad input gives one clear line, exit code 2, and leaves the store unchanged."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalgate.datasets.humaneval import import_humaneval
from evalgate.store import Store
from tests.conftest import REPO
from tests.helpers.cli import cli


def store_snapshot(home: Path) -> bytes:
    db = home / "home" / "evalgate.duckdb"
    if not db.exists():
        return b""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    rows = [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
            for t in ("runs", "samples", "generations", "access_log", "checkpoints")]
    con.close()
    return repr(rows).encode()


@pytest.fixture
def frozen(home: Path) -> Path:
    import_humaneval(store=Store())
    assert cli("protocol", "freeze", str(REPO / "protocols" / "humaneval-smoke.yaml")).exit_code == 0
    return REPO / "protocols" / "humaneval-smoke.yaml"


@pytest.mark.usefixtures("memory_store")
def test_missing_checkpoint(home: Path, frozen: Path) -> None:
    before = store_snapshot(home)
    r = cli("run", "--protocol", str(frozen), "--checkpoint", str(home / "nope"), "--split", "humaneval-smoke")
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [f"error: checkpoint {home / 'nope'} not found; pass an HF model "
                                             "directory or a .gguf file"]
    assert store_snapshot(home) == before


def test_an_unknown_split_is_refused_before_a_gguf_is_converted(home: Path, frozen: Path, gguf_path: Path,
                                                                 tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # fresh-user finding: the README's quick start with a typo'd split converted the GGUF first (30 s here)
    models = tmp_path / "models"
    monkeypatch.setenv("EVALGATE_MODELS", str(models))  # no earlier conversion to reuse
    for args in (["run", "--checkpoint", str(gguf_path)], ["sweep", "--checkpoints", str(gguf_path)]):
        r = cli(*args, "--protocol", str(frozen), "--split", "humaneval-smok")
        assert r.exit_code == 2 and "unknown split 'humaneval-smok'" in r.stderr, (args, r.stderr)
        assert "converting" not in r.stderr and not models.exists(), args


def test_unknown_split(home: Path, frozen: Path, tiny_checkpoint: Path) -> None:
    before = store_snapshot(home)
    r = cli("run", "--protocol", str(frozen), "--checkpoint", str(tiny_checkpoint), "--split", "nope")
    assert r.exit_code == 2
    assert "unknown split 'nope'" in r.stderr and "known splits: humaneval-dev" in r.stderr
    assert "Traceback" not in r.stderr
    assert store_snapshot(home) == before


def test_malformed_protocol(home: Path, tiny_checkpoint: Path) -> None:
    import_humaneval(store=Store())
    before = store_snapshot(home)  # the import's logged additions
    bad = home / "bad.yaml"
    bad.write_text("name: x\nversion: 1\nprompt:\n  template: hi\nscorer:\n  name: humaneval\n"
                   "sampling:\n  tempreature: 1\n")
    r = cli("run", "--protocol", str(bad), "--checkpoint", str(tiny_checkpoint), "--split", "humaneval-smoke")
    assert r.exit_code == 2
    assert f"{bad}:8: sampling.tempreature: unknown key 'tempreature'; did you mean 'temperature'?" in r.stderr
    assert store_snapshot(home) == before  # the refused run wrote nothing


def test_protocol_drift_exits_1(home: Path, tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text((REPO / "protocols" / "humaneval-smoke.yaml").read_text())
    assert cli("protocol", "freeze", str(p)).exit_code == 0
    p.write_text(p.read_text().replace("max_tokens: 192", "max_tokens: 193"))
    r = cli("protocol", "verify", str(p))
    assert r.exit_code == 1 and "sampling.max_tokens: locked=192 now=193" in r.stderr


def test_release_gate_purpose_is_reserved(home: Path, frozen: Path, tiny_checkpoint: Path) -> None:
    r = cli("run", "--protocol", str(frozen), "--checkpoint", str(tiny_checkpoint), "--split", "humaneval-private",
                 "--purpose", "release-gate", "--actor", "mallory")
    assert r.exit_code == 2 and "reserved for 'evalgate gate'" in r.stderr
    import duckdb  # the refused attempt is logged (issue 13 point 4), and nothing else is written

    con = duckdb.connect(str(home / "home" / "evalgate.duckdb"), read_only=True)
    assert con.execute("SELECT outcome, split, purpose, actor FROM access_log WHERE outcome <> 'added'").fetchall() \
        == [("refused", "humaneval-private", "release-gate", "mallory")]
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)


def test_private_split_read_by_run_is_refused_and_logged(home: Path, frozen: Path, tiny_checkpoint: Path) -> None:
    r = cli("run", "--protocol", str(frozen), "--checkpoint", str(tiny_checkpoint), "--split", "humaneval-private")
    assert r.exit_code == 2 and "may be read only for purpose release-gate" in r.stderr
    import duckdb

    con = duckdb.connect(str(home / "home" / "evalgate.duckdb"), read_only=True)
    assert con.execute("SELECT outcome, split FROM access_log WHERE outcome!='added'").fetchall() == [
        ("refused", "humaneval-private")]
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)


@pytest.mark.parametrize(("purpose", "message"), [("evaluation", "may be read only for purpose release-gate"),
                                                    ("release-gate", "reserved for 'evalgate gate'")])
def test_a_refused_private_read_is_refused_before_the_checkpoint_is_verified(
        home: Path, frozen: Path, tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch, purpose: str,
        message: str) -> None:
    # new-user finding: a run on a private split re-converted the GGUF (2 min) and only then said the purpose is
    # refused; the byte-by-byte check (verify=True) is for reads that trust decisions rest on, not refused ones
    import evalgate.runner.plan as plan

    calls: list[bool] = []
    real = plan.resolve_checkpoint

    def spy(*args: object, verify: bool = False, **kwargs: object) -> object:
        calls.append(verify)
        return real(*args, verify=verify, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(plan, "resolve_checkpoint", spy)
    r = cli("run", "--protocol", str(frozen), "--checkpoint", str(tiny_checkpoint), "--split", "humaneval-private",
            "--purpose", purpose)
    assert r.exit_code == 2 and message in r.stderr, r.stderr
    assert calls == [False]  # resolved once, for the refusal row's digest, without the byte-by-byte check
    import duckdb

    con = duckdb.connect(str(home / "home" / "evalgate.duckdb"), read_only=True)
    rows = con.execute("SELECT outcome, purpose, checkpoint_digest FROM access_log WHERE outcome <> 'added'").fetchall()
    assert [(o, p) for o, p, _ in rows] == [("refused", purpose)] and rows[0][2]
    assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)


@pytest.mark.parametrize(("flags", "message"), [
    (["--backend", "tgi"], "unknown backend 'tgi'; known backends: hf, openai, replay, vllm"),
    (["--backend-option", "token_budgett=5"], "unknown hf backend option(s) ['token_budgett']; known: device, "
                                              "dtype, token_budget"),
    (["--backend", "openai"], "the openai backend needs the server's URL"),
    # values, not just names (fresh-user test: these used to fail after the read, with exit 3)
    (["--backend-option", "token_budget=abc"], "token_budget='abc': Input should be a valid integer"),
    (["--backend-option", "token_budget=-5"], "token_budget=-5: Input should be greater than or equal to 1"),
    (["--backend-option", "dtype=float99"], "dtype='float99': Input should be 'float32', 'bfloat16' or 'float16'"),
    (["--backend-option", "device=cuda:7"], "hf option device=cuda:7: no such CUDA device here"),
    (["--backend", "openai", "--backend-option", "base_url=notaurl"], "base_url='notaurl': String should match"),
    (["--seed", str(2 ** 64)], "--seed"),
    (["--step", "-1"], "Invalid value for '--step': -1 is not in the range x>=0"),  # was stored as step -1
    # a flag that sets an option is refused where the backend has no such option (it used to be dropped)
    (["--backend", "openai", "--backend-option", "base_url=http://127.0.0.1:9/v1", "--device", "cuda"],
     "--device does not apply to the openai backend (it has no device option"),
    (["--backend", "vllm", "--device", "cpu"], "--device does not apply to the vllm backend"),
])
def test_bad_backend_is_refused_before_any_read(home: Path, frozen: Path, tiny_checkpoint: Path, flags: list[str],
                                                message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Found by a fresh-user test: a typo'd backend used to log (and spend) a budgeted read before failing.
    monkeypatch.delenv("EVALGATE_OPENAI_BASE_URL", raising=False)
    before = store_snapshot(home)
    r = cli("run", "--protocol", str(frozen), "--checkpoint", str(tiny_checkpoint), "--split", "humaneval-public",
                 *flags)
    assert r.exit_code == 2, r.stderr
    assert message in r.stderr
    assert store_snapshot(home) == before


def test_bad_checkpoint_files_are_refused_before_any_read(home: Path, frozen: Path, tiny_checkpoint: Path,
                                                          gguf_path: Path, tmp_path: Path) -> None:
    # fresh-user findings: both used to fail with exit 3 ("internal error"), the truncated one after the read
    before = store_snapshot(home)
    page = tmp_path / "model.gguf"
    page.write_bytes(b"<html>404 Not Found</html>")  # what a failed download often leaves
    r = cli("run", "--protocol", str(frozen), "--checkpoint", str(page), "--split", "humaneval-smoke")
    assert r.exit_code == 2, r.stderr
    assert "is not a GGUF file" in r.stderr and "b'<htm'" in r.stderr
    cut_gguf = tmp_path / "cut.gguf"  # the magic bytes right, the rest cut off: a download stopped early
    with open(gguf_path, "rb") as src:
        cut_gguf.write_bytes(src.read(4096))
    r = cli("run", "--protocol", str(frozen), "--checkpoint", str(cut_gguf), "--split", "humaneval-smoke")
    assert r.exit_code == 2, r.stderr  # was exit 3, "could not convert GGUF ..."
    assert f"checkpoint {cut_gguf} is not a complete GGUF file" in r.stderr and "truncated" in r.stderr
    cut = tmp_path / "cut"
    cut.mkdir()
    for f in tiny_checkpoint.iterdir():
        if f.name != "model.safetensors":
            (cut / f.name).symlink_to(f)
    with open(tiny_checkpoint / "model.safetensors", "rb") as src:
        (cut / "model.safetensors").write_bytes(src.read(1 << 20))  # the first MiB: a cut-off copy
    r = cli("run", "--protocol", str(frozen), "--checkpoint", str(cut), "--split", "humaneval-smoke")
    assert r.exit_code == 2, r.stderr
    assert f"checkpoint weights {cut / 'model.safetensors'} cannot be read" in r.stderr
    assert "truncated or damaged" in r.stderr
    assert store_snapshot(home) == before


@pytest.mark.integration  # a real process: its exit code and stderr, as a shell sees them
def test_damaged_store_says_what_to_do_and_is_left_as_it_was(tmp_path: Path) -> None:
    bad = tmp_path / "badhome"
    bad.mkdir()
    garbage = b"not a database " * 100
    (bad / "evalgate.duckdb").write_bytes(garbage)
    r = subprocess.run([sys.executable, "-m", "evalgate.cli", "audit"], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "EVALGATE_HOME": str(bad)}, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "cannot open the store" in r.stderr and "restore it from a backup" in r.stderr
    assert "EVALGATE_HOME" in r.stderr
    assert (bad / "evalgate.duckdb").read_bytes() == garbage
