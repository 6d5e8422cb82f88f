"""Contamination checks on sealed tiers and short items (issue 27: the membership oracle; issue 28 item 6,
marin-community/marin#6852: short items).

On private and human-audit splits a check reveals one bit per item (flagged or not), has a budget of its own
(logged, refused beyond, shown in 'audit'), and refuses parameters that would make one bit a word-level probe. A
field shorter than the 13-gram is looked for as a whole from 8 words on (Brown et al. 2020, appendix C); a shorter
one is named as not checked and the split is not called clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.core.errors import RefusedByPolicy
from evalgate.splits import SplitManager, write_split
from evalgate.splits.contamination import check_contamination
from evalgate.store import Store
from evalgate.views.audit import audit_summary
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory

MATH500 = SHARED_DATA / "math500" / "test.jsonl"
SECRET = ("a farmer keeps seventeen goats and twice as many sheep in a barn beside the river near the old mill "
          "how many animals are there")  # 25 words, 13 distinct 13-grams
FILLER = "the quick brown fox jumps over the lazy dog\n" * 20


def contamination(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, ["splits", "contamination", *args])
    return r.exit_code, r.stdout, r.stderr if r.stderr_bytes else ""


def _corpus(path: Path, text: str) -> Path:
    path.write_text(FILLER + text + "\n" + FILLER)
    return path


def test_a_private_check_answers_one_bit_per_item_so_a_13_word_guess_learns_nothing(tmp_path: Path) -> None:
    write_split("priv", "private", [{"id": "p1", "question": SECRET}], {"source": "test"})
    words = SECRET.split()
    right = _corpus(tmp_path / "right.txt", " ".join(words[:13]))  # a correct guess of the first 13 words
    wrong = _corpus(tmp_path / "wrong.txt", " ".join(["a", "farmer", "keeps", "sixteen", *words[4:13]]))
    docs = []
    for corpus in (right, wrong):
        code, out, _ = contamination("--split", "priv", "--corpus", str(corpus), "--json")
        assert code == 0, out
        docs.append(json.loads(out))
    assert docs[0]["items"] == docs[1]["items"] == [{"id": "p1", "flagged": False}]  # the same answer
    assert docs[0]["corpus_tokens"] == docs[1]["corpus_tokens"]  # the whole corpus read either way
    assert "matched" not in json.dumps(docs[0]) and "overlap" not in json.dumps(docs[0]["items"])
    code, text, _ = contamination("--split", "priv", "--corpus", str(right))
    assert code == 0 and "1/13" not in text and "p1" not in text  # only flagged ids are listed
    whole = _corpus(tmp_path / "whole.txt", SECRET)  # the whole item: that one bit is the remaining answer
    code, out, _ = contamination("--split", "priv", "--corpus", str(whole), "--json")
    assert code == 1 and json.loads(out)["items"] == [{"id": "p1", "flagged": True}]


@pytest.mark.parametrize("tier", ["private", "human-audit"])
def test_sealed_checks_have_a_budget_of_their_own_refused_beyond_and_shown_in_audit(tmp_path: Path,
                                                                                    tier: str) -> None:
    write_split("sealed", tier, [{"id": "p1", "question": SECRET}], {"source": "test"})
    corpus = _corpus(tmp_path / "c.txt", "nothing of it")
    for _ in range(4):  # the default: 4 per 30 days
        assert contamination("--split", "sealed", "--corpus", str(corpus))[0] == 0
    code, out, err = contamination("--split", "sealed", "--corpus", str(corpus))
    assert code == 2 and "budget of 4 contamination checks per 30 days (4 used)" in err
    rows = Store().access_rows("sealed")
    assert [r.outcome for r in rows] == ["read"] * 4 + ["refused"]
    assert {r.purpose for r in rows} == {"contamination-check"}
    entry = audit_summary(Store()).as_dict()["splits"]["sealed"]
    assert entry["contamination_budget"] == {"max_checks": 4, "window_days": 30, "used": 4, "left": 0}
    assert entry.get("budget", {}).get("used", 0) == 0  # the read budget is not what was spent
    text = CliRunner().invoke(main, ["audit"]).output
    assert "4/4 contamination checks per 30d (0 left)" in text


def test_the_contamination_budget_is_atomic_with_the_append(tmp_path: Path) -> None:
    """Two checkers that both passed the budget check: the count under the store lock admits only what is left."""
    write_split("priv", "private", [{"id": "p1", "question": SECRET}], {"source": "test"})
    mgr = SplitManager(Store())
    for _ in range(3):
        mgr.open("priv", "contamination-check", "a", contamination_check=True)
    m1, _ = mgr.check("priv", "contamination-check", "a", contamination_check=True)
    m2, _ = SplitManager(Store()).check("priv", "contamination-check", "b", contamination_check=True)
    mgr.log_read(m1, "a", "contamination-check", cached=False)
    with pytest.raises(RefusedByPolicy, match="contamination checks"):
        SplitManager(Store()).log_read(m2, "b", "contamination-check", cached=False)


@pytest.mark.parametrize("flags", [["--ngram", "1", "--threshold", "0.01"], ["--threshold", "0.05"],
                                   ["--ngram", "4"], ["--jaccard", "0.1"]])
def test_a_sealed_check_refuses_word_level_probes(tmp_path: Path, flags: list[str]) -> None:
    write_split("priv", "private", [{"id": "p1", "question": SECRET}], {"source": "test"})
    corpus = _corpus(tmp_path / "c.txt", "goats")
    code, _, err = contamination("--split", "priv", "--corpus", str(corpus), *flags)
    assert code == 2 and "--ngram >= 8" in err
    assert [r.outcome for r in Store().access_rows("priv")] == ["refused"]


# -- short items (issue 28 item 6) ----------------------------------------------------------------------------------


def _words(text: str) -> int:
    from evalgate.splits.contamination import tokens

    return len(tokens(text))


SHORT = "Find the number of positive divisors of the integer one hundred twenty"  # 12 words


def test_a_12_word_question_copied_verbatim_is_flagged(tmp_path: Path) -> None:
    assert _words(SHORT) == 12
    write_split("qa", "dev", [{"id": "q1", "question": SHORT}, {"id": "q2", "question": SECRET}],
                {"source": "test"})
    corpus = _corpus(tmp_path / "c.txt", f"Exercise 4. {SHORT}? (Answer: 16.)")
    code, out, _ = contamination("--split", "qa", "--corpus", str(corpus), "--json")
    assert code == 1, out
    doc = json.loads(out)
    q1 = next(it for it in doc["items"] if it["id"] == "q1")
    f = q1["fields"]["question"]
    assert q1["flagged"] and f["whole"] and f["overlap"] == 1.0 and f["flagged_by"] == ["exact"]
    assert doc["flagged"] == 1 and doc["unchecked"] == {}
    code, text, _ = contamination("--split", "qa", "--corpus", str(corpus))
    assert code == 1 and "1 of 2 items" in text and "whole field, 12 words" in text
    # Eleven of its twelve words in a row are not the item: not flagged.
    partial = _corpus(tmp_path / "p.txt", " ".join(SHORT.split()[:11]))
    assert contamination("--split", "qa", "--corpus", str(partial))[0] == 0


def test_a_lightly_edited_short_question_is_a_near_duplicate(tmp_path: Path) -> None:
    write_split("qa", "dev", [{"id": "q1", "question": SHORT}], {"source": "test"})
    corpus = _corpus(tmp_path / "c.txt", SHORT.replace("the integer", "an integer"))
    assert contamination("--split", "qa", "--corpus", str(corpus))[0] == 0  # not verbatim
    code, out, _ = contamination("--split", "qa", "--corpus", str(corpus), "--near-dup", "--json")
    assert code == 1 and json.loads(out)["items"][0]["fields"]["question"]["flagged_by"] == ["near-dup"], out


TINY = "Simplify $\\sqrt{242}$."  # MATH-500 test/prealgebra/1302.json: 3 words


@pytest.mark.parametrize(("line", "flagged"), [
    (TINY, True),  # issue 42, item 10: the whole item as a line of the corpus
    ("  simplify   $\\sqrt{ 242 }$ .", True),  # white space, case and punctuation aside
    ("Simplify\\,\\quad$\\sqrt{242}$\\;.", True),  # LaTeX spacing (\\quad is a word otherwise)
    ("Simplify \\hspace{1em} \\sqrt{242}", True),
    ("Simplify $\\sqrt{243}$.", False),  # another number
    ("Problem 3. Simplify $\\sqrt{242}$.", False),  # inside a longer line: not a whole-item match
])
def test_a_very_short_item_matching_a_whole_corpus_line_is_flagged(tmp_path: Path, line: str, flagged: bool) -> None:
    write_split("qa", "dev", [{"id": "q1", "question": TINY}], {"source": "test"})
    corpus = _corpus(tmp_path / "c.txt", f"unrelated text\n{line}\nmore unrelated text")
    code, out, err = contamination("--split", "qa", "--corpus", str(corpus), "--json")
    doc = json.loads(out)
    assert (code, doc["flagged"], doc["clean"]) == ((1, 1, False) if flagged else (0, 0, True)), out
    f = doc["items"][0]["fields"]["question"]
    assert f["segment"] and f["whole"] and f["words"] == 3 and f["overlap"] == (1.0 if flagged else 0.0)
    assert doc["segment_only"] == {"question": 1} and doc["unchecked"] == {}


def test_a_very_short_item_as_a_jsonl_string_is_flagged(tmp_path: Path) -> None:
    write_split("qa", "dev", [{"id": "q1", "question": TINY}], {"source": "test"})
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"problem": "Simplify  $\\sqrt{242}$ .", "solution": "11\\sqrt{2}"}) + "\n")
    assert contamination("--split", "qa", "--corpus", str(corpus))[0] == 1


def test_fields_too_short_to_check_are_named_and_the_split_is_never_called_clean(tmp_path: Path) -> None:
    """Issue 42, item 10: the 3-word question is checked (as a whole line); the 1-word answer cannot be, and the
    check said "not shown clean" but exited 0: it exits 1."""
    write_split("qa", "dev", [{"id": "q1", "question": TINY, "answer": "11 sqrt 2"},
                              {"id": "q2", "question": "Compute $\\dbinom{8}{4}$.", "answer": "70"}],
                {"source": "test"})
    corpus = _corpus(tmp_path / "c.txt", "unrelated text")
    code, text, err = contamination("--split", "qa", "--corpus", str(corpus))
    assert code == 1
    assert "not checked: field answer of 1 of 2 items has fewer than 3 words" in err
    assert "note: field question of 2 of 2 items has fewer than 8 words" in err
    assert "not shown clean: 1 field(s) could not be checked" in text and "clean: no item flagged" not in text
    code, out, _ = contamination("--split", "qa", "--corpus", str(corpus), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["flagged"] == 0 and doc["clean"] is False
    assert doc["unchecked"] == {"answer": 1} and doc["segment_only"] == {"answer": 1, "question": 2}
    # the fields the model sees are all checkable: clean, exit 0
    code, text, _ = contamination("--split", "qa", "--corpus", str(corpus), "--field", "question")
    assert code == 0 and "clean: no item flagged" in text


@pytest.mark.real_data
def test_a_real_short_math500_problem_copied_into_a_corpus_is_flagged(tmp_path: Path) -> None:
    if not MATH500.is_file():
        pytest.skip(f"needs {MATH500} (../shared/data beside the repository, see its PROVENANCE.md)")
    recs = {r["unique_id"]: r for r in map(json.loads, MATH500.read_text().splitlines())}
    short = recs["test/prealgebra/1784.json"]  # "Add 313.9 to 12.6. Express the result as a decimal."
    tiny = recs["test/prealgebra/1302.json"]  # "Simplify $\sqrt{242}$." (3 words)
    assert _words(short["problem"]) == 12 and _words(tiny["problem"]) == 3
    others = [r for k, r in recs.items() if k not in (short["unique_id"], tiny["unique_id"])]
    items = [{"id": r["unique_id"], "problem": r["problem"]} for r in (short, tiny, *others[:20])]
    write_split("m-dev", "dev", items, {"source": "MATH-500"})
    write_split("m-priv", "private", items, {"source": "MATH-500"})
    lines = [r["problem"].replace("\n", " ") for r in others[100:300]]  # other problems: unrelated filler
    lines[50] = f"Problem 7. {short['problem']} Solution: 326.5."
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    code, out, err = contamination("--split", "m-dev", "--corpus", str(corpus), "--field", "problem", "--json")
    doc = json.loads(out)
    assert code == 1 and [it["id"] for it in doc["items"] if it["flagged"]] == [short["unique_id"]]
    assert doc["unchecked"] == {} and doc["segment_only"] == {"problem": 1}  # the 3-word problem: as a line only
    rep = check_contamination("m-priv", corpus, fields=["problem"], store=Store())  # the private copy: the same one bit
    assert [it.id for it in rep.flagged] == [short["unique_id"]] and rep.sealed
    # issue 42, item 10: the 3-word problem on a line of its own (its LaTeX spaced out) is flagged too
    lines[120] = "Simplify \\, $\\sqrt{ 242 }$ ."
    corpus.write_text("\n".join(lines) + "\n")
    code, out, _ = contamination("--split", "m-dev", "--corpus", str(corpus), "--field", "problem", "--json")
    flagged = {it["id"] for it in json.loads(out)["items"] if it["flagged"]}
    assert code == 1 and flagged == {short["unique_id"], tiny["unique_id"]}
    rep = check_contamination("m-priv", corpus, fields=["problem"], store=Store())
    assert {it.id for it in rep.flagged} == flagged
