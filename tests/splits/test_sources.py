"""`evalgate splits add` from a team's own data (issue 32): CSV, Parquet and a Hugging Face `datasets` folder, each
made here with the real library and read back through the command with a field mapping; a mapping naming a
missing column, an unknown format and empty files are refused with exit 2 and nothing written; a large file is
streamed (peak memory measured against a whole-file load in the same test)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalgate.cli import main
from evalgate.splits import load_manifest, read_items, splits_dir
from tests.conftest import REPO

ROWS = [{"task": "t1", "problem": "What is 2+3?", "solution": "5", "source": "hand"},
        {"task": "t2", "problem": "Name, with a comma?", "solution": "x, y", "source": "hand"},
        {"task": "t3", "problem": "Ünïcode ✓", "solution": "ok", "source": "hand"}]
MAPPED = [{"id": "t1", "question": "What is 2+3?", "answer": "5"},
          {"id": "t2", "question": "Name, with a comma?", "answer": "x, y"},
          {"id": "t3", "question": "Ünïcode ✓", "answer": "ok"}]
MAP = ["--map", "id=task", "--map", "question=problem", "--map", "answer=solution"]


def _add(*args: str):  # noqa: ANN202
    return CliRunner().invoke(main, ["splits", "add", *args])


def _csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def _parquet(path: Path, rows: list[dict]) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def _read(name: str) -> list[dict]:
    return read_items(load_manifest(name))


def test_csv_with_a_mapping(tmp_path: Path) -> None:
    r = _add("mine", "--tier", "dev", "--file", str(_csv(tmp_path / "d.csv", ROWS)), *MAP)
    assert r.exit_code == 0, r.output
    assert "added split mine (tier dev, 3 items)" in r.output
    assert _read("mine") == MAPPED  # the comma inside quotes and the non-ASCII text survive; 'source' is not mapped


def test_parquet_with_a_mapping_and_list_values(tmp_path: Path) -> None:
    rows = [{**r, "tags": ["a", "b"][: i + 1], "n": i} for i, r in enumerate(ROWS)]
    r = _add("pq", "--tier", "smoke", "--file", str(_parquet(tmp_path / "d.parquet", rows)), *MAP,
             "--map", "tags=tags", "--map", "n=n")
    assert r.exit_code == 0, r.output
    assert _read("pq") == [{**m, "tags": ["a", "b"][: i + 1], "n": i} for i, m in enumerate(MAPPED)]


def test_datasets_folder_with_a_mapping_and_row_ids(tmp_path: Path) -> None:
    import datasets

    folder = tmp_path / "hf"
    datasets.Dataset.from_list([{k: v for k, v in r.items() if k != "task"} for r in ROWS]).save_to_disk(str(folder))
    r = _add("hf", "--tier", "public", "--file", str(folder), "--map", "question=problem", "--map",
             "answer=solution", "--row-ids")
    assert r.exit_code == 0, r.output
    assert _read("hf") == [{**m, "id": str(i)} for i, m in enumerate(MAPPED)]
    # a DatasetDict folder names its splits instead of guessing one
    dd = tmp_path / "dd"
    datasets.DatasetDict({"test": datasets.Dataset.from_list(ROWS)}).save_to_disk(str(dd))
    r = _add("hf2", "--tier", "dev", "--file", str(dd), *MAP)
    assert r.exit_code == 2 and "is a DatasetDict (splits: test)" in r.stderr and f"--file {dd / 'test'}" in r.stderr
    assert _add("hf2", "--tier", "dev", "--file", str(dd / "test"), *MAP).exit_code == 0
    assert _read("hf2") == MAPPED


def test_without_a_mapping_every_column_is_kept(tmp_path: Path) -> None:
    rows = [{"id": r["task"], "problem": r["problem"]} for r in ROWS]
    assert _add("all", "--tier", "dev", "--file", str(_csv(tmp_path / "a.csv", rows))).exit_code == 0
    assert _read("all") == rows


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_a_mapping_naming_a_missing_column_is_refused(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / f"d.{fmt}"
    if fmt == "csv":
        _csv(path, ROWS)
    elif fmt == "parquet":
        _parquet(path, ROWS)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    r = _add("bad", "--tier", "dev", "--file", str(path), "--map", "id=task", "--map", "question=problm")
    assert r.exit_code == 2, r.output
    assert "column 'problm' (--map question=problm) not in the file" in r.stderr
    assert "its columns: task, problem, solution, source" in r.stderr
    assert "Traceback" not in r.output
    assert not list(splits_dir().glob("bad*")) if splits_dir().exists() else True


def test_no_id_without_row_ids_is_refused(tmp_path: Path) -> None:
    r = _add("noid", "--tier", "dev", "--file", str(_csv(tmp_path / "d.csv", ROWS)), "--map", "question=problem")
    assert r.exit_code == 2 and "no 'id' column; pass --map id=COLUMN" in r.stderr and "--row-ids" in r.stderr


def test_unknown_format_empty_files_bad_values_and_duplicates(tmp_path: Path) -> None:
    (tmp_path / "d.xlsx").write_text("x")
    r = _add("x", "--tier", "dev", "--file", str(tmp_path / "d.xlsx"))
    assert r.exit_code == 2 and "unknown format '.xlsx'; pass --format with one of jsonl, csv, parquet, datasets" \
        in r.stderr
    (tmp_path / "e.csv").write_text("")
    r = _add("e", "--tier", "dev", "--file", str(tmp_path / "e.csv"))
    assert r.exit_code == 2 and "is empty" in r.stderr
    (tmp_path / "h.csv").write_text("id,question\n")
    r = _add("h", "--tier", "dev", "--file", str(tmp_path / "h.csv"))
    assert r.exit_code == 2 and "holds no rows" in r.stderr
    (tmp_path / "notpq.parquet").write_text("id,question\n1,2\n")
    r = _add("n", "--tier", "dev", "--file", str(tmp_path / "notpq.parquet"))
    assert r.exit_code == 2 and "not a Parquet file" in r.stderr
    _parquet(tmp_path / "b.parquet", [{"id": "a", "blob": b"\x00\x01"}])
    r = _add("b", "--tier", "dev", "--file", str(tmp_path / "b.parquet"))
    assert r.exit_code == 2 and "column blob (binary) holds values that are not JSON" in r.stderr
    _csv(tmp_path / "dup.csv", [{"id": "a", "q": "1"}, {"id": "a", "q": "2"}])
    r = _add("dup", "--tier", "dev", "--file", str(tmp_path / "dup.csv"))
    assert r.exit_code == 2 and "duplicate id 'a'" in r.stderr
    r = _add("m", "--tier", "dev", "--file", str(tmp_path / "dup.csv"), "--map", "q")
    assert r.exit_code == 2 and "write FIELD=COLUMN" in r.stderr
    assert not splits_dir().exists() or not list(splits_dir().iterdir())  # nothing half-written



@pytest.mark.parametrize(("text", "message"), [
    ('q,a\n1+1,2\n2+2\n', ":3: 1 cells, the header has 2; give every row a cell per column"),  # a short row
    ('q,a\n1+1,2\n"2+2,4\n', "not valid CSV (unexpected end of data)"),  # an unclosed quote swallows the rest
])
def test_a_malformed_csv_is_refused_naming_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "m.csv"
    path.write_text(text)
    r = _add("m", "--tier", "dev", "--file", str(path), "--map", "question=q", "--map", "answer=a", "--row-ids")
    assert r.exit_code == 2, r.output
    assert message in r.stderr and "Traceback" not in r.output
    assert not splits_dir().exists() or not list(splits_dir().iterdir())  # nothing half-written


_PEAK = textwrap.dedent("""
    import re, sys
    from pathlib import Path
    import pyarrow.parquet as pq
    from click.testing import CliRunner
    from evalgate.cli import main
    from evalgate import store  # noqa: F401 - imported before the measurement starts
    from evalgate.splits import sources  # noqa: F401
    def hwm():  # the process's peak resident set size, KiB (Linux /proc)
        return int(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1))
    def add(p):
        r = CliRunner().invoke(main, ["splits", "add", Path(p).stem, "--tier", "dev", "--file", p,
                                      "--map", "id=id", "--map", "question=question"])
        assert r.exit_code == 0, r.output
    mode, path, small = sys.argv[1], sys.argv[2], sys.argv[3]
    add(small) if mode == "add" else pq.read_table(small).to_pylist()  # what the command imports, imported first
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak to the current RSS: imports' peak not counted
    before = hwm()
    if mode == "whole":  # what a reader that loads the file does: every column, every row at once
        rows = pq.read_table(path).to_pylist()
    else:
        add(path)
    print(hwm() - before)
""")


@pytest.mark.integration
def test_a_large_file_is_streamed(tmp_path: Path) -> None:
    """A Parquet file whose unmapped column holds 57 MiB of text: how far each process's peak memory rises above
    its resident size after imports (the peak reset through /proc/self/clear_refs, so an import-time peak cannot
    hide the rise), for ``splits add`` and for a whole-file load of the same file, in the same test; only
    the mapped columns are ever read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n, pad = 20_000, 3000
    big = tmp_path / "big.parquet"
    schema = pa.schema([("id", pa.string()), ("question", pa.string()), ("doc", pa.string())])
    with pq.ParquetWriter(big, schema) as w:
        for start in range(0, n, 2000):
            ids = range(start, start + 2000)
            w.write_table(pa.table({"id": [f"i{i}" for i in ids], "question": [f"q{i}" for i in ids],
                                    "doc": [os.urandom(pad // 2).hex() for _ in ids]}, schema=schema))
    small = tmp_path / "small.parquet"
    pq.write_table(pa.table({"id": ["s0"], "question": ["q"], "doc": ["d"]}, schema=schema), small)
    env = {k: v for k, v in os.environ.items() if k.startswith("EVALGATE_") or k in ("PATH", "HOME",
                                                                                    "XDG_CONFIG_HOME")}
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")

    def rise_mib(mode: str) -> float:
        out = subprocess.run([sys.executable, "-c", _PEAK, mode, str(big), str(small)], env=env, capture_output=True,
                             text=True, check=True)
        return int(out.stdout.split()[-1]) / 1024

    streamed, whole = rise_mib("add"), rise_mib("whole")
    text_mib = n * pad / 2**20
    print(f"peak memory rise: splits add {streamed:.0f} MiB, whole-file load {whole:.0f} MiB "
          f"({text_mib:.0f} MiB of unmapped text)")
    assert load_manifest("big").count == n
    assert whole > 0.9 * text_mib  # the comparison means something: a whole load holds the unmapped text
    assert streamed < whole / 3
