"""Malformed user files never reach exit 3 (issue 27): a YAML value that cannot be built (a date-shaped
``2026-13-45``, a lone surrogate), nesting too deep, numeric overflow in a training log, a directory given for a
file, a rubric that is not UTF-8, a flag that does not parse under ``--json``: each is exit 2 (or a normal result)
with the file and line named, and one bad manifest hides no other. The CLI runs in-process (click's CliRunner)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result

from evalgate.core.errors import BadInput
from evalgate.splits import list_manifests, splits_dir, write_split
from tests.conftest import REPO
from tests.helpers.cli import cli

pytestmark = pytest.mark.usefixtures("memory_store")  # no file, lock or process here: the store in memory

PROTOCOL = (REPO / "protocols" / "addition.yaml").read_text()
POLICY = (REPO / "gates" / "demo.yaml").read_text()


def assert_not_internal(r: Result, what: str) -> None:
    """The command ended through its documented exit, not with an internal error or an escaped exception."""
    assert r.exit_code != 3 and "internal error" not in r.output, (what, r.output[-600:])
    assert r.exception is None or isinstance(r.exception, SystemExit), (what, repr(r.exception))


def two_manifests() -> tuple[Path, Path]:
    write_split("good", "dev", [{"id": "1", "q": "x"}], {"source": "test"})
    write_split("bad", "dev", [{"id": "1", "q": "x"}], {"source": "test"})
    return splits_dir() / "good.yaml", splits_dir() / "bad.yaml"


@pytest.mark.parametrize("kind", ["protocol", "policy"])
@pytest.mark.parametrize("value,problem", [("2026-13-45", "month must be in 1..12"),
                                           ('"\\ud800"', "invalid Unicode character escape code")])
def test_a_value_yaml_cannot_build_is_bad_input_naming_file_and_line(tmp_path: Path, kind: str, value: str,
                                                                     problem: str) -> None:
    text = PROTOCOL if kind == "protocol" else POLICY
    lines = text.splitlines()
    n = next(i for i, ln in enumerate(lines) if ln.startswith("name:"))
    lines[n] = f"name: {value}"
    path = tmp_path / f"{kind}.yaml"
    path.write_text("\n".join(lines) + "\n")
    r = (cli("protocol", "show", path) if kind == "protocol" else
         cli("audit", "reward", "--run", "nope", "--policy", path))
    assert r.exit_code == 2, r.output
    assert f"{path}:{n + 1}: " in r.output and problem in r.output


def test_a_broken_manifest_hides_no_other_split() -> None:
    good, bad = two_manifests()
    bad.write_text(bad.read_text().replace("count: 1", "count: 2026-13-45"))
    line = bad.read_text().splitlines().index("count: 2026-13-45") + 1
    r = cli("splits", "list")
    assert r.exit_code == 2 and re.search(r"^good\s+dev\s+1 items", r.output, re.M), r.output
    assert f"{bad}:{line}: split manifest: cannot read '2026-13-45'" in r.output
    r = cli("audit", "--json")
    assert r.exit_code == 2, r.output
    doc = json.loads(r.stdout)
    assert list(doc["splits"]) == ["good"] and len(doc["broken_manifests"]) == 1
    good.write_text(good.read_text().replace("tier: dev", "tier: [dev"))
    with pytest.raises(BadInput) as e:  # the strict listing names both files, not only the first
        list_manifests()
    assert str(good) in e.value.message and str(bad) in e.value.message


def test_two_huge_values_in_a_trainer_state_do_not_overflow_diagnose(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    hist = [{"step": s, "loss": 1e308, "reward": 1e308 if s % 2 else -1e308} for s in range(1, 6)]
    (run / "trainer_state.json").write_text(json.dumps({"global_step": 5, "log_history": hist}))
    r = cli("diagnose", run, "--json")
    assert_not_internal(r, "diagnose")
    assert r.exit_code in (0, 1) and json.loads(r.stdout)["seeds"][0]["steps"]


def test_a_directory_given_for_an_output_file_is_refused_before_any_work(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 1.0}]}))
    for args in (("diagnose", run, "--report", tmp_path), ("gate", "--policy", tmp_path / "p.yaml", "--report",
                                                           tmp_path), ("report", "g1", "--junit", tmp_path)):
        r = cli(*args)
        assert r.exit_code == 2 and "is a directory" in r.output, (args, r.output)
    from evalgate.core.fileio import atomic_write

    with pytest.raises(BadInput, match="is a directory"):
        atomic_write(tmp_path, "x")


def test_an_output_file_under_a_regular_file_is_bad_input(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 1.0}]}))
    blocker = tmp_path / "reports"
    blocker.write_text("")
    r = cli("diagnose", run, "--report", blocker / "d.html")
    assert r.exit_code == 2, r.output
    assert f"cannot write {blocker / 'd.html'}: {blocker} is a file, not a directory" in r.output
    # a tracker directory is checked before the run it records, not after
    r = cli("run", "--protocol", tmp_path / "nope.yaml", "--checkpoint", run, "--split", "s",
            "--report-to", "tensorboard", "--tracker-dir", blocker / "tb")
    assert r.exit_code == 2, r.output
    assert f"--tracker-dir {blocker / 'tb'}: cannot write into it: {blocker} is a file, not a directory" in r.output


def test_a_rubric_that_is_not_utf8_is_bad_input(tmp_path: Path) -> None:
    from evalgate.store import Store
    from tests.test_human_audit import add_run

    write_split("ha", "human-audit", [{"id": f"q{i}", "question": "?"} for i in range(3)], {"source": "test"})
    add_run(Store(), "run1", "ha", {"q0": 1.0, "q1": 0.0, "q2": 1.0})
    rubric = tmp_path / "rubric.md"
    rubric.write_bytes(b"Score 1-5.\nSehr gut: \xfc\n")
    r = cli("audit", "batch", "create", "--run", "run1", "--samples", "2", "--rubric", rubric)
    assert r.exit_code == 2 and f"{rubric}:2" in r.output, r.output


def test_a_json_command_with_a_bad_flag_prints_a_json_error(tmp_path: Path) -> None:
    r = cli("splits", "list", "--json", "--no-such-flag")
    assert r.exit_code == 2
    assert json.loads(r.stdout) == {"error": "No such option '--no-such-flag'.", "exit_code": 2}
    r = cli("diagnose", tmp_path, "--json", "--seed", "x")
    assert r.exit_code == 2 and json.loads(r.stdout)["exit_code"] == 2
    assert cli("splits", "list", "--no-such-flag").stdout == ""  # without --json stdout stays empty


def test_a_date_shaped_backend_option_is_text() -> None:
    from evalgate.backends.base import parse_backend_options

    assert parse_backend_options(["model=2026-13-45", "n=4"]) == {"model": "2026-13-45", "n": 4}


# -- fuzz ----------------------------------------------------------------------------------------------------------
SEED = 27
CASES_PER_KIND = 60
ODD_VALUES = ["2026-13-45", "2026-02-30", "2026-99-99T99:99:99", "1e308", "-1e308", "1e999", ".inf", ".nan",
              "9" * 400, '"\\ud800"', '"\\udfff x"', '"a\\0b"', "[[[[[[[[[[[]]]]]]]]]]]", "{a: {b: {c: [1, {d: e}]}}}",
              "~", "''", "[]", "{}", "true", "!!binary AAAA", "&a [*a]", "0x" + "f" * 40, "-0", "1_000"]
JSON_VALUES = ["1e308", "-1e308", "1e999", "NaN", "Infinity", "-Infinity", '"\\ud800"', "null", "[]", "{}", "true",
               '"2026-13-45"', "9" * 400, "[" * 3000 + "]" * 3000, '"x"', "0.0"]


def _mutate(text: str, rng: random.Random, values: list[str]) -> str:
    """One of: truncation, byte flips, a scalar swapped for another type or an odd value (date-shaped, huge,
    surrogate, NUL), deep nesting prepended, a key duplicated."""
    op = rng.randrange(5)
    if op == 0:
        return text[:rng.randrange(len(text))]
    if op == 1:
        b = bytearray(text.encode())
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return b.decode("utf-8", "surrogateescape")
    if op == 2:
        spots = [m.span(1) for m in re.finditer(r":\s*([^\s,{}\[\]][^\n,{}\]]*)", text)]
        lo, hi = rng.choice(spots)
        return text[:lo] + rng.choice(values) + text[hi:]
    if op == 3:
        depth = rng.choice([40, 70, 300])
        return text + f"\nzz_deep: {'[' * depth}{']' * depth}\n" if values is ODD_VALUES else \
            "[" * depth + text + "]" * depth
    lines = text.splitlines()
    return "\n".join(lines + [rng.choice(lines)]) + "\n"


def _write(path: Path, text: str) -> None:
    path.write_bytes(text.encode("utf-8", "surrogateescape"))


def _trainer_state() -> str:
    hist = [{"step": s, "loss": 1.0 / s, "reward": 0.1 * s, "kl": 0.01 * s, "completions/mean_length": 40.0 + s}
            for s in range(1, 9)]
    return json.dumps({"global_step": 8, "log_history": hist}, indent=1)


def test_fuzzed_user_files_never_give_exit_3(tmp_path: Path) -> None:
    """Fuzz: 4 kinds (protocol, split manifest, gate policy, trainer_state.json) x 60 mutated files = 240 cases,
    ``random.Random(27)``: truncation, byte flips, type swaps, date-shaped and huge numbers, surrogates, NUL, deep
    nesting, duplicate keys. Each goes through the command that reads it (``protocol show``, ``splits list``,
    ``audit reward --policy``, ``diagnose``); none may exit 3 or raise."""
    rng = random.Random(SEED)
    good, bad = two_manifests()
    manifest = bad.read_text()
    run = tmp_path / "run"
    run.mkdir()
    kinds: list[tuple[str, str, list[str], Any]] = [
        ("protocol", PROTOCOL, ODD_VALUES, lambda p: [("protocol", "show", p)]),
        ("manifest", manifest, ODD_VALUES, lambda p: [("splits", "list")]),
        ("policy", POLICY, ODD_VALUES, lambda p: [("audit", "reward", "--run", "nope", "--policy", p)]),
        ("trainer_state", _trainer_state(), JSON_VALUES, lambda p: [("diagnose", run, "--json")]),
    ]
    paths = {"protocol": tmp_path / "p.yaml", "manifest": bad, "policy": tmp_path / "gates" / "g.yaml",
             "trainer_state": run / "trainer_state.json"}
    paths["policy"].parent.mkdir()
    (tmp_path / "protocols").mkdir()
    (tmp_path / "protocols" / "addition.yaml").write_text(PROTOCOL)
    count = 0
    for kind, base, values, commands in kinds:
        for _ in range(CASES_PER_KIND):
            text = _mutate(base, rng, values)
            _write(paths[kind], text)
            for args in commands(paths[kind]):
                assert_not_internal(cli(*args), f"{kind}: {text[:300]!r}")
            count += 1
        if kind == "manifest":
            bad.write_text(manifest)
    assert count == 4 * CASES_PER_KIND
    assert yaml.safe_load(good.read_text())["name"] == "good"


def test_a_file_read_again_is_parsed_once_and_each_caller_gets_its_own_copy(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from evalgate.core import userfiles

    userfiles._parse.cache_clear()
    parsed: list[str] = []
    real_check = userfiles._check_depth
    monkeypatch.setattr(userfiles, "_check_depth", lambda text: (parsed.append(text), real_check(text))[1])
    text = "name: once\nrules: {min_seeds: 2}\nlist: [1, 2]\n"
    first = userfiles.load_yaml_mapping(tmp_path / "a.yaml", text, "gate policy")
    first["rules"]["min_seeds"] = 9
    first["list"].append(3)
    second = userfiles.load_yaml_mapping(tmp_path / "b.yaml", text, "gate policy")
    assert second == {"name": "once", "rules": {"min_seeds": 2}, "list": [1, 2]}  # the first caller's edits: not seen
    assert parsed == [text]  # the second read came from the cache
    bad = "name: [unclosed\n"
    for name in ("c.yaml", "d.yaml"):  # an error is raised again, naming each caller's own file
        with pytest.raises(BadInput, match=rf"{name}:\d+: gate policy is not valid YAML"):
            userfiles.load_yaml_mapping(tmp_path / name, bad, "gate policy")
