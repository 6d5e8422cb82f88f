"""Split manifests and tier policies: the ``Manifest`` and ``Policy`` file models, the tier names and the purposes
the library logs, and the active splits directory and actor (``evalgate.core.environment``).

The default tier policies and the contamination-check rule are described in ``evalgate.splits``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from evalgate.core import enums
from evalgate.core.environment import Environment, or_from_env
from evalgate.core.errors import BadInput
from evalgate.core.models import StrictModel

Tier = Literal["smoke", "dev", "public", "private", "human-audit"]  # = the values of enums.Tier (a test checks)
TIERS: tuple[str, ...] = tuple(enums.Tier)
RELEASE_GATE = "release-gate"
ADD_PURPOSE = "add-split"
"""The purpose logged when a split is added (outcome ``added``) or an addition is refused."""
LIBRARY_READ = "library-read"
"""The purpose logged when ``read_items`` refuses a private or human-audit split."""


class Policy(StrictModel):
    """A tier's access policy."""


    purposes: list[str] | None = None
    """Purposes allowed to read; None allows any."""
    max_reads: int | None = Field(None, ge=0)
    """Reads allowed per window; None for no budget."""
    window_days: int = Field(30, ge=1)
    """Budget window, days. Default: 30."""
    hard: bool = False
    """Hard budget: refuse beyond it, no override. Soft: refuse unless an override reason is given."""
    warn_at: float = Field(0.8, gt=0, le=1)
    """Share of the budget from which reads warn. Default: 0.8."""
    max_contamination_checks: int | None = Field(None, ge=0)
    """Contamination checks (``evalgate splits contamination``) allowed per window, refused beyond (hard); None for
    no budget. Default: 4 on the private and human-audit tiers, none elsewhere."""


DEFAULT_POLICIES: dict[str, Policy] = {
    enums.Tier.SMOKE: Policy(),
    enums.Tier.DEV: Policy(),
    enums.Tier.PUBLIC: Policy(max_reads=20, window_days=30, hard=False),
    enums.Tier.PRIVATE: Policy(purposes=[RELEASE_GATE], max_reads=4, window_days=30, hard=True,
                               max_contamination_checks=4),
    enums.Tier.HUMAN_AUDIT: Policy(max_contamination_checks=4),
}


class Manifest(StrictModel):
    """A split manifest file (``<splits dir>/<name>.yaml``)."""


    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """Split name, unique in the splits directory."""
    tier: Tier
    """One of smoke, dev, public, private, human-audit."""
    data: str
    """Data file, relative to the manifest: JSONL with an ``id`` per record (``.enc`` when encrypted)."""
    sha256: str
    """sha256 of the data file's bytes as stored; a mismatch refuses every read."""
    content_sha256: str
    """sha256 of the plaintext JSONL (the split's identity, recorded by runs)."""
    count: int = Field(ge=0)
    """Number of items."""
    encrypted: bool = False
    """Whether the data file is Fernet-encrypted (required for the private tier)."""
    provenance: dict[str, Any] = {}
    """Where the data came from: source, license, partition rule."""
    policy: Policy | None = None
    """Overrides of the tier's default policy; may only tighten it."""

    @model_validator(mode="after")
    def _private_is_encrypted(self) -> Manifest:
        # Tier and encryption are bound: editing a private manifest's tier to escape its policy is refused.
        if (self.tier == enums.Tier.PRIVATE) != self.encrypted:
            raise ValueError(f"tier {self.tier} with encrypted={self.encrypted}: private splits, and only they, "
                             "are encrypted; re-import the split instead of editing its manifest")
        return self

    def effective_policy(self) -> Policy:
        """The tier default with the manifest's overrides applied (fields the manifest sets replace the default's).

        An override may only tighten: fewer purposes, fewer reads, a longer window, an earlier warning, a hard
        budget instead of a soft one.

        Raises:
            BadInput: an override loosens the tier default.
        """
        base = DEFAULT_POLICIES[self.tier]
        if self.policy is None:
            return base
        p = base.model_copy(update={k: getattr(self.policy, k) for k in self.policy.model_fields_set})
        fewer_purposes = p.purposes is not None and set(p.purposes) <= set(base.purposes or p.purposes)
        loosened = [what for what, bad in (
            ("purposes", base.purposes is not None and not fewer_purposes),
            ("max_reads", base.max_reads is not None and (p.max_reads is None or p.max_reads > base.max_reads)),
            ("window_days", (base.max_reads is not None or base.max_contamination_checks is not None)
             and p.window_days < base.window_days),
            ("max_contamination_checks", base.max_contamination_checks is not None
             and (p.max_contamination_checks is None or p.max_contamination_checks > base.max_contamination_checks)),
            ("warn_at", p.warn_at > base.warn_at),
            ("hard", base.hard and not p.hard),
        ) if bad]
        if loosened:
            raise BadInput(f"split {self.name}: the manifest's policy loosens the {self.tier} tier's default in "
                           f"{', '.join(loosened)} (default {base.model_dump()}); a manifest may only tighten it")
        return p


def splits_dir(*, env: Environment | None = None) -> Path:
    """``env``'s splits directory (``Environment.splits``; default the process's, ``or_from_env``: ``$EVALGATE_SPLITS``,
    default ``./splits``)."""
    return or_from_env(env).splits


def actor_name(explicit: str | None = None, *, env: Environment | None = None) -> str:
    """The actor: ``explicit`` (``--actor``), else ``env``'s (``Environment.actor_name``; default the process's:
    ``$EVALGATE_ACTOR``, else the OS user)."""
    return explicit or or_from_env(env).actor_name
