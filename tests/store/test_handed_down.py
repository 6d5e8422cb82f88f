"""The store is handed down (``Workspace.store``); the library entry points users call from docs without one still
use the process's store for one release, with a DeprecationWarning naming the call (``evalgate.store.handed_down``).
pyproject's ``filterwarnings`` makes that warning an error everywhere else in the suite, so no test relies on it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evalgate.core.errors import RefusedByPolicy
from evalgate.protocol.freeze import freeze
from evalgate.splits import load_manifest, write_split
from evalgate.splits.data import read_items
from evalgate.store import Store, handed_down
from evalgate.views.frames import access_log_frame

pytestmark = pytest.mark.usefixtures("store_backend")  # the store suite: a DuckDB file, a PostgreSQL server

PROTOCOL = {"name": "hd", "version": "1", "prompt": {"template": "{{ q }}", "chat_template": "none"},
            "sampling": {"max_tokens": 4}, "scorer": {"name": "exact", "options": {"answer_field": "a"}}}


def test_a_store_handed_down_is_used_as_given_without_a_warning(backend_store: Store, recwarn: pytest.WarningsRecorder
                                                               ) -> None:
    assert handed_down(backend_store, "x") is backend_store
    assert not recwarn.list


def test_entry_points_called_without_a_store_warn_and_use_the_process_store(backend_store: Store,
                                                                           tmp_path: Path) -> None:
    p = tmp_path / "hd.yaml"
    p.write_text(yaml.safe_dump(PROTOCOL))
    with pytest.warns(DeprecationWarning, match="^freeze called without a store: pass store=ws.store"):
        freeze(p)
    assert backend_store.protocol_hash("hd", "1") is not None  # the process's store: the test's
    write_split("hd-private", "private", [{"id": "a", "q": "1+1", "a": "2"}], {"source": "test"})
    with pytest.warns(DeprecationWarning, match="^read_items called without a store"), \
            pytest.raises(RefusedByPolicy, match="tier private"):
        read_items(load_manifest("hd-private"))
    assert [r.outcome for r in backend_store.access_rows("hd-private")] == ["refused"]
    pytest.importorskip("pyarrow")
    with pytest.warns(DeprecationWarning, match="^access_log_frame called without a store") as seen:
        frame = access_log_frame("arrow")
    assert frame.column("outcome").to_pylist() == ["refused"]
    assert Path(seen.list[0].filename).resolve() == Path(__file__).resolve()  # the warning points at the caller
