"""What hashing every checkpoint the gate decides on costs (issue 42): a checkpoint's identity computed from its
bytes (``checkpoint_identity(verify=True)``, BLAKE3 on all cores, as runs on public/private splits and the gate do
now) against the digest cache's fast path (stat signatures only, no byte read: what they did before), on an HF
directory holding one synthetic safetensors file of SIZE MiB (``bench/digest_rate.py``'s writer).

Usage: python bench/gate_verify.py [--size-mib 1024] [--rounds 5] [--dir /tmp] [--drop-caches]

Prints one JSON document: medians of alternated rounds, the hashing rate in MB/s and the seconds one verified
checkpoint adds (verified - cached); with --drop-caches as root, the cold figures too. The gate verifies each
seed's best checkpoint and the baseline once (a run in the same process reuses the in-memory result).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from digest_rate import drop_caches, read_only, rounds, write_dir  # noqa: E402

from evalgate.checkpoints import identity  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--drop-caches", action="store_true")
    args = ap.parse_args()
    d = Path(args.dir) / "evalgate-gate-verify-bench"
    os.environ["EVALGATE_HOME"] = str(d / "home")
    os.environ.pop("EVALGATE_NO_DIGEST_CACHE", None)
    identity.RACY_WINDOW_S = 0.0  # the file was just written: let the cache remember it at once
    path = write_dir(d, args.size_mib)
    files = identity.identity_files(d)
    load_before = os.getloadavg()

    def verified() -> str:
        identity._VERIFIED.clear()  # a fresh process: nothing verified yet
        return identity.checkpoint_identity(files, verify=True)

    try:
        assert identity.checkpoint_identity(files) == verified()  # fills the cache; both agree
        sides = [("cached", lambda: identity.checkpoint_identity(files)), ("verified", verified)]
        mb = path.stat().st_size / 1e6
        read_only(path)
        out: dict[str, object] = {"cores": os.cpu_count(), "size_mb": round(mb), "rounds": args.rounds}
        for label, drop in [("warm", False)] + ([("cold", True)] if args.drop_caches and drop_caches() else []):
            t = rounds(sides, args.rounds, drop)
            out[label] = {"cached_s": round(t["cached"], 4), "verified_s": round(t["verified"], 3),
                          "hash_rate_mb_s": round(mb / t["verified"]),
                          "seconds_added_per_checkpoint": round(t["verified"] - t["cached"], 3)}
        out["loadavg_before"] = [round(x, 1) for x in load_before]
        out["loadavg_after"] = [round(x, 1) for x in os.getloadavg()]
        print(json.dumps(out, indent=2))
    finally:
        for f in sorted(d.rglob("*"), reverse=True):
            f.rmdir() if f.is_dir() else f.unlink()
        d.rmdir()


if __name__ == "__main__":
    main()
