"""Split partition, manifests, encryption of private data, tier policies and the access log."""

from pathlib import Path

import pytest

from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.datasets.humaneval import import_humaneval
from evalgate.splits import SplitManager, load_manifest, partition, splits_dir
from evalgate.store import Store
from evalgate.views.audit import verify_chain


def test_partition_is_deterministic_disjoint_and_complete() -> None:
    ids = [f"HumanEval/{i}" for i in range(164)]
    a, b = partition(ids), partition(list(reversed(ids)))
    assert a == b  # independent of input order
    sizes = {k: len(v) for k, v in a.items()}
    assert sizes == {"smoke": 8, "dev": 52, "public": 52, "private": 52}
    flat = [i for v in a.values() for i in v]
    assert len(flat) == len(set(flat)) == 164 and set(flat) == set(ids)


@pytest.mark.usefixtures("memory_store")
def test_humaneval_import_manifests_and_private_encryption(home: Path) -> None:
    paths = import_humaneval(store=Store())
    assert sorted(p.stem for p in paths) == ["humaneval-dev", "humaneval-private", "humaneval-public",
                                             "humaneval-smoke"]
    priv = load_manifest("humaneval-private")
    assert priv.encrypted and priv.count == 52
    data = (splits_dir() / priv.data).read_bytes()
    assert b"HumanEval/" not in data and b"def " not in data  # no plaintext at rest
    smoke = load_manifest("humaneval-smoke")
    assert smoke.count == 8 and not smoke.encrypted and len(smoke.sha256) == 64


@pytest.mark.usefixtures("memory_store")
def test_changed_data_file_is_refused(home: Path) -> None:
    import_humaneval(store=Store())
    m = load_manifest("humaneval-smoke")
    f = splits_dir() / m.data
    f.write_bytes(f.read_bytes().replace(b"def ", b"def  ", 1))
    with pytest.raises(BadInput, match="changed since its manifest"):
        SplitManager(Store()).open("humaneval-smoke", "evaluation", "me")


def test_private_needs_key_and_release_gate_purpose(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import_humaneval(store=Store())
    mgr = SplitManager(Store())
    with pytest.raises(RefusedByPolicy, match="release-gate"):
        mgr.open("humaneval-private", "evaluation", "me")
    assert len(mgr.open("humaneval-private", "release-gate", "me").items) == 52
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "elsewhere"))  # a store made now finds no key file
    with pytest.raises(RefusedByPolicy, match="no key was found"):
        SplitManager(Store()).open("humaneval-private", "release-gate", "me")


@pytest.mark.usefixtures("memory_store")
def test_every_read_and_refusal_is_logged_in_a_valid_chain(home: Path) -> None:
    import_humaneval(store=Store())
    store = Store()
    mgr = SplitManager(store)
    mgr.open("humaneval-smoke", "evaluation", "alice")
    with pytest.raises(RefusedByPolicy):
        mgr.open("humaneval-private", "tuning", "bob")
    rows = store.access_rows()
    assert [(r.split, r.outcome) for r in rows[:4]] == [  # the import: every addition is logged
        (f"humaneval-{t}", "added") for t in ("smoke", "dev", "public", "private")]
    assert [(r.split, r.actor, r.outcome) for r in rows[4:]] == [
        ("humaneval-smoke", "alice", "read"), ("humaneval-private", "bob", "refused")]
    assert verify_chain(store)["ok"]


@pytest.mark.usefixtures("memory_store")
def test_unknown_split_lists_known(home: Path) -> None:
    import_humaneval(store=Store())
    with pytest.raises(BadInput, match="known splits: humaneval-dev"):
        SplitManager(Store()).open("humaneval-nope", "evaluation", "me")


@pytest.mark.usefixtures("memory_store")
def test_a_broken_manifest_is_named_with_its_line_in_one_message(home: Path) -> None:
    import_humaneval(store=Store())
    path = splits_dir() / "humaneval-dev.yaml"
    good = path.read_text()
    path.write_text(good.replace("tier: dev", "tier: devv"))
    with pytest.raises(BadInput) as e:
        load_manifest("humaneval-dev")
    line = good.splitlines().index("tier: dev") + 1
    assert e.value.message.startswith(f"invalid split manifest:\n  {path}:{line}: tier: Input should be 'smoke'")
    assert "errors.pydantic.dev" not in e.value.message  # not pydantic's dump
    path.write_text(good + "extra: [\n")
    with pytest.raises(BadInput, match=rf"{path}:\d+: split manifest is not valid YAML: .*; fix the syntax$"):
        load_manifest("humaneval-dev")
    path.write_bytes(good.encode() + b"# \xff\n")
    with pytest.raises(BadInput, match=rf"{path}:\d+: not UTF-8 text"):
        load_manifest("humaneval-dev")
    # 'splits list' still lists the other three humaneval splits, names the broken one on stderr, exits 2;
    # list_manifests (which budget-by-content checks use) stays strict
    from click.testing import CliRunner

    from evalgate.cli import main
    from evalgate.splits import list_manifests

    r = CliRunner().invoke(main, ["splits", "list"])
    assert r.exit_code == 2
    assert [ln.split()[0] for ln in r.stdout.splitlines()] == ["humaneval-private", "humaneval-public",
                                                               "humaneval-smoke"]
    assert f"{path}:" in r.stderr and "not UTF-8 text" in r.stderr
    with pytest.raises(BadInput, match="not UTF-8 text"):
        list_manifests()


@pytest.mark.usefixtures("memory_store")
def test_an_edited_manifest_is_read_at_once(home: Path) -> None:
    """Parsed manifests are kept by file text: an edit (the same length, within the same second) applies to the
    next load, and the original text gives the original manifest again."""
    import_humaneval(store=Store())
    path = splits_dir() / "humaneval-public.yaml"
    good = path.read_text()
    assert load_manifest("humaneval-public").effective_policy().max_reads == 20
    tighter = good + "policy:\n  max_reads: 3\n"
    path.write_text(tighter)
    assert load_manifest("humaneval-public").effective_policy().max_reads == 3
    path.write_text(tighter.replace("max_reads: 3", "max_reads: 4"))
    assert load_manifest("humaneval-public").effective_policy().max_reads == 4
    path.write_text(good)
    assert load_manifest("humaneval-public").effective_policy().max_reads == 20


@pytest.mark.usefixtures("memory_store")
def test_creating_the_private_key_says_where_it_is_once(home: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.splits import write_split

    key = home / "config" / "evalgate" / "private.key"  # XDG_CONFIG_HOME is home/config (conftest)
    write_split("p1", "private", [{"id": "a"}], {})
    err = capsys.readouterr().err
    assert key.is_file() and oct(key.stat().st_mode & 0o777) == "0o600"
    assert err.count("note:") == 1 and str(key) in err and "Back it up" in err and "secret" in err
    write_split("p2", "private", [{"id": "b"}], {})  # the key exists now: nothing to say
    monkeypatch.setenv("EVALGATE_PRIVATE_KEY", key.read_text().strip())
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "other"))
    write_split("p3", "private", [{"id": "c"}], {})  # a key from the environment: no file is created
    assert capsys.readouterr().err == "" and not (home / "other").exists()
