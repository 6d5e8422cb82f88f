"""MLflow: one MLflow run per training run + seed (tags ``evalgate.train_run``, ``evalgate.train_seed``; found
again by them, so later evaluations add to the same run), written with ``MlflowClient`` to
``--tracker-uri`` (default a local SQLite store, ``sqlite:///DIR/mlflow.db``) in experiment ``--tracker-project``
(a new experiment keeps its artifacts in ``DIR/mlartifacts/<project>``).

Metrics are ``eval/<split>/<metric>`` logged with ``step`` = the checkpoint's training step; MLflow allows no
``@`` in a key, so ``pass@1`` is written ``pass_at_1``. A gate is a run ``gate/<name>``: tags ``gate.verdict``,
``gate.reason``, ``gate.ship``, metrics ``gate/passed`` and ``gate/rule/<rule>`` (1 pass, 0 fail) at the gate's
step, the Markdown verdict as ``verdict.md`` and its report files as artifacts.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from evalgate.core.errors import MissingExtra
from evalgate.core.version import install_hint
from evalgate.trackers.base import EvalPoint, GateSummary, RunKey, TrackerConfig


def _client(uri: str) -> Any:
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as e:
        raise MissingExtra(f"--report-to mlflow needs the mlflow package: {install_hint('mlflow')}") from e
    return MlflowClient(tracking_uri=uri)


def metric_key(tag: str) -> str:
    """An MLflow metric key for a tag: ``@`` as ``_at_``, any other character MLflow refuses as ``_``."""
    return re.sub(r"[^A-Za-z0-9_\-. /]", "_", tag.replace("@", "_at_"))


def default_uri(directory: Path) -> str:
    """``sqlite:///<absolute dir>/mlflow.db``."""
    return f"sqlite:///{Path(directory).resolve() / 'mlflow.db'}"


class MlflowTracker:
    """Writes through one ``MlflowClient``.

    Raises:
        MissingExtra: the ``mlflow`` package is not installed (``evalgate[mlflow]``).
    """

    name = "mlflow"

    def __init__(self, config: TrackerConfig):
        Path(config.dir).mkdir(parents=True, exist_ok=True)
        self.uri = config.tracking_uri or default_uri(config.dir)
        self.client = _client(self.uri)
        exp = self.client.get_experiment_by_name(config.project)
        # artifacts next to the store, not in MLflow's default ./mlruns of the working directory
        where = (Path(config.dir).resolve() / "mlartifacts" / config.project).as_uri()
        self.experiment = exp.experiment_id if exp else self.client.create_experiment(config.project, where)
        self._runs: dict[str, str] = {}

    def _run(self, name: str, tags: dict[str, str]) -> str:
        if name in self._runs:
            return self._runs[name]
        query = " AND ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
        found = self.client.search_runs([self.experiment], query, max_results=1)
        rid = found[0].info.run_id if found else self.client.create_run(self.experiment, tags=tags,
                                                                        run_name=name).info.run_id
        self._runs[name] = rid
        return rid

    def log_eval(self, point: EvalPoint) -> None:
        """``eval/<split>/<metric>`` at ``step`` in the training run + seed's MLflow run."""
        from mlflow.entities import Metric

        rid = self._run(point.key.name, self.tags(point.key))
        ms = [Metric(metric_key(k), v, _now_ms(), point.step) for k, v in point.tags().items()]
        self.client.log_batch(rid, metrics=ms)

    @staticmethod
    def tags(key: RunKey) -> dict[str, str]:
        """The tags that identify a training run + seed's MLflow run."""
        return {"evalgate.train_run": key.train_run, "evalgate.train_seed": str(key.train_seed)}

    def log_gate(self, g: GateSummary) -> None:
        """The gate's run: verdict tags, 0/1 metrics at the gate's step and ``verdict.md``."""
        from mlflow.entities import Metric

        rid = self._run(f"gate/{g.gate}", {"evalgate.gate": g.gate})
        for k, v in {"gate.verdict": g.verdict, "gate.reason": g.reason, "gate.ship": g.ship or "",
                     "gate.gate_id": g.gate_id}.items():
            self.client.set_tag(rid, k, v)
        self.client.log_batch(rid, metrics=[Metric(metric_key(k), v, _now_ms(), g.step)
                                            for k, v in g.scalars().items()])
        with tempfile.TemporaryDirectory() as tmp:
            md = Path(tmp) / "verdict.md"
            md.write_text(g.markdown() + "\n", encoding="utf-8")
            self.client.log_artifact(rid, str(md))

    def close(self) -> list[str]:
        """Marks the runs finished; returns them with the tracking URI."""
        for rid in self._runs.values():
            self.client.set_terminated(rid)
        written, self._runs = [f"mlflow run {rid} ({name}) at {self.uri}" for name, rid in self._runs.items()], {}
        return written


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)
