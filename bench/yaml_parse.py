"""Benchmark: parsing a user's YAML file (protocols, gate policies, split manifests) on libyaml's parser against
PyYAML's pure-Python one (issue 31, the fast lane; also every command that reads a protocol or a manifest).

``evalgate.core.userfiles._parse`` checks the nesting depth on the event stream, then loads with ``_Loader``; both now
run on ``yaml.CSafeLoader``. The baseline is the same two steps on ``yaml.SafeLoader`` (what they ran on before;
``_Loader``'s error handling costs nothing on a file that loads). Both sides parse every YAML file under
``protocols/``, ``gates/`` and ``splits/`` of this checkout (uncached: ``_parse.__wrapped__``), alternating, and must
give equal documents.
Prints the median milliseconds per file of each and their ratio, with the load averages.

Usage: python bench/yaml_parse.py [--reps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    import yaml

    from evalgate.core import userfiles

    def pure(text: str) -> object:
        for _ in yaml.parse(text, Loader=yaml.SafeLoader):
            pass
        return yaml.load(text, Loader=yaml.SafeLoader)  # noqa: S506 - the safe loader

    texts = [p.read_text() for d in ("protocols", "gates", "splits") for p in sorted((ROOT / d).glob("*.yaml"))]
    for text in texts:
        assert pure(text) == userfiles._parse.__wrapped__(text)
    load = os.getloadavg()
    times: dict[str, list[float]] = {"libyaml": [], "pure": []}
    for rep in range(args.reps):
        for side in (("libyaml", "pure") if rep % 2 else ("pure", "libyaml")):
            fn = userfiles._parse.__wrapped__ if side == "libyaml" else pure
            t = time.perf_counter()
            for text in texts:
                fn(text)
            times[side].append((time.perf_counter() - t) / len(texts))
    c, p = statistics.median(times["libyaml"]), statistics.median(times["pure"])
    print(json.dumps({"files": len(texts), "pure_ms_per_file": round(p * 1e3, 3),
                      "libyaml_ms_per_file": round(c * 1e3, 3), "ratio_libyaml_to_pure": round(c / p, 3),
                      "reps": args.reps, "load_before": load, "load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
