"""Rating batches, tokens and submissions through the library and the CLI (the browser tests are test_web.py)."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.core.errors import BadInput, RefusedByPolicy
from evalgate.human import rating
from evalgate.human.agreement import cohen_kappa, krippendorff_alpha, spearman_ci
from evalgate.splits import write_split
from evalgate.store import Store
from tests.test_human_audit import add_run

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server

ITEMS = [{"id": f"q{i}", "question": f"{i}?"} for i in range(10)]


@pytest.fixture
def store() -> Store:
    st = Store()
    write_split("ha", "human-audit", ITEMS, {"source": "test"})
    # eight samples scored 1, two scored 0
    add_run(st, "run1", "ha", {f"q{i}": 0.0 if i in (3, 7) else 1.0 for i in range(10)})
    return st


def test_stratified_batch_draws_each_score_in_proportion(store: Store) -> None:
    b = rating.create_batch("run1", samples=5, stratify="score", store=store, seed=0)
    items = store.batch_items(b["batch_id"])
    zeros = sum(1 for it in items if it.item_id in ("q3", "q7"))
    assert (len(items), zeros) == (5, 1)  # 5 x 2/10 = 1 zero, 5 x 8/10 = 4 ones
    two = store.batch_items(rating.create_batch("run1", samples=2, stratify="score", store=store)["batch_id"])
    assert sorted(it.item_id in ("q3", "q7") for it in two) == [False, True]  # each value at least once
    assert rating.create_batch("run1", samples=50, store=store)["samples"] == 10  # all of them, no more


def test_batch_refuses_other_tiers_and_bad_flags(store: Store) -> None:
    write_split("d", "dev", ITEMS, {"source": "test"})
    add_run(store, "rund", "d", {"q0": 1.0})
    with pytest.raises(RefusedByPolicy, match="human-audit splits only"):
        rating.create_batch("rund", store=store)
    assert [(r.purpose, r.outcome) for r in store.access_rows("d")][-1] == ("human-audit-batch", "refused")
    for kwargs, msg in (({"scale": "0-10"}, "within 0..9"), ({"scale": "5"}, "MIN-MAX"),
                        ({"stratify": "length"}, "only stratification"), ({"samples": 0}, "at least 1")):
        with pytest.raises(BadInput, match=msg):
            rating.create_batch("run1", store=store, **kwargs)
    with pytest.raises(BadInput, match="unknown run"):
        rating.create_batch("nope", store=store)
    assert store.batches() == []


def test_batch_refuses_a_private_run_whose_split_name_was_re_added_as_human_audit(store: Store) -> None:
    """Adversary: split ``p`` was private and the gate ran on it; its manifest deleted, ``p`` was added again as a
    human-audit split (other content). The run keeps the tier it was made under: no batch of its samples."""
    import os
    from pathlib import Path

    write_split("p", "private", [{"id": "q0", "question": "secret?"}], {"source": "test"})
    add_run(store, "runp", "p", {"q0": 1.0})
    with store.connect() as con:  # as the gate's decision run records it
        con.execute("UPDATE runs SET tier='private' WHERE run_id='runp'")
    (Path(os.environ["EVALGATE_SPLITS"]) / "p.yaml").unlink()
    write_split("p", "human-audit", ITEMS, {"source": "test"})
    with pytest.raises(RefusedByPolicy, match=r"tier private\); people rate samples of human-audit splits only"):
        rating.create_batch("runp", store=store)
    assert store.batches() == []


def test_resubmission_replaces_and_is_logged_and_a_skip_keeps_the_score(store: Store) -> None:
    b = rating.create_batch("run1", samples=3, store=store, seed=1)["batch_id"]
    key = store.batch_items(b)[0].sample_key
    for score in ("2", "4", "skip"):
        rating.submit(store, "ann", b, rating.issue_form_token(store, "ann"), key, score)
    (row,) = store.ratings(b, "ann")
    assert (row.score, row.submissions) == (4.0, 2)
    assert [(e.action, e.score, e.previous_score) for e in store.rating_events(b)] == [
        ("scored", 2.0, None), ("replaced", 4.0, 2.0), ("skipped", None, 4.0)]
    (human,) = [h for h in store.human_scores("ha", "run1") if h.rater == "ann"]
    assert (human.score, human.auto_score, human.source_sha256) == (4.0, 1.0, f"batch:{b}")
    with pytest.raises(RefusedByPolicy, match="not issued to you"):  # another rater's form token
        rating.submit(store, "ann", b, rating.issue_form_token(store, "bea"), key, "3")
    assert store.ratings(b, "ann")[0].score == 4.0


def test_queue_order_is_the_recorded_per_rater_shuffle(store: Store) -> None:
    b = rating.create_batch("run1", samples=10, store=store, seed=2)["batch_id"]
    q = rating.queue(store, b, "ann")
    expected = [it.sample_key for it in store.batch_items(b)]
    random.Random(q["seed"]).shuffle(expected)
    assert q["next"].sample_key == expected[0] and (q["scored"], q["total"]) == (0, 10)
    rating.submit(store, "ann", b, rating.issue_form_token(store, "ann"), expected[0], "skip")
    assert rating.queue(store, b, "ann")["next"].sample_key == expected[1]  # skipped ones come last
    assert rating.queue(store, b, "ann")["seed"] == q["seed"]


def test_cli_add_rater_and_batch_create(store: Store) -> None:
    r = CliRunner().invoke(main, ["audit", "add-rater", "ann", "--url", "http://h:1"])
    assert r.exit_code == 0, r.output
    url = r.stdout.strip()
    assert url.startswith("http://h:1/login#token=")
    assert rating.authenticate(store, url.split("token=")[1]) == rating.Rater("ann", "rater")
    r = CliRunner().invoke(main, ["audit", "batch", "create", "--run", "run1", "--samples", "4", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["samples"] == 4
    r = CliRunner().invoke(main, ["audit", "batch", "create", "--run", "run1", "--scale", "3-1"])
    assert r.exit_code == 2 and "MIN < MAX" in r.output


def test_agreement_statistics_by_hand() -> None:
    # auto 0,0,1,1 vs human 0,1,1,1 at 0.5: table [[1,1],[0,2]]; p_o = 3/4; p_e = 2/4*1/4 + 2/4*3/4 = 1/2;
    # kappa = (3/4 - 1/2) / (1/2) = 0.5
    k = cohen_kappa([0, 0, 1, 1], [0, 1, 1, 1])
    assert k["confusion"] == [[1, 1], [0, 2]] and k["kappa"] == pytest.approx(0.5)
    # reversed order: rho = -1, and every resample that is not constant has rho = -1
    s = spearman_ci([1, 2, 3, 4], [4, 3, 2, 1], resamples=200)
    assert s["rho"] == pytest.approx(-1) and s["ci"] == pytest.approx([-1, -1])
    assert spearman_ci([1, 1, 1], [1, 2, 3])["rho"] is None
    same = {("a", 0): 1.0, ("b", 0): 0.0, ("c", 0): 0.5}
    assert krippendorff_alpha({"x": same, "y": dict(same)}) == pytest.approx(1.0)
    assert krippendorff_alpha({"x": same}) is None


def test_a_raters_note_is_sealed_at_rest(store: Store) -> None:
    """A note may quote the human-audit item: stored encrypted in every table it reaches (issue 13), read back in
    clear through ``human_scores`` with the key."""
    b = rating.create_batch("run1", samples=1, store=store, seed=1)["batch_id"]
    key = store.batch_items(b)[0].sample_key
    note = "the answer quotes zebra-quartz-7301"
    rating.submit(store, "ann", b, rating.issue_form_token(store, "ann"), key, "4", note)
    with store.connect() as con:  # the stored values (the file's bytes: tests/splits/test_private_plaintext.py)
        stored = [r[0] for t in ("audit_ratings", "audit_rating_events", "human_scores")
                  for r in con.execute(f"SELECT note::VARCHAR FROM {t}").fetchall()]
    assert len(stored) == 3 and not any("zebra" in (v or "") for v in stored)
    assert [h.note for h in store.human_scores("ha", "run1") if h.rater == "ann"] == [note]


def test_serve_refuses_a_port_outside_1_65535() -> None:
    # once accepted, then the server sat there bound to nothing
    r = CliRunner().invoke(main, ["serve", "--port", "99999"])
    assert r.exit_code == 2 and "99999 is not in the range 1<=x<=65535" in r.output


def test_serve_on_a_port_in_use_or_a_wildcard_without_url_is_bad_input() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = CliRunner().invoke(main, ["serve", "--port", str(port)])
    assert r.exit_code == 2 and f"cannot listen on 127.0.0.1:{port}" in r.output, r.output
    r = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0", "--port", str(port)])
    assert r.exit_code == 2 and "not a wildcard" in r.output, r.output


def test_a_form_token_expires_after_the_ttl_and_old_tokens_are_pruned(store: Store) -> None:
    from datetime import timedelta

    from evalgate.human.rating import FORM_TOKEN_TTL

    b = rating.create_batch("run1", samples=3, store=store, seed=1)["batch_id"]
    key = store.batch_items(b)[0].sample_key
    stale, spent = rating.issue_form_token(store, "ann"), rating.issue_form_token(store, "ann")
    rating.submit(store, "ann", b, spent, key, "4")
    with store.connect() as con:  # both issued a minute past the TTL ago: one never used, one spent
        con.execute("UPDATE form_tokens SET issued_at = issued_at - ?", [FORM_TOKEN_TTL + timedelta(minutes=1)])
    with pytest.raises(RefusedByPolicy, match="has expired"):
        rating.submit(store, "ann", b, stale, key, "2")
    assert store.ratings(b, "ann")[0].score == 4.0 and len(store.rating_events(b)) == 1  # nothing written
    fresh = rating.issue_form_token(store, "ann")  # issuing prunes the two expired rows
    with store.connect() as con:
        assert con.execute("SELECT count(*) FROM form_tokens").fetchone() == (1,)
    rating.submit(store, "ann", b, fresh, key, "2")  # a fresh token still works
    assert store.ratings(b, "ann")[0].score == 2.0
