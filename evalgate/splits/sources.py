"""Reading a split's items from a user's own data: JSONL, CSV, Parquet or a Hugging Face ``datasets`` folder.

``evalgate splits add NAME --file PATH [--format F] [--map FIELD=COLUMN ...]`` reads its items here. Every reader
streams: CSV row by row (``csv.DictReader``), Parquet in record batches of only the columns the mapping names
(``pyarrow.parquet.ParquetFile.iter_batches``), a ``datasets`` folder (``Dataset.save_to_disk``) through its
memory-mapped Arrow files in batches, JSONL line by line. What stays in memory is the items themselves, so a
file's unmapped columns (long documents, images as text) never do.

A mapping ``FIELD=COLUMN`` makes the item field ``FIELD`` from the source column ``COLUMN``; with a mapping the
item holds only the mapped fields and ``id`` (the mapping is the item's schema), without one every column. ``id``
comes from ``--map id=COLUMN``, else a column named ``id``, else (``row_ids``) the 0-based row index.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalgate.core.errors import BadInput, MissingExtra
from evalgate.core.version import install_hint

FORMATS = ("jsonl", "csv", "parquet", "datasets")
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
BATCH_ROWS = 1024
"""Rows per Arrow record batch read from Parquet and ``datasets`` folders."""


@dataclass(frozen=True)
class Mapping:
    """Item field -> source column, from ``--map FIELD=COLUMN`` (repeatable)."""

    fields: dict[str, str]

    @classmethod
    def parse(cls, pairs: Iterable[str]) -> Mapping:
        """Parse ``FIELD=COLUMN`` strings.

        Raises:
            BadInput: a pair without ``=``, an empty side, or a field mapped twice.
        """
        fields: dict[str, str] = {}
        for pair in pairs:
            field, sep, column = pair.partition("=")
            field, column = field.strip(), column.strip()
            if not sep or not field or not column:
                raise BadInput(f"--map {pair!r}: write FIELD=COLUMN, e.g. --map question=problem")
            if field in fields:
                raise BadInput(f"--map: field {field!r} is mapped twice ({fields[field]!r} and {column!r}); "
                               "map each item field from one column")
            fields[field] = column
        return cls(fields)

    def columns(self, available: list[str], row_ids: bool) -> dict[str, str] | None:
        """The field -> column plan for a source with ``available`` columns (None: keep every column as is).

        Raises:
            BadInput: a mapped column that is not there, naming it and the columns that are.
        """
        missing = [f"{c!r} (--map {f}={c})" for f, c in self.fields.items() if c not in available]
        if missing:
            raise BadInput(f"column {', '.join(missing)} not in the file; its columns: {', '.join(available)}")
        if not self.fields:
            return None
        plan = dict(self.fields)
        if "id" not in plan and "id" in available:
            plan["id"] = "id"
        if "id" not in plan and not row_ids:
            raise BadInput(f"no 'id' column; pass --map id=COLUMN (its columns: {', '.join(available)}) or "
                           "--row-ids to number the items by row")
        return plan


def detect_format(path: Path) -> str:
    """The source format of ``path``: a ``datasets`` folder (it holds ``state.json`` or ``dataset_info.json``) or
    a file by its suffix (``.jsonl``/``.ndjson``, ``.csv``, ``.parquet``/``.pq``).

    Raises:
        BadInput: a missing path, a ``DatasetDict`` folder (naming its splits), or an unknown suffix.
    """
    if path.is_dir():
        if (path / "dataset_dict.json").is_file():
            subs = sorted(p.name for p in path.iterdir() if (p / "state.json").is_file())
            raise BadInput(f"{path} is a DatasetDict (splits: {', '.join(subs)}); pass one split's folder, e.g. "
                           f"--file {path / (subs[0] if subs else 'test')}")
        if (path / "state.json").is_file() or (path / "dataset_info.json").is_file():
            return "datasets"
        raise BadInput(f"{path} is a folder but not a Hugging Face datasets folder (no state.json); pass a file "
                       f"or the folder Dataset.save_to_disk wrote")
    if not path.is_file():
        raise BadInput(f"{path} not found; pass a data file or a datasets folder with --file")
    fmt = _SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise BadInput(f"{path}: unknown format {path.suffix or '(no suffix)'!r}; pass --format with one of "
                       f"{', '.join(FORMATS)}")
    return fmt


def read_items(path: Path, fmt: str | None = None, mapping: Mapping | None = None,
               row_ids: bool = False) -> list[dict[str, Any]]:
    """A split's items from a data file or ``datasets`` folder, streamed (see the module docstring).

    Args:
        path: the file or folder.
        fmt: one of ``FORMATS``, or None to detect it (``detect_format``).
        mapping: item field -> column, or None (every column, an ``id`` column required unless ``row_ids``).
        row_ids: number items by their 0-based row index where there is no ``id`` column or mapping.

    Returns:
        The items, each a dict with a unique non-empty string ``id`` (integer ids become their decimal text).

    Raises:
        BadInput: unknown format, missing path, a mapping naming a missing column (naming the columns there are),
            a value that is not JSON (e.g. bytes, a timestamp), a bad or duplicate id, or no rows at all.
        MissingExtra: Parquet or ``datasets`` without ``pyarrow`` / ``datasets`` installed.
    """
    found = detect_format(path) if fmt is None else fmt
    if found not in FORMATS:
        raise BadInput(f"unknown format {found!r}; choose one of {', '.join(FORMATS)}")
    if found != "datasets" and not path.is_file():
        raise BadInput(f"{path} not found; pass a {found} file with --file")
    readers = {"jsonl": _jsonl_rows, "csv": _csv_rows, "parquet": _parquet_rows, "datasets": _datasets_rows}
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, row in enumerate(readers[found](path, mapping or Mapping({}), row_ids)):
        items.append(_with_id(row, n, row_ids, seen, f"{path}: row {n}"))
    if not items:
        raise BadInput(f"{path} holds no rows; a split needs at least one item")
    return items


def _with_id(row: dict[str, Any], n: int, row_ids: bool, seen: set[str], where: str) -> dict[str, Any]:
    """``row`` with its ``id`` checked as ``splits.data.parse_jsonl`` checks JSONL ids (or the row index)."""
    if "id" not in row and row_ids:
        row["id"] = str(n)
    rid = row.get("id")
    if isinstance(rid, int) and not isinstance(rid, bool):
        rid = row["id"] = str(rid)
    if not isinstance(rid, str) or not rid:
        got = "no 'id'" if "id" not in row else f"'id' {json.dumps(rid, default=str)} ({type(rid).__name__})"
        raise BadInput(f"{where}: each item needs a non-empty string or integer 'id'; this one has {got} (map "
                       "one with --map id=COLUMN, or pass --row-ids)")
    if rid in seen:
        raise BadInput(f"{where}: duplicate id {rid!r}; ids must be unique within a split")
    seen.add(rid)
    return row


def _project(row: dict[str, Any], plan: dict[str, str] | None) -> dict[str, Any]:
    return dict(row) if plan is None else {f: row[c] for f, c in plan.items()}


def _jsonl_rows(path: Path, mapping: Mapping, row_ids: bool) -> Iterator[dict[str, Any]]:
    from evalgate.core.fileio import iter_jsonl

    with path.open(encoding="utf-8", errors="strict") as fh:
        try:
            for line, rec in iter_jsonl(fh, path):
                if not isinstance(rec, dict):
                    raise BadInput(f"{path}:{line}: each record must be a JSON object")
                try:
                    yield _project(rec, mapping.columns(list(rec), row_ids))
                except BadInput as e:
                    raise BadInput(f"{path}:{line}: {e.message}") from e
        except UnicodeDecodeError as e:
            raise BadInput(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); save it as UTF-8") from e


def _csv_rows(path: Path, mapping: Mapping, row_ids: bool) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        try:
            reader = csv.DictReader(fh, strict=True)  # strict: an unclosed quote is an error, not one long cell
            header = reader.fieldnames
            if not header:
                raise BadInput(f"{path} is empty; a CSV split needs a header row and at least one row")
            plan = mapping.columns(list(header), row_ids)
            for rec in reader:
                if None in rec:  # DictReader's key for cells beyond the header
                    raise BadInput(f"{path}:{reader.line_num}: {len(header) + len(rec[None])} cells, the header "
                                   f"has {len(header)}; quote cells that contain commas")
                if None in rec.values():  # DictReader's value for cells missing at the end of a short row
                    cells = sum(v is not None for v in rec.values())
                    raise BadInput(f"{path}:{reader.line_num}: {cells} cells, the header has {len(header)}; "
                                   "give every row a cell per column (an empty one as ,,)")
                yield _project(rec, plan)
        except UnicodeDecodeError as e:
            raise BadInput(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); save it as UTF-8") from e
        except csv.Error as e:
            raise BadInput(f"{path}: not valid CSV ({e}); fix the file or pass --format") from e


def _arrow():  # noqa: ANN202 - pyarrow stays a lazy import
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise MissingExtra(f"reading Parquet or datasets folders needs pyarrow: {install_hint('data')}") from e
    return pa, pq


def _check_types(schema: Any, plan: dict[str, str] | None, path: Path) -> None:
    """Refuse columns whose values are not JSON (bytes, timestamps, decimals, ...), naming them."""
    pa, _ = _arrow()
    t = pa.types

    def plain(ty: Any) -> bool:
        if t.is_list(ty) or t.is_large_list(ty) or t.is_fixed_size_list(ty):
            return plain(ty.value_type)
        if t.is_struct(ty):
            return all(plain(ty.field(i).type) for i in range(ty.num_fields))
        return bool(t.is_null(ty) or t.is_boolean(ty) or t.is_integer(ty) or t.is_floating(ty)
                    or t.is_string(ty) or t.is_large_string(ty))

    wanted = set(plan.values()) if plan else set(schema.names)
    bad = [f"{f.name} ({f.type})" for f in schema if f.name in wanted and not plain(f.type)]
    if bad:
        raise BadInput(f"{path}: column {', '.join(bad)} holds values that are not JSON text, numbers or lists; "
                       "convert it to text, or leave it out with --map")


def _arrow_rows(batches: Iterable[Any], plan: dict[str, str] | None) -> Iterator[dict[str, Any]]:
    for batch in batches:
        for rec in batch.to_pylist():
            yield _project(rec, plan)


def _parquet_rows(path: Path, mapping: Mapping, row_ids: bool) -> Iterator[dict[str, Any]]:
    pa, pq = _arrow()
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        raise BadInput(f"{path}: not a Parquet file ({e}); pass --format with one of {', '.join(FORMATS)}") from e
    schema = pf.schema_arrow
    plan = mapping.columns(list(schema.names), row_ids)
    _check_types(schema, plan, path)
    columns = sorted(set(plan.values())) if plan else None
    yield from _arrow_rows(pf.iter_batches(batch_size=BATCH_ROWS, columns=columns), plan)


def _datasets_rows(path: Path, mapping: Mapping, row_ids: bool) -> Iterator[dict[str, Any]]:
    _arrow()
    try:
        import datasets
    except ImportError as e:
        raise MissingExtra(f"reading a datasets folder needs the datasets library: {install_hint('data')}") from e
    if not isinstance(path, Path) or not path.is_dir():
        raise BadInput(f"{path}: a datasets folder is the directory Dataset.save_to_disk wrote; pass it with --file")
    try:
        ds = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as e:
        raise BadInput(f"{path}: not a datasets folder ({e})") from e
    if isinstance(ds, datasets.DatasetDict):
        raise BadInput(f"{path} is a DatasetDict (splits: {', '.join(ds)}); pass one split's folder")
    plan = mapping.columns(list(ds.column_names), row_ids)
    _check_types(ds.data.schema, plan, path)
    if plan:
        ds = ds.select_columns(sorted(set(plan.values())))
    yield from _arrow_rows(ds.with_format("arrow").iter(batch_size=BATCH_ROWS), plan)
