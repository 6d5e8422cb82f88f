"""One ``StrictModel``: every pydantic model of evalgate inherits its rules (issue 43, "one door")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.helpers import source

ROOT = Path(__file__).resolve().parents[1] / "evalgate"


def _bases(tree: ast.Module) -> list[tuple[str, int, str]]:
    return [(node.name, node.lineno, source.unparsed(base)) for node in source.nodes(tree, ast.ClassDef)
            for base in node.bases]


def test_only_strict_model_subclasses_pydantic_base_model() -> None:
    direct = [f"{p.relative_to(ROOT.parent)}:{line} {name}" for p, tree in source.trees("evalgate").items()
              for name, line, base in _bases(tree) if base in ("BaseModel", "pydantic.BaseModel")]
    assert direct == ["evalgate/core/models.py:8 StrictModel"]


def test_no_model_declares_extra_forbid_itself() -> None:
    declared = [str(p.relative_to(ROOT.parent)) for p in sorted(ROOT.rglob("*.py"))
                if "ConfigDict(extra=" in p.read_text(encoding="utf-8")]
    assert declared == ["evalgate/core/models.py"]


def test_strict_model_refuses_unknown_keys_and_changes() -> None:
    from evalgate.core.models import StrictModel

    class Point(StrictModel):
        x: int
        """The x coordinate."""

    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Point(x=1, y=2)
    p = Point(x=1)
    with pytest.raises(ValidationError, match="frozen"):
        p.x = 2
    assert Point.model_fields["x"].description == "The x coordinate."


def test_models_keep_their_own_differences() -> None:
    """A run record is built field by field; backend options refuse coercion; results hold enum values as text;
    all of them refuse unknown keys."""
    from evalgate.backends.base import BackendOptions
    from evalgate.core.models import StrictModel
    from evalgate.core.results import Result
    from evalgate.protocol.spec import StrictModel as FromSpec
    from evalgate.runner.record import ProtocolRef

    assert FromSpec is StrictModel
    assert ProtocolRef.model_config["frozen"] is False and ProtocolRef.model_config["extra"] == "forbid"
    assert BackendOptions.model_config["strict"] is True and BackendOptions.model_config["frozen"] is True
    assert Result.model_config["use_enum_values"] is True and Result.model_config["extra"] == "forbid"
