"""Gate verdicts (``gates``, migration 10; ``evalgate.gate.history`` writes and reads them)."""

from __future__ import annotations

import json
from typing import Any

from evalgate.store.db import Repository, matching, records
from evalgate.store.rows import GateRow
from evalgate.store.runs import json_values

GATE_JSON_COLUMNS = ("inputs", "decision_runs", "reasons", "document")
"""The gates columns holding JSON (``document`` is VARCHAR: it may hold NaN)."""


class GateRepo(Repository):
    """Stored gate verdicts."""

    def put_gate(self, row: dict[str, Any]) -> None:
        """Insert one gate verdict (``gates`` columns to values, JSON columns as Python data), stamped now."""
        row = {**row, "created_at": self.clock()}
        with self.connect() as con:
            con.execute(f"INSERT INTO gates ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                        json_values(row))

    def recent_gates(self, limit: int = 200) -> list[GateRow]:
        """The newest ``limit`` gate verdicts, newest ``created_at`` first, as ``GateRow``s (JSON columns decoded,
        as ``gates`` gives them): the web dashboard's table."""
        with self.connect() as con:
            rows = records(con, "SELECT * FROM gates ORDER BY created_at DESC, gate_id LIMIT ?", [limit])
        for r in rows:
            for k in GATE_JSON_COLUMNS:
                if isinstance(r[k], str):
                    r[k] = json.loads(r[k])
        return GateRow.from_dicts(rows)

    def gates(self, **where: Any) -> list[GateRow]:
        """Gate verdicts matching column equalities (e.g. ``gate_id=...``, ``inputs_sha256=...``), oldest first,
        as ``GateRow``s (JSON columns decoded)."""
        with self.connect() as con:
            return GateRow.from_dicts(matching(con, "gates", where, "created_at", GATE_JSON_COLUMNS))
