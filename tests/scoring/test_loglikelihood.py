"""The multiple_choice scorer's parts against hand-computed values (lm-evaluation-harness's definitions,
``lm_eval/api/task.py`` and ``api/model.py`` ``_encode_pair``), the request kind in the cache key, and the refusal of
a backend that cannot score log-likelihoods before any read."""

import json
from pathlib import Path

import pytest

from evalgate.backends.base import HFOptions, ReplayOptions, check_request, generation_settings
from evalgate.core.errors import BadInput
from evalgate.scoring.base import MultipleChoiceOptions, SampleToScore
from evalgate.scoring.loglikelihood import (
    MultipleChoiceScorer,
    argmax,
    chosen,
    continuations,
    encode_pair,
    mc_metrics,
    result_text,
)


def chars(text: str) -> list[int]:
    """A character-level tokenizer: one id per character (its code point)."""
    return [ord(c) for c in text]


def words(text: str) -> list[int]:
    """A tokenizer that merges across the context/continuation boundary: one id per run of non-space characters,
    each with the spaces before it (as BPE tokenizers attach a leading space)."""
    import re

    return [hash(t) & 0xFFFF for t in re.findall(r"\s*\S+|\s+$", text)]


def test_encode_pair_moves_trailing_space_to_the_continuation() -> None:
    ctx, cont = encode_pair(chars, "Answer: ", " B")  # lm-eval: context "Answer:", continuation "  B"
    assert ctx == tuple(chars("Answer:")) and cont == tuple(chars("  B"))
    ctx, cont = encode_pair(words, "Q: 2+2?\nAnswer:", " four")
    assert ctx == tuple(words("Q: 2+2?\nAnswer:")) and cont == (hash(" four") & 0xFFFF,)


def test_encode_pair_takes_the_continuation_from_the_whole_encoding() -> None:
    """A tokenizer that merges across the boundary: the continuation's ids are the whole encoding's after the
    context's own length (lm-eval's whole_enc[len(context_enc):]), not the continuation encoded alone."""
    def merging(text: str) -> list[int]:
        return [1, 2] if text == "ab" else [1] if text == "a" else [9]  # "ab" is two ids here, "b" alone is 9

    assert encode_pair(merging, "a", "b") == ((1,), (2,))
    with pytest.raises(BadInput, match="empty"):
        encode_pair(chars, "", " x")
    with pytest.raises(BadInput, match="adds no token"):
        encode_pair(lambda t: [1], "abc", " d")


def test_acc_takes_the_sum_and_acc_norm_the_sum_per_character() -> None:
    # acc: -3 is the largest sum (option 0); acc_norm: -3/1, -4/2, -4.5/3 = -3, -2, -1.5 -> option 2
    assert chosen([-3.0, -4.0, -4.5], ["a", "bb", "ccc"]) == {"acc": 0, "acc_norm": 2}
    # characters, not bytes: "é" is one character (two UTF-8 bytes): per character -3/1 < -5/2 (option 1), per
    # byte it would be -3/2 > -5/2 (option 0, lm-eval's acc_bytes)
    assert chosen([-3.0, -5.0], ["é", "ab"])["acc_norm"] == 1
    assert argmax([-1.0, -0.5, -0.5]) == 1  # the first maximum, as numpy.argmax
    with pytest.raises(BadInput, match="2 log-likelihoods for 3 options"):
        chosen([-1.0, -2.0], ["a", "b", "c"])


def _scorer(metric: str = "acc") -> MultipleChoiceScorer:
    return MultipleChoiceScorer(None, MultipleChoiceOptions(metric=metric))


def _sample(iid: str, gold: int, lls: list[float], options: list[str]) -> SampleToScore:
    item = {"id": iid, "options": options, "answer_index": gold}
    return SampleToScore(item, result_text(lls, [False] * len(lls), [1] * len(lls)), "", "stop", (iid, 0, 0))


def test_scorer_scores_by_its_metric_and_reports_both() -> None:
    opts = ["a", "bb", "ccc"]
    samples = [_sample("q1", 2, [-3.0, -4.0, -4.5], opts), _sample("q2", 0, [-1.0, -9.0, -9.0], opts)]
    for metric, statuses in (("acc", ["wrong", "correct"]), ("acc_norm", ["correct", "correct"])):
        scorer = _scorer(metric)
        results = scorer.score(samples)
        assert [r.status for r in results] == statuses
        assert results[0].detail == "acc chooses A, acc_norm chooses C; gold C"
        items = {s.item["id"]: s.item for s in samples}
        metrics = mc_metrics({"q1": [{}], "q2": [{}]}, items, MultipleChoiceOptions(metric=metric), scorer)
        assert (metrics["acc"], metrics["acc_norm"]) == (0.5, 1.0)


def test_scorer_refuses_what_it_cannot_score() -> None:
    with pytest.raises(BadInput, match="holds no log-likelihoods"):
        _scorer().score([SampleToScore({"id": "q", "options": ["a"], "answer_index": 0}, "The answer is A", "",
                                       "stop")])
    with pytest.raises(BadInput, match="0-based index"):
        _scorer().score([_sample("q", 3, [-1.0, -2.0], ["a", "b"])])
    with pytest.raises(BadInput, match="non-empty list of option strings"):
        continuations({"id": "q", "options": "a b"}, MultipleChoiceOptions())
    assert continuations({"id": "q", "options": ["x", "y"]}, MultipleChoiceOptions()) == [" x", " y"]


def test_the_request_kind_is_part_of_the_cache_key_and_generate_keeps_the_old_one() -> None:
    gen = generation_settings("hf", HFOptions())
    ll = generation_settings("hf", HFOptions(), "loglikelihood")
    assert "request" not in gen and ll == {**gen, "request": "loglikelihood"}
    with pytest.raises(BadInput, match="request 'embed'"):
        generation_settings("hf", HFOptions(), "embed")


def test_a_backend_without_loglikelihood_is_refused() -> None:
    check_request("hf", "loglikelihood")
    check_request("vllm", "loglikelihood")
    check_request("openai", "generate")
    with pytest.raises(BadInput, match="the openai backend cannot score log-likelihoods.*--backend hf or vllm"):
        check_request("openai", "loglikelihood")
    assert ReplayOptions  # the replay backend has none either (tested end to end below)


def test_a_run_on_such_a_backend_is_refused_before_any_read(home: Path, memory_store) -> None:
    from click.testing import CliRunner

    from evalgate.cli import main
    from tests.conftest import REPO

    data = home / "mc.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "2+2?", "options": ["4", "5"], "answer_index": 0,
                                "category": "math"}) + "\n")
    runner = CliRunner()
    assert runner.invoke(main, ["splits", "add", "mc", "--tier", "dev", "--file", str(data)]).exit_code == 0
    proto = home / "mmlu-pro-loglik.yaml"
    proto.write_text((REPO / "protocols" / "mmlu-pro-loglik.yaml").read_text())
    assert runner.invoke(main, ["protocol", "freeze", str(proto)]).exit_code == 0
    replay = home / "turns.jsonl"
    replay.write_text(json.dumps({"item_id": "q1", "turn": 0, "text": "A"}) + "\n")
    r = runner.invoke(main, ["run", "--protocol", str(proto), "--checkpoint", str(home / "no-such-model"),
                             "--split", "mc", "--backend", "replay", "--backend-option", f"file={replay}"])
    assert r.exit_code == 2 and "the replay backend cannot score log-likelihoods" in r.output, r.output
    audit = runner.invoke(main, ["audit", "--json"])
    assert audit.exit_code == 0, audit.output
    split = json.loads(audit.stdout)["splits"].get("mc", {})
    assert split.get("reads", 0) == 0 and split.get("refusals", 0) == 0, split  # never admitted, never read
