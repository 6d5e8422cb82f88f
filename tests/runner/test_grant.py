"""Purpose ``release-gate`` (the one purpose a private split admits) is refused by the library for any caller but
the gate: ``evaluate`` needs a ``ReleaseGrant`` the gate issued, for that split, with reads left; each refusal is
logged in the access log."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalgate.core.errors import RefusedByPolicy
from evalgate.demo.train import addition_items
from evalgate.runner.evaluate import ReleaseGrant, RunOptions, evaluate
from evalgate.runner.grant import _reserve_release_reads
from evalgate.splits import SplitManager, load_manifest, write_split
from evalgate.store import Store
from tests.runner.test_record import addition_protocol

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory


def refused_rows(store: Store) -> list[tuple[str, str, str]]:
    return [(r.split, r.purpose, r.detail) for r in store.access_rows() if r.outcome == "refused"]


@pytest.fixture
def private(home: Path) -> Path:
    write_split("add-private", "private", addition_items("private", 1), {"source": "test"})
    write_split("add-other", "private", addition_items("private", 2)[1:], {"source": "test"})
    return addition_protocol(home, max_tokens=2)


@pytest.mark.parametrize("grant", [None, ReleaseGrant("forged", "add-private", 1)], ids=["no-grant", "forged"])
def test_release_gate_purpose_from_python_is_refused_and_logged(private: Path, tiny_checkpoint: Path,
                                                                grant: ReleaseGrant | None) -> None:
    store = Store()
    with pytest.raises(RefusedByPolicy, match="reserved for 'evalgate gate'"):
        evaluate(private, tiny_checkpoint, "add-private", RunOptions(purpose="release-gate", grant=grant,
                                                                 progress=False), store)
    ((split, purpose, detail),) = refused_rows(store)
    assert (split, purpose) == ("add-private", "release-gate") and "reserved for 'evalgate gate'" in detail
    assert store.runs() == [] and not [r for r in store.access_rows() if r.outcome != "refused"]


def test_an_issued_grant_admits_its_split_for_its_reads_only(private: Path, tiny_checkpoint: Path) -> None:
    store = Store()  # the grant as the gate's decision gets it: its one read reserved (logged, counted) first
    grant = _reserve_release_reads("g", SplitManager(store), load_manifest("add-private"), "t", [{}], "refused")
    with pytest.raises(RefusedByPolicy, match="covers split add-private, not add-other"):
        evaluate(private, tiny_checkpoint, "add-other", RunOptions(purpose="release-gate", grant=grant,
                                                               progress=False), store)
    doc = evaluate(private, tiny_checkpoint, "add-private", RunOptions(purpose="release-gate", grant=grant,
                                                                   progress=False), store)
    assert doc["status"] == "complete" and doc["purpose"] == "release-gate"
    with pytest.raises(RefusedByPolicy, match="used all its 1 read"):
        evaluate(private, tiny_checkpoint, "add-private", RunOptions(purpose="release-gate", grant=grant,
                                                                 progress=False), store)
    # the completed release-gate run records its result (an uncounted 'result' row, docs/AUDIT.md); the budget
    # counted only the reserved read
    assert [r.outcome for r in store.access_rows()] == ["read", "refused", "reserved-read", "result", "refused"]


def test_an_item_without_the_scorers_field_is_refused_before_generation(home: Path, tiny_checkpoint: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 13 point 13: a missing gold field used to crash with KeyError (exit 3) after every sample was
    generated; now the read stops with exit 2 naming the item and field, and no backend is constructed."""
    from evalgate.core.errors import BadInput
    from evalgate.runner import generate as generate_mod

    items = addition_items("dev", 2)
    del items[1]["answer"]
    write_split("add-gap", "dev", items, {"source": "test"})
    proto = addition_protocol(home, max_tokens=2)
    monkeypatch.setattr(generate_mod, "get_backend", lambda *a, **k: pytest.fail("generation must not start"))
    store = Store()
    with pytest.raises(BadInput, match=rf"item '{items[1]['id']}' \(record 2\) has no field 'answer'") as e:
        evaluate(proto, tiny_checkpoint, "add-gap", RunOptions(progress=False), store)
    assert e.value.exit_code == 2
    assert store.runs() == [] and store.access_rows() == []
