"""Checkpoint digest rate on one synthetic safetensors file of SIZE MiB (default 2048): evalgate's file_sha256, a
plain read-then-hash loop, reading alone, and the rates of sha256 and BLAKE3 on data already in memory.

Usage: python bench/digest_rate.py [--size-mib 2048] [--rounds 3] [--dir /tmp]

The file holds random bytes with a safetensors-like header (a digest does not care about the layout). Rounds
alternate which side runs first; medians are printed. Whether the file is in the page cache is the machine's
business: run with a file larger than free memory, or drop caches between rounds as root
(``echo 3 > /proc/sys/vm/drop_caches``, attempted with --drop-caches), for cold-read figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from evalgate.checkpoints import file_sha256  # noqa: E402


def plain_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def read_only(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 22):
            pass


def write_file(path: Path, mib: int) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [mib << 18], "data_offsets": [0, mib << 20]}}).encode()
    block = os.urandom(1 << 24)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        for _ in range(mib >> 4):
            f.write(block)


def drop_caches() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def timed(fn, path: Path, drop: bool) -> float:  # noqa: ANN001
    if drop:
        drop_caches()
    t = time.perf_counter()
    fn(path)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--drop-caches", action="store_true")
    args = ap.parse_args()
    path = Path(args.dir) / "evalgate-digest-bench.safetensors"
    write_file(path, args.size_mib)
    try:
        drop = args.drop_caches and drop_caches()
        assert file_sha256(path) == plain_sha256(path)
        times: dict[str, list[float]] = {"ours": [], "plain": [], "read": []}
        sides = [("ours", file_sha256), ("plain", plain_sha256), ("read", read_only)]
        for r in range(args.rounds):
            for name, fn in sides if r % 2 == 0 else sides[::-1]:
                times[name].append(timed(fn, path, drop))
        mb = path.stat().st_size / 1e6
        o, p, rd = (statistics.median(times[k]) for k in ("ours", "plain", "read"))
        print(f"file {mb:.0f} MB, page cache {'dropped each run' if drop else 'warm (not dropped)'}")
        print(f"file_sha256 : {mb / o:.0f} MB/s; plain read+sha256: {mb / p:.0f} MB/s; "
              f"ratio plain/ours {p / o:.2f}; reading alone (no hash): {mb / rd:.0f} MB/s")
        buf = os.urandom(256 << 20)
        t = time.perf_counter()
        hashlib.sha256(buf).digest()
        sha = 268.4 / (time.perf_counter() - t)
        line = f"in memory, one core: sha256 {sha:.0f} MB/s"
        try:
            import blake3  # type: ignore[import-not-found]

            t = time.perf_counter()
            blake3.blake3(buf, max_threads=blake3.blake3.AUTO).digest()
            line += f"; blake3 (all cores) {268.4 / (time.perf_counter() - t):.0f} MB/s"
        except ImportError:
            line += "; blake3 not installed"
        print(line)
    finally:
        path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
