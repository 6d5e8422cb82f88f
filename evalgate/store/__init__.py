"""The store: one ``Database`` (a DuckDB file under a lock, ``":memory:"``, or a PostgreSQL server's database) and
the repositories over it.

    db.py       Database: the lock, the connection, sessions, migrations (the only DuckDB import); open_database
    pg.py       PostgresDatabase: the same on a PostgreSQL server (EVALGATE_STORE=postgresql://..., psycopg 3)
    dialect.py  the Connection the repositories run SQL on, and which dialect it speaks
    runs.py     ProtocolRepo, RunRepo: protocols, checkpoints, runs, scored samples
    cache.py    GenerationCache: prompts, generations, agentic turns, reward-model rewards
    contents.py PrivateContentRepo: every private content seen and its items' keyed fingerprints
    access.py   AccessLogRepo: the hash-chained access log and its heads; the budget rule (``Counted``)
    ratings.py  RatingRepo: human scores, raters, rating batches, form tokens
    gates.py    GateRepo: gate verdicts
    rows.py     the typed rows the readers return (runs, samples, gates, human scores, ratings)
    frames.py   FrameRepo: a query's result as Arrow / pandas / polars (``evalgate.views.frames``)
    codec.py    the sealing rule (which columns a sealed tier's rows encrypt) and its codec

``Store`` is every repository over one database: what most callers hold (``Workspace.store``). A repository alone
works the same way, e.g. ``AccessLogRepo(Database(":memory:"))``. All SQL of evalgate lives in this package;
schema changes are numbered migrations (``evalgate.store.migrations``).
"""

from __future__ import annotations

from typing import TypeVar, cast

from evalgate.store.access import (
    CONTAMINATION_CHECK,
    CONTAMINATION_CHECKS,
    READS,
    AccessLogRepo,
    BudgetLimit,
    ChainLink,
    Counted,
    SignedHead,
    VerifiedHead,
)
from evalgate.store.cache import TRAJECTORY_COLUMNS, GenerationCache
from evalgate.store.contents import PrivateContent, PrivateContentRepo
from evalgate.store.db import MEMORY, Connection, Database, Repository, default_database
from evalgate.store.frames import FrameRepo
from evalgate.store.gates import GateRepo
from evalgate.store.ratings import RatingRepo
from evalgate.store.rows import (
    AccessRow,
    BatchItem,
    BatchRow,
    GateRow,
    HumanScore,
    PromptRun,
    RaterRow,
    RatingEvent,
    RatingRow,
    Row,
    RunPrompt,
    RunRow,
    SampleRow,
    SampleScore,
    TurnRow,
)
from evalgate.store.runs import ProtocolRepo, RunRepo

__all__ = ["CONTAMINATION_CHECK", "CONTAMINATION_CHECKS", "MEMORY", "READS", "TRAJECTORY_COLUMNS", "AccessLogRepo",
           "AccessRow", "BatchItem", "BatchRow", "BudgetLimit", "ChainLink", "Connection", "Counted", "Database",
           "FrameRepo", "GateRepo", "GateRow", "GenerationCache", "HumanScore", "PrivateContent", "PrivateContentRepo",
           "PromptRun", "ProtocolRepo", "RaterRow", "RatingEvent", "RatingRepo", "RatingRow", "Repository", "Row",
           "RunPrompt", "RunRepo", "RunRow", "SampleRow", "SampleScore", "SignedHead", "Store", "TurnRow",
           "VerifiedHead", "default_database", "handed_down"]

R = TypeVar("R", bound=Repository)


class Store(ProtocolRepo, RunRepo, GenerationCache, AccessLogRepo, RatingRepo, GateRepo, FrameRepo,
            PrivateContentRepo):
    """Every repository over one database (``Repository``'s arguments: a ``Database`` or a path, default
    ``env``'s; a clock; the ``Environment`` it belongs to, ``env``, which the layers holding the store read). Each
    call is one transaction, except inside ``session()``, where calls share one open connection.

    New code that needs one table group can take that repository instead (e.g. ``AccessLogRepo``); ``Store`` is
    one, so callers pass theirs unchanged.
    """


def handed_down(store: R | None, caller: str) -> R:
    """``store``, as a library entry point's caller hands it down (``Workspace.store``). Called without one
    (deprecated, for one release): the store of the process's ``EVALGATE_*`` variables, with a
    ``DeprecationWarning`` naming ``caller``.

    Raises:
        BadInput: as ``Store()`` (a malformed ``EVALGATE_STORE``).
    """
    if store is not None:
        return store
    import warnings

    warnings.warn(f"{caller} called without a store: pass store=ws.store (a Workspace's); the process's store as "
                  "a default goes in the next release", DeprecationWarning, stacklevel=3)
    return cast(R, Store())  # every repository: whichever ``R`` the caller takes
