"""``Workspace``: evalgate from Python, one object holding the store, the splits directory, the key and the actor.

The shape of inspect_ai's ``eval()`` -> ``EvalLog`` and simonw/llm's ``llm.get_model()``: a notebook or a Trainer
callback builds a workspace and calls it; every result is typed. The CLI builds its workspace with
``Workspace.from_env()`` (the ``EVALGATE_*`` variables, ``evalgate.core.environment``) and calls the same functions.

    ws = evalgate.Workspace(home=".evalgate/nb", actor="alice")
    run = ws.evaluate("protocols/addition.yaml", "ckpts/checkpoint-9", split="addition-dev")
    run.metrics.pass_at[1].value, run.metrics["pass@1_stderr"]   # typed, or by name as stored
    verdict = ws.gate("gates/demo.yaml")
    verdict.passed, [r for r in verdict.rules if not r.passed]

The workspace owns its ``Environment`` (``env``) and its ``Store`` (``store``, which carries ``env``) and hands them
down: everything below a method (split reads, the key, the models cache, the access log, the run's worker threads)
takes them from the store or an ``env=`` argument, never from the process environment or from state of the
process, so two workspaces may be used side by side, from two threads too.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalgate.core.environment import VARIABLES, Environment, default_key_file

if TYPE_CHECKING:
    from evalgate.checkpoints.resolve import Checkpoint
    from evalgate.diagnostics.results import DiagnosisSummary
    from evalgate.diagnostics.thresholds import Thresholds
    from evalgate.gate.report.outputs import GateReport
    from evalgate.gate.report.suite import SuiteReport
    from evalgate.gate.results import Verdict
    from evalgate.protocol.spec import LoadedProtocol, ProtocolLock
    from evalgate.runner.plan import RunOptions
    from evalgate.runner.record import RunRecord
    from evalgate.store import Database, Store
    from evalgate.sweep import SweepSummary
    from evalgate.views.audit import AuditSummary
    from evalgate.views.samples import Comparison, Samples


class Workspace:
    """Where evalgate keeps things (store, splits, key) and who acts, as one object.

    Args:
        home: the store's directory (``evalgate.duckdb``, the digest cache); created on first use.
        splits: the split manifests' directory (default ``home/splits``).
        key: the private splits' Fernet key (``bytes`` or ``str``), or a ``Path`` to the file holding it (default
            ``$XDG_CONFIG_HOME/evalgate/private.key``, created by the first private import, outside any repo).
        actor: who reads splits, as the access log records it (default: the OS user).
        clock: the store's time source (default ``datetime.now(UTC)``); a fixed clock makes timestamps repeatable.
        models: where converted GGUF checkpoints are cached (default ``home/models``).
        database: the database to use instead of ``home/evalgate.duckdb``, e.g. ``Database(":memory:")``
            (``evalgate.store.Database``; nothing is written to ``home`` then, and it is lost with the object).
        store: a PostgreSQL server's URL (``postgresql://user@host:port/dbname``) to keep the store on instead of
            ``home/evalgate.duckdb`` (as ``EVALGATE_STORE``; the password from libpq's ``PGPASSWORD`` or
            ``~/.pgpass``).
    """

    def __init__(self, home: str | Path = ".evalgate", splits: str | Path | None = None,
                 key: bytes | str | Path | None = None, actor: str | None = None,
                 clock: Callable[[], datetime] | None = None, models: str | Path | None = None,
                 database: Database | None = None, store: str | None = None) -> None:
        home = Path(home)
        key_bytes = key.encode() if isinstance(key, str) else key if isinstance(key, bytes) else None
        env = Environment(home=home, splits=Path(splits) if splits is not None else home / "splits", key=key_bytes,
                          key_file=key if isinstance(key, Path) else default_key_file(), actor=actor,
                          models=Path(models) if models is not None else None, database=database, store=store)
        self.env = env.replace(clock=clock) if clock is not None else env

    @classmethod
    def from_env(cls, actor: str | None = None) -> Workspace:
        """The workspace the ``EVALGATE_*`` environment variables describe (docs/API.md lists them):
        ``$EVALGATE_HOME`` (default ``./.evalgate``), ``$EVALGATE_SPLITS`` (default ``./splits``),
        ``$EVALGATE_PRIVATE_KEY`` / ``$EVALGATE_PRIVATE_KEY_FILE``, ``$EVALGATE_ACTOR``, ``$EVALGATE_MODELS``, ...:
        what every command acts in (``evalgate.commands.workspace``).

        Args:
            actor: who acts, in place of the variables' actor (a command's ``--actor``); None keeps it.
        """
        env = Environment.from_env()
        return cls.of(env.replace(actor=actor) if actor else env)

    @classmethod
    def current(cls, actor: str | None = None) -> Workspace:
        """``from_env(actor)``, under its old name (deprecated: there is no active workspace any more).

        Warns:
            DeprecationWarning: always; the name goes in the next release.
        """
        warnings.warn("Workspace.current() is Workspace.from_env() now (no workspace is active); the old name goes "
                      "in the next release", DeprecationWarning, stacklevel=2)
        return cls.from_env(actor)

    @classmethod
    def of(cls, env: Environment) -> Workspace:
        """The workspace of an ``Environment``."""
        ws = cls.__new__(cls)
        ws.env = env
        return ws

    def __repr__(self) -> str:
        return f"Workspace(home={str(self.home)!r}, splits={str(self.splits)!r}, actor={self.actor!r})"

    @property
    def home(self) -> Path:
        """The store's directory."""
        return self.env.home

    @property
    def splits(self) -> Path:
        """The split manifests' directory."""
        return self.env.splits

    @property
    def actor(self) -> str:
        """Who acts (the OS user when none was given)."""
        return self.env.actor_name

    @cached_property
    def store(self) -> Store:
        """The store, ``home/evalgate.duckdb``, the workspace's ``database`` or its server (``store``), as
        ``evalgate.store.db.default_database`` picks it (opened, and migrated, on first use).

        Raises:
            BadInput: ``store`` (or ``EVALGATE_STORE``) is not a PostgreSQL URL.
        """
        from evalgate.store import Store

        return Store(env=self.env)

    @contextmanager
    def activate(self) -> Iterator[Workspace]:
        """Deprecated: within the block, the process's ``EVALGATE_*`` variables describe this workspace (restored
        after), so a library call given no store or ``env=`` (which reads them) acts in it; a memory ``database`` is
        named for the block (``evalgate.store.db.memory_url``). The clock does not carry over. The variables are
        the process's: do not use two such blocks at once from two threads. Hand ``ws.store`` or ``env=ws.env``
        down instead.

        Warns:
            DeprecationWarning: always; it goes in the next release.
        """
        from evalgate.store.db import memory_url

        warnings.warn("Workspace.activate() sets the process's EVALGATE_* variables for the block; pass ws.store or "
                      "env=ws.env to the library call instead (it goes in the next release)", DeprecationWarning,
                      stacklevel=3)
        wanted = self.env.variables()
        if self.env.database is not None:
            wanted["EVALGATE_STORE"] = memory_url(self.env.database)
        saved = {name: os.environ.get(name) for name in VARIABLES}
        os.environ.update({name: wanted[name] for name in VARIABLES if name in wanted})
        for name in VARIABLES:
            if name not in wanted:
                os.environ.pop(name, None)
        try:
            yield self
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    # -- the front door ------------------------------------------------------------------------------------------
    def evaluate(self, protocol: str | Path, checkpoint: str | Path | Checkpoint, split: str,
                 options: RunOptions | None = None, **option: Any) -> RunRecord:
        """Evaluate a checkpoint on a split under a frozen protocol (``evalgate run``).

        Args:
            protocol: protocol YAML (must match its ``.lock``; ``freeze`` writes it).
            checkpoint: HF directory, GGUF file, or a resolved ``Checkpoint``.
            split: split name (its manifest in ``splits``).
            options: ``RunOptions``; or give its fields as keywords (``backend="replay"``, ``seed=1``,
                ``purpose="checkpoint-selection"``, ``train_seed=...``, ``backend_options={...}``). The actor
                defaults to the workspace's; progress bars are off unless ``progress=True``.

        Returns:
            The complete ``RunRecord`` (``metrics.pass_at[1].value`` and ``.stderr``, also read by name as
            ``metrics["pass@1"]``, ``metrics["pass@1_stderr"]``; ``counts``, ...).

        Raises:
            BadInput, ProtocolDrift, RefusedByPolicy, EngineError: as ``evalgate.runner.evaluate.evaluate_checkpoint``.
        """
        from evalgate.runner.evaluate import RunOptions, evaluate_checkpoint

        opts = options or RunOptions(**{"progress": False, **option})
        return evaluate_checkpoint(protocol, checkpoint, split, self._acting(opts), self.store)

    def _acting(self, options: RunOptions) -> RunOptions:
        """``options`` with the workspace's actor where they name none (a copy: the caller's are left as given)."""
        return options if options.actor is not None else replace(options, actor=self.actor)

    def freeze(self, protocol: str | Path) -> ProtocolLock:
        """Write the protocol's ``.lock`` and register it in the store (``evalgate protocol freeze``).

        Returns:
            The ``ProtocolLock`` (name, version, sha256, frozen_at, resolved, versions; ``as_dict()`` the lock
            document).
        """
        from evalgate.protocol.freeze import freeze

        # the store is opened only once the protocol loads and its lock allows the freeze: a refusal creates none
        return freeze(Path(protocol), lambda: self.store)

    def verify(self, protocol: str | Path) -> LoadedProtocol:
        """Check a protocol as ``run`` and ``freeze`` would (``evalgate protocol verify``): it loads, matches its
        ``.lock``, and its ``name@version`` is recorded in the store with this content or not at all.

        Returns:
            The ``LoadedProtocol`` (``ref``, ``sha256``, ``spec``).

        Raises:
            ProtocolDrift: the file no longer matches its lock (``diff``: the changed fields).
            BadInput: an invalid protocol, no or an inconsistent lock, or the store holds other content under
                ``name@version``.
        """
        from evalgate.protocol.freeze import verify_frozen
        from evalgate.protocol.spec import load_protocol, verify

        verify(load_protocol(protocol))  # the file and its lock first: a bad protocol opens no store
        return verify_frozen(Path(protocol), self.store)

    def report(self, gate_id: str, outputs: Mapping[str, str | Path] | None = None) -> GateReport | SuiteReport:
        """Write a stored gate's outputs again from its stored verdict (``evalgate report``): no split is read and
        nothing is logged.

        Args:
            gate_id: the gate (``Verdict.gate_id``, printed by ``evalgate gate``), or a suite's
                (``SuiteVerdict.gate_id``: the whole suite's report, rebuilt from its members' stored gates).
            outputs: report format name (``html``, ``json``, ``junit``, ``markdown``, a plugin's) -> path.

        Returns:
            The ``GateReport`` (``verdict``, ``files`` written; ``passed`` as the gate decided); for a suite a
            ``gate.report.suite.SuiteReport``.

        Raises:
            BadInput: no stored gate ``gate_id``, or an unknown report format (for a suite: one with no suite
                writer).
            RefusedByPolicy: the access log does not hold, or does not record, this verdict (for a suite: its or a
                member's; the store was edited), or cannot be checked here (no signing key).
        """
        from evalgate.gate.report.suite import report_stored

        return report_stored(gate_id, self.store, outputs)

    def gate(self, policy: str | Path, *, evaluate_decision: bool = True,
             expect_head: tuple[int, str] | None = None, accept_broken_chain: str | None = None,
             progress: bool = False, train_run: str | None = None) -> Verdict:
        """Run the release gate of a policy file and store its verdict (``evalgate gate`` without the report files:
        ``gate_and_report`` writes those too).

        Args:
            policy: the gate policy YAML (``evalgate.gate.load_policy``).
            evaluate_decision: False decides on the release-gate runs already stored instead of evaluating.
            expect_head: ``(seq, row_hash)`` the access log must hold (``--expect-head``).
            accept_broken_chain: a reason to gate although the access log's hash chain is broken (logged).
            progress: say on stderr what each evaluation reads (counts only).
            train_run: the training run to gate (overrides the policy's ``train_run``).

        Returns:
            The ``Verdict``: ``passed``, ``rules`` (each ``RuleOutcome(rule, passed, detail)``), ``seeds``,
            ``stats``, ``ship()``, ``gate_id``; ``as_dict()`` is the verdict part of ``evalgate gate --json``.

        Raises:
            BadInput, RefusedByPolicy, ProtocolDrift: as ``evalgate.gate.run_gate``.
        """
        from evalgate.gate import load_policy, run_gate

        loaded = load_policy(policy)
        if accept_broken_chain:
            loaded = loaded.model_copy(update={"accept_broken_chain": accept_broken_chain})
        if train_run:
            loaded = loaded.model_copy(update={"train_run": train_run})
        return run_gate(loaded, self.store, self.actor, evaluate_decision, expect_head, progress)

    def gate_and_report(self, policy: str | Path, outputs: Mapping[str, str | Path] | None = None, *,
                        expect_head: tuple[int, str] | None = None, accept_broken_chain: str | None = None,
                        progress: bool = False, swept: SweepSummary | None = None,
                        train_run: str | None = None) -> GateReport:
        """What ``evalgate gate`` does: the gate (as ``gate``), then its reports; a gate that decides nothing still
        writes, in each format that has an error writer, the output asked for, saying why, then raises.

        Args:
            outputs: report format name (``html``, ``json``, ``junit``, ``markdown``, a plugin's) -> path.
            swept: the ``evaluate_missing`` sweep run before, carried into the report.
            train_run: the training run to gate (overrides the policy's ``train_run``).

        Returns:
            The ``GateReport`` (``verdict``, ``files`` written); ``as_dict()`` is ``evalgate gate --json``'s
            document. A suite policy (``members:``, ``gate.suite``) gives a ``gate.report.suite.SuiteReport``.

        Raises:
            BadInput: an unknown report format; and as ``gate``.
        """
        from evalgate.gate.report.outputs import gate_and_report
        from evalgate.gate.suite import is_suite

        if is_suite(policy):  # a suite policy (members:): one report for the suite
            from evalgate.gate.report.suite import suite_and_report

            return suite_and_report(policy, self.store, outputs, self.actor,  # type: ignore[return-value]
                                    accept_broken_chain, expect_head, progress, train_run, swept)
        return gate_and_report(policy, self.store, outputs, self.actor, accept_broken_chain, expect_head,
                               progress, swept, train_run)

    def evaluate_missing(self, policy: str | Path, checkpoints: str, progress: bool = False) -> SweepSummary:
        """Sweep the checkpoints a glob matches on a gate policy's selection split, with its protocol file and
        backend, so every candidate has a complete selection run (``evalgate gate --evaluate-missing``).

        Raises:
            BadInput: a bad policy or glob; EvalgateError: some units failed (exit code the highest of theirs).
        """
        from evalgate.gate.missing import evaluate_missing

        return evaluate_missing(policy, checkpoints, self.actor, progress, store=self.store)

    def sweep(self, protocol: str | Path, checkpoints: str, splits: Sequence[str],
              options: RunOptions | None = None, ray: str | None = None, chunk: int = 4) -> SweepSummary:
        """Evaluate every checkpoint a glob matches on every split, skipping units already complete
        (``evalgate sweep``; ``ray``: a Ray address, or None to run here; ``chunk``: requests per Ray actor call).

        Returns:
            The ``SweepSummary``; ``as_dict()`` is ``evalgate sweep --json``'s document.
        """
        from evalgate.runner.evaluate import RunOptions
        from evalgate.sweep import SweepOptions, run_sweep

        opts = self._acting(options or RunOptions(progress=False))
        return run_sweep(protocol, checkpoints, list(splits), SweepOptions(run=opts, ray=ray, chunk=chunk),
                         self.store)

    def samples(self, run_id: str, item: str | None = None, status: str | None = None,
                limit: int | None = None) -> Samples:
        """A run's samples with prompt, completion, answer, score and status (``evalgate samples``; a logged read,
        refused for the private and human-audit tiers).

        Args:
            run_id: the run.
            item: only this item id.
            status: only samples with this status (``samples.sample_statuses()``).
            limit: at most this many samples (after filtering).

        Returns:
            The ``Samples`` (``counts``, ``total``, ``shown``, ``samples``: each a ``Sample``); ``as_dict()`` is
            ``evalgate samples --json``'s document.

        Raises:
            BadInput, RefusedByPolicy: as ``evalgate.views.samples.run_samples``.
        """
        from evalgate.views.samples import run_samples

        return run_samples(run_id, item, status, limit, self.actor, store=self.store)

    def compare(self, run_a: str, run_b: str) -> Comparison:
        """Two runs of one protocol on one split, sample by sample, with McNemar's exact test (``evalgate compare``;
        a logged read of the split per run).

        Returns:
            The ``Comparison`` (pair counts, ``transitions``, ``mcnemar_p``, ``rows``: each a ``ChangedSample``);
            ``as_dict()`` is ``evalgate compare --json``'s document.

        Raises:
            BadInput, RefusedByPolicy: as ``evalgate.views.samples.compare_runs``.
        """
        from evalgate.views.samples import compare_runs

        return compare_runs(run_a, run_b, self.actor, store=self.store)

    def audit(self, split: str | None = None, since: datetime | None = None,
              tier: str | None = None) -> AuditSummary:
        """Reads per split, actor, purpose and day, refusals and budgets (``evalgate audit``).

        Args:
            split: only this split (and the other names of its content).
            since: only access-log rows from then on (budgets are counted over their window ending now).
            tier: only splits of this tier.

        Returns:
            The ``AuditSummary`` (``splits``: name -> ``SplitAudit``, ``chain``, ``broken_manifests``); ``as_dict()``
            is ``evalgate audit --json``'s document.

        Raises:
            BadInput: ``split`` has neither a manifest nor any access-log row.
        """
        from evalgate.views.audit import audit_summary

        return audit_summary(self.store, split, since, tier)

    def diagnose(self, paths: Sequence[str | Path], seeds: Sequence[int] | None = None,
                 thresholds: Thresholds | str | Path | None = None, kl_target: float | None = None,
                 report: str | Path | None = None) -> DiagnosisSummary:
        """Read each training log (one per seed) and run the training-health signals (``evalgate diagnose``).

        Args:
            paths: training logs or run directories, one per seed.
            seeds: the training seed of each path (default: from a ``seed-N`` directory name).
            thresholds: ``Thresholds``, or a YAML file of its fields (docs/DIAGNOSTICS.md).
            kl_target: the KL target (> 0) in place of the thresholds'.
            report: write the HTML report with plots there.

        Returns:
            The ``DiagnosisSummary``: ``seeds`` (one ``Diagnosis`` per path: ``worst``, ``first_break``,
            ``findings``), ``fail``, ``report``; ``as_dict()`` is ``evalgate diagnose --json``'s document.

        Raises:
            BadInput: a path that is no readable log, a bad thresholds file, one seed per path not given.
        """
        from evalgate.diagnostics import diagnose_logs

        return diagnose_logs(list(paths), list(seeds) if seeds else None, thresholds, kl_target, report)
