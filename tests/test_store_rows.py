"""The typed store rows without a store (``evalgate.store.rows``): what a row is built from, and the suite's warnings
filter that keeps evalgate's own code off the deprecated key reads (the rows read back: tests/store/test_rows.py)."""

from __future__ import annotations

import builtins
import warnings

import pytest

from evalgate.store import SampleScore


def test_a_row_is_built_from_its_columns_in_any_order_and_no_others() -> None:
    a, b = SampleScore.from_dicts([{"item_id": "q1", "sample_index": 0, "score": 1.0, "status": "correct"},
                                   {"status": "incorrect", "score": 0.0, "item_id": "q2", "sample_index": 3}])
    assert (a, b) == (SampleScore("q1", 0, 1.0, "correct"), SampleScore("q2", 3, 0.0, "incorrect"))
    assert list(b.as_dict()) == ["item_id", "sample_index", "score", "status"]
    with pytest.raises(TypeError, match="SampleScore has the columns item_id, sample_index, score, status; a row "
                                        "has item_id, score"):
        SampleScore.from_dicts([{"item_id": "q1", "score": 1.0}])
    with pytest.raises(TypeError, match="a row has item_id, sample_index, score, state"):
        SampleScore.from_dicts([{"item_id": "q1", "sample_index": 0, "score": 1.0, "state": "correct"}])


def test_evalgates_own_code_reading_a_row_by_key_fails_the_suite(pytestconfig: pytest.Config) -> None:
    """The suite's warnings filters (pyproject.toml, applied here as pytest applies them) turn a key read made in an
    ``evalgate.*`` module into an error, so none of evalgate's own callers is left reading the deprecated way; a
    test's own read only warns."""
    row = SampleScore("q1", 0, 1.0, "correct")
    code = compile("row['status']", "<module>", "eval")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        for entry in pytestconfig.getini("filterwarnings"):
            action, message, category, module = (entry.split(":") + ["", "", ""])[:4]
            warnings.filterwarnings(action, message, getattr(builtins, category or "Warning"), module)
        with pytest.raises(DeprecationWarning, match=r"SampleScore\['status'\] is deprecated.*typed result now"):
            eval(code, {"__name__": "evalgate.views.example", "row": row})  # noqa: S307
        with pytest.warns(DeprecationWarning):
            assert eval(code, {"__name__": "tests.example", "row": row}) == "correct"  # noqa: S307
