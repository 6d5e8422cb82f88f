"""Checkpoint digest rate on an HF directory holding one synthetic safetensors file of SIZE MiB (default 2048):
evalgate's identity function (``dir_digest``, digest cache off) with sha256 (the identity before issue 21) and with
BLAKE3 (all cores, memory-mapped: new identities), reading alone, and the rates of sha256 and BLAKE3 on data
already in memory.

Usage: python bench/digest_rate.py [--size-mib 2048] [--rounds 3] [--dir /tmp] [--drop-caches]

The file holds random bytes with a safetensors-like header (a digest does not care about the layout). Each round
runs every side once, alternating which goes first; medians are printed, warm (page cache holding the file) and,
with --drop-caches as root (``echo 3 > /proc/sys/vm/drop_caches`` before every side), cold. The ratio
sha256 time / blake3 time is the speed-up of the change, measured in the same run. The load average is printed
before and after: the bench shares the machine with whatever else runs.
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
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ["EVALGATE_NO_DIGEST_CACHE"] = "1"  # measure hashing, not the stat-keyed cache
import blake3  # noqa: E402

from evalgate.checkpoints.identity import DigestCache, dir_digest  # noqa: E402


def read_only(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 22):
            pass


def write_dir(d: Path, mib: int) -> Path:
    """config.json and model.safetensors of ``mib`` MiB of random weights; returns the weights file."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text('{"model_type": "llama"}')
    header = json.dumps({"w": {"dtype": "F32", "shape": [mib << 18], "data_offsets": [0, mib << 20]}}).encode()
    block = os.urandom(1 << 24)
    path = d / "model.safetensors"
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        for _ in range(mib >> 4):
            f.write(block)
    return path


def drop_caches() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def rounds(sides: list[tuple[str, Callable[[], object]]], n: int, drop: bool) -> dict[str, float]:
    """Median seconds per side over ``n`` alternated rounds (caches dropped before each side when ``drop``)."""
    times: dict[str, list[float]] = {name: [] for name, _ in sides}
    for r in range(n):
        for name, fn in sides if r % 2 == 0 else sides[::-1]:
            if drop:
                drop_caches()
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--drop-caches", action="store_true")
    args = ap.parse_args()
    d = Path(args.dir) / "evalgate-digest-bench"
    path = write_dir(d, args.size_mib)
    print(f"{os.cpu_count()} cores; load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    try:
        sides: list[tuple[str, Callable[[], object]]] = [
            ("sha256", lambda: dir_digest(d, DigestCache(), "sha256")),
            ("blake3", lambda: dir_digest(d, DigestCache(), "blake3")),
            ("read", lambda: read_only(path))]
        mb = path.stat().st_size / 1e6
        read_only(path)  # warm: the file in the page cache
        conditions = [("warm", False)]
        if args.drop_caches:
            conditions.append(("cold", True) if drop_caches() else ("cold: not measured (drop_caches needs root)",
                                                                    False))
        print(f"file {mb:.0f} MB; evalgate dir_digest, digest cache off; medians of {args.rounds} alternated rounds")
        for label, drop in conditions:
            if label.startswith("cold:"):
                print(label)
                continue
            t = rounds(sides, args.rounds, drop)
            print(f"{label}: sha256 (before) {mb / t['sha256']:.0f} MB/s, blake3 (after) {mb / t['blake3']:.0f} "
                  f"MB/s, ratio sha256 time / blake3 time {t['sha256'] / t['blake3']:.2f}; reading alone "
                  f"{mb / t['read']:.0f} MB/s")
        buf = os.urandom(256 << 20)
        t0 = time.perf_counter()
        hashlib.sha256(buf).digest()
        sha = 268.4 / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        blake3.blake3(buf, max_threads=blake3.blake3.AUTO).digest()
        print(f"in memory: sha256 (one core) {sha:.0f} MB/s; blake3 (all cores) "
              f"{268.4 / (time.perf_counter() - t0):.0f} MB/s")
    finally:
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
        print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
