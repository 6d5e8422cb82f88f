"""Protocol loading, hashing, freezing and drift detection."""

import json
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from evalgate.core.errors import BadInput, ProtocolDrift
from evalgate.protocol.freeze import freeze
from evalgate.protocol.spec import LockedVersion, Protocol, load_protocol, verify
from evalgate.store import Store

BASE = {
    "name": "t",
    "version": "1",
    "prompt": {"template": "Q: {{ question }}\nA:", "chat_template": "none"},
    "sampling": {"temperature": 0.7, "top_p": 0.9, "max_tokens": 32, "n": 2, "seed": 3, "stop": ["\n\n"]},
    "pass_at_k": [1, 2],
    "scorer": {"name": "humaneval"},
}


def write(tmp_path: Path, doc: dict, name: str = "p.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def test_same_content_same_hash_regardless_of_key_order(tmp_path: Path) -> None:
    a = load_protocol(write(tmp_path, BASE, "a.yaml"))
    reordered = dict(reversed(list(BASE.items())))
    b = load_protocol(write(tmp_path, reordered, "b.yaml"))
    assert a.sha256 == b.sha256


# One change per leaf field of the protocol models. prompt.template_file is covered by
# test_template_file_is_inlined_in_the_hash (its content, not its path, is hashed).
MUTATIONS: dict[str, object] = {
    "name": "t2", "version": "2", "description": "changed",
    "prompt.template": "Q: {{ question }}\nAnswer:", "prompt.chat_template": "model",
    "prompt.system_prompt": "Be brief.", "prompt.system_role": "fail", "prompt.fewshot_file": "shots.jsonl",
    "prompt.fewshot_target_field": "answer", "prompt.response_prefix": "A:",
    "sampling.temperature": 0.8, "sampling.top_p": 0.95, "sampling.top_k": 5, "sampling.max_tokens": 33,
    "sampling.stop": ["\n"], "sampling.n": 3, "sampling.seed": 4, "sampling.repetition_penalty": 1.1,
    "sampling.allow_greedy_n": True, "pass_at_k": [1], "scorer.name": "exact", "scorer.options": {"case": False},
    "extraction.rule": "boxed", "extraction.score_truncated": True,
    "tools.allowed": ["python"], "tools.network": True, "tools.timeout_s": 3.0, "tools.max_calls": 2,
    "tools.memory_mb": 512, "tools.offered": [{"name": "calc", "implementation": "calculator"}],
    "tools.format": "openai", "tools.max_turns": 6, "tools.cpu_s": 5, "tools.task_dir": "task",
    "tools.fs_write": True, "tools.violation": "end",
    "execution.timeout_s": 3.0, "execution.cpu_s": 5, "execution.memory_mb": 512, "execution.file_size_mb": 8,
    "execution.workers": 2,
    "execution.isolation": "strict",
    "reasoning.strip": ["thinking", "think"],
}


def leaf_fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    out = set()
    for name, f in model.model_fields.items():
        if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
            out |= leaf_fields(f.annotation, f"{prefix}{name}.")
        else:
            out.add(prefix + name)
    return out


def test_every_field_has_a_hash_sensitivity_case() -> None:
    assert set(MUTATIONS) == leaf_fields(Protocol) - {"prompt.template_file"}


@pytest.mark.parametrize(("path", "value"), list(MUTATIONS.items()))
def test_any_field_change_changes_hash(tmp_path: Path, path: str, value: object) -> None:
    (tmp_path / "shots.jsonl").write_text('{"question": "1+1?", "target": "2"}\n')
    start = json.loads(json.dumps(BASE))
    (tmp_path / "task").mkdir()
    if path == "scorer.options":  # humaneval takes no options; compare two exact protocols
        start["scorer"]["name"] = "exact"
    if path == "tools.fs_write":  # writing needs a task directory
        start["tools"] = {"task_dir": "task"}
    base = load_protocol(write(tmp_path, start, "a.yaml")).sha256
    doc = json.loads(json.dumps(start))
    d = doc
    keys = path.split(".")
    for key in keys[:-1]:
        d = d.setdefault(key, {})
    assert d.get(keys[-1]) != value
    d[keys[-1]] = value
    assert load_protocol(write(tmp_path, doc, "b.yaml")).sha256 != base


def test_reasoning_section_at_its_default_keeps_the_hash_of_protocols_frozen_before_it(tmp_path: Path) -> None:
    """Issue 28: the ``reasoning`` section is left out of the hash at its default, so every committed lock stays
    valid; writing the default out gives the same hash, and turning stripping off changes it."""
    from tests.conftest import REPO

    for f in sorted((REPO / "protocols").glob("*.yaml")):
        verify(load_protocol(f))
    base = load_protocol(write(tmp_path, BASE, "a.yaml")).sha256
    assert "reasoning" not in load_protocol(tmp_path / "a.yaml").resolved
    same = {**BASE, "reasoning": {"strip": ["think"]}}
    assert load_protocol(write(tmp_path, same, "b.yaml")).sha256 == base
    off = {**BASE, "reasoning": {"strip": []}}
    assert load_protocol(write(tmp_path, off, "c.yaml")).sha256 != base


def test_template_file_is_inlined_in_the_hash(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("Q: {{ question }}\nA:")
    doc = {**BASE, "prompt": {"template_file": "t.j2", "chat_template": "none"}}
    from_file = load_protocol(write(tmp_path, doc))
    inline = load_protocol(write(tmp_path, BASE, "inline.yaml"))
    assert from_file.sha256 == inline.sha256  # same text, same hash, wherever it lives
    (tmp_path / "t.j2").write_text("Q: {{ question }}\nA: ")
    assert load_protocol(tmp_path / "p.yaml").sha256 != from_file.sha256


def test_freeze_then_verify_then_drift(tmp_path: Path) -> None:
    p = write(tmp_path, BASE)
    freeze(p, Store)
    verify(load_protocol(p))
    doc = json.loads(json.dumps(BASE))
    doc["sampling"]["temperature"] = 1.0
    write(tmp_path, doc)
    with pytest.raises(ProtocolDrift) as e:
        verify(load_protocol(p))
    assert ("sampling.temperature", 0.7, 1.0) in e.value.diff
    assert "sampling.temperature: locked=0.7 now=1.0" in e.value.message


def test_lock_edited_behind_its_sha_is_refused_and_refreeze_repairs_it(tmp_path: Path) -> None:
    p = write(tmp_path, BASE)
    freeze(p, Store)
    lock_path = tmp_path / "p.yaml.lock"
    original = json.loads(lock_path.read_text())
    # the locked side of every drift diff says temperature 0.2, while the sha still matches the protocol file
    tampered = json.loads(json.dumps(original))
    tampered["resolved"]["sampling"]["temperature"] = 0.2
    lock_path.write_text(json.dumps(tampered))
    with pytest.raises(BadInput) as e:
        verify(load_protocol(p))
    msg = e.value.message
    assert str(lock_path) in msg and "lock file is inconsistent" in msg
    assert f"not to its recorded sha256 {original['sha256'][:12]}" in msg and f"protocol freeze {p}" in msg
    # a lock whose name@version was edited, its content untouched
    lock_path.write_text(json.dumps({**original, "version": "9"}))
    with pytest.raises(BadInput, match="its version '9' is not the version '1' of its 'resolved' content"):
        verify(load_protocol(p))
    freeze(p, Store)  # rewrites the inconsistent lock from the protocol file
    assert json.loads(lock_path.read_text())["version"] == "1"
    verify(load_protocol(p))


def test_unfrozen_protocol_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no lock file"):
        verify(load_protocol(write(tmp_path, BASE)))


def test_refreeze_changed_content_under_used_version_is_refused(tmp_path: Path) -> None:
    p = write(tmp_path, BASE)
    freeze(p, Store)
    doc = json.loads(json.dumps(BASE))
    doc["sampling"]["max_tokens"] = 64
    write(tmp_path, doc)
    with pytest.raises(BadInput, match="Bump 'version'"):
        freeze(p, Store)
    doc["version"] = "2"
    write(tmp_path, doc)
    assert freeze(p, Store).version == "2"


def test_a_fresh_store_cannot_refreeze_a_locked_version_with_other_content(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 17: the committed lock alone refuses changed content under its name@version (a new CI runner has a
    fresh store, whose registry knows nothing)."""
    from click.testing import CliRunner

    from evalgate.cli import main
    from evalgate.store import Store

    p = write(tmp_path, BASE)
    freeze(p, Store)
    lock_before = (tmp_path / "p.yaml.lock").read_bytes()
    doc = json.loads(json.dumps(BASE))
    doc["sampling"]["max_tokens"] = 64
    write(tmp_path, doc)
    monkeypatch.setenv("EVALGATE_HOME", str(tmp_path / "fresh-home"))
    r = CliRunner().invoke(main, ["protocol", "freeze", str(p)])
    assert r.exit_code == 2
    assert "t@1 is already locked in" in r.stderr and "sampling.max_tokens: locked=32 now=64" in r.stderr
    assert (tmp_path / "p.yaml.lock").read_bytes() == lock_before
    assert Store().protocol_hash("t", "1") is None  # refused before the fresh store recorded anything
    doc["version"] = "2"
    write(tmp_path, doc)
    assert freeze(p, Store).version == "2" and Store().protocol_hash("t", "2") is not None


def line_of(path: Path, text: str) -> int:
    return path.read_text().splitlines().index(text) + 1


def test_pass_at_k_above_n_rejected_with_line(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(BASE))
    doc["pass_at_k"] = [1, 5]
    p = write(tmp_path, doc)
    with pytest.raises(BadInput) as e:
        load_protocol(p)
    assert f"{p}:{line_of(p, 'pass_at_k:')}: pass_at_k: pass_at_k [5] exceed sampling.n=2" in e.value.message


def test_greedy_with_n_above_one_needs_explicit_allow(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(BASE))
    doc["sampling"]["temperature"] = 0
    p = write(tmp_path, doc)
    with pytest.raises(BadInput) as e:
        load_protocol(p)
    assert f"{p}:{line_of(p, '  n: 2')}: sampling.n: temperature 0 (greedy) with n=2" in e.value.message
    assert "allow_greedy_n: true" in e.value.message
    doc["sampling"]["allow_greedy_n"] = True
    load_protocol(write(tmp_path, doc))


def test_unknown_key_names_file_line_and_nearest_key(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    text = yaml.safe_dump(BASE, sort_keys=False).replace("  top_p: 0.9", "  top_pp: 0.9")
    p.write_text(text)
    line = text.splitlines().index("  top_pp: 0.9") + 1
    with pytest.raises(BadInput) as e:
        load_protocol(p)
    assert f"{p}:{line}: sampling.top_pp: unknown key 'top_pp'; did you mean 'top_p'?" in e.value.message


def test_unknown_key_in_a_list_entry_names_the_nearest_key(tmp_path: Path) -> None:
    """An entry of tools.offered is a ToolSpec section: a misspelt key gets the nearest of its keys (it was told
    'this section takes no keys'); a version that is not a simple name says what it may hold."""
    p = tmp_path / "p.yaml"
    doc = {**BASE, "version": "1 beta", "tools": {"offered": [{"name": "calc", "implementaton": "calculator"}]}}
    text = yaml.safe_dump(doc, sort_keys=False)
    p.write_text(text)
    lines = text.splitlines()
    with pytest.raises(BadInput) as e:
        load_protocol(p)
    at = lines.index("    implementaton: calculator") + 1
    assert (f"{p}:{at}: tools.offered.0.implementaton: unknown key 'implementaton'; did you mean "
            "'implementation'?") in e.value.message
    assert (f"{p}:{lines.index('version: 1 beta') + 1}: version: '1 beta' is not letters, digits, '.', '_' and "
            "'-', starting with a letter or digit") in e.value.message


def test_malformed_yaml_names_line(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("name: t\nversion: 1\nprompt: [unclosed\n")
    with pytest.raises(BadInput, match=r"p.yaml:\d+: protocol is not valid YAML"):
        load_protocol(p)


def test_protocol_lock_and_template_file_not_utf8_are_bad_input_with_line(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_bytes(yaml.safe_dump(BASE, sort_keys=False).encode() + b"# r\xe9sum\xe9\n")  # Latin-1 comment
    with pytest.raises(BadInput, match=r"p\.yaml:\d+: not UTF-8 text"):
        load_protocol(p)
    (tmp_path / "t.j2").write_bytes(b"Q: {{ question }} \xff")
    doc = {**BASE, "prompt": {"template_file": "t.j2", "chat_template": "none"}}
    with pytest.raises(BadInput, match=r"t\.j2:1: not UTF-8 text"):
        load_protocol(write(tmp_path, doc, "q.yaml"))
    lp = load_protocol(write(tmp_path, BASE, "r.yaml"))
    lp.lock_path.write_bytes(b"\xff{}")
    with pytest.raises(BadInput, match=r"r\.yaml\.lock:1: not UTF-8 text"):
        verify(lp)


def test_a_directory_given_as_protocol_or_policy_is_named_as_such(tmp_path: Path) -> None:
    from evalgate.gate.policy import load_policy

    with pytest.raises(BadInput, match=f"protocol file {tmp_path} is a directory; pass the path of a protocol"):
        load_protocol(tmp_path)
    with pytest.raises(BadInput, match=f"gate policy {tmp_path} is a directory; pass the path of a gate policy"):
        load_policy(tmp_path)
    with pytest.raises(BadInput, match="protocol file nope.yaml not found"):
        load_protocol(Path("nope.yaml"))


def test_template_and_template_file_together_rejected_with_line(tmp_path: Path) -> None:
    (tmp_path / "t.j2").write_text("x")
    doc = {**BASE, "prompt": {"template": "x", "template_file": "t.j2"}}
    p = write(tmp_path, doc)
    with pytest.raises(BadInput) as e:
        load_protocol(p)
    line = line_of(p, "prompt:")
    assert f"{p}:{line}: prompt: give exactly one of template / template_file" in e.value.message


def test_every_field_docstring_gives_its_default_or_says_required() -> None:
    models = [Protocol]
    missing = []
    while models:
        model = models.pop()
        for name, f in model.model_fields.items():
            if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
                models.append(f.annotation)
            text = f.description or ""
            expected = "Required." if f.is_required() else "Default:"
            if expected not in text:
                missing.append(f"{model.__name__}.{name}")
    assert missing == []


def test_unknown_scorer_and_broken_template_refused_at_load(tmp_path: Path) -> None:
    # Found by a fresh-user test: both froze with exit 0 and failed only at run time, after which fixing the typo
    # needed a version bump.
    doc = json.loads(json.dumps(BASE))
    doc["scorer"]["name"] = "humaneva"
    with pytest.raises(BadInput, match=r"scorer.name: unknown scorer 'humaneva'; did you mean 'humaneval'\?"):
        load_protocol(write(tmp_path, doc))
    doc = json.loads(json.dumps(BASE))
    doc["prompt"]["template"] = "Q: {{ question \nA:"
    with pytest.raises(BadInput, match="prompt.template: jinja2 syntax error"):
        load_protocol(write(tmp_path, doc))


def test_the_freeze_hint_can_be_pasted_for_a_path_with_spaces(tmp_path: Path) -> None:
    import shlex

    d = tmp_path / "my protocols"
    d.mkdir()
    p = write(d, BASE)
    with pytest.raises(BadInput) as e:
        verify(load_protocol(p))
    hint = e.value.message.split("run '", 1)[1].split("' before", 1)[0]
    # the shell splits the pasted hint into the command and ONE path argument, the protocol file
    assert shlex.split(hint) == ["evalgate", "protocol", "freeze", str(p)]


def test_the_lock_keeps_every_version_and_refuses_a_used_one_from_the_lock_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 44, item 2: freeze t@1, edit, freeze t@2, set the version back to 1 on the edited content: a fresh store
    (as in CI) froze t@1 with the new hash (exit 0), because the lock held only its newest version. The lock now
    keeps every version it froze and refuses it (exit 2, as docs/FREEZING.md says), leaving the lock as it was."""
    from click.testing import CliRunner

    from evalgate.cli import main
    from evalgate.store import Store

    p = write(tmp_path, BASE)
    v1 = freeze(p, Store)
    doc = json.loads(json.dumps(BASE))
    doc["sampling"]["max_tokens"] = 64
    doc["version"] = "2"
    write(tmp_path, doc)
    v2 = freeze(p, Store)
    lock = json.loads((tmp_path / "p.yaml.lock").read_text())
    assert [(e["version"], e["sha256"]) for e in lock["versions"]] == [("1", v1.sha256), ("2", v2.sha256)]
    assert lock["versions"][0]["frozen_at"] == v1.frozen_at
    assert v2.as_dict() == lock  # what freeze returns is the lock file's document, typed
    lock_before = (tmp_path / "p.yaml.lock").read_bytes()
    doc["version"] = "1"
    write(tmp_path, doc)
    monkeypatch.setenv("EVALGATE_HOME", str(tmp_path / "fresh-home"))
    r = CliRunner().invoke(main, ["protocol", "freeze", str(p)])
    assert r.exit_code == 2, r.output
    assert f"t@1 was frozen before in {tmp_path / 'p.yaml.lock'} with hash {v1.sha256[:12]}" in r.stderr
    assert "e.g. '3'" in r.stderr
    assert (tmp_path / "p.yaml.lock").read_bytes() == lock_before
    assert Store().protocol_hash("t", "1") is None
    doc["version"] = "3"
    write(tmp_path, doc)
    assert [e.version for e in freeze(p, Store).versions or []] == ["1", "2", "3"]
    write(tmp_path, BASE)  # the first content again under its own version: allowed, nothing forgotten
    back = freeze(p, Store)
    assert (back.version, back.sha256, back.frozen_at) == ("1", v1.sha256, v1.frozen_at)
    assert [e.version for e in back.versions or []] == ["1", "2", "3"]


def test_a_lock_written_before_versions_is_read_and_migrated(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A format-1 lock (name, version, sha256, frozen_at, resolved; no ``versions``) still verifies, still refuses
    changed content under its version, and gains ``versions`` (its own version first) when a new one is frozen."""
    p = write(tmp_path, BASE)
    lp = load_protocol(p)
    old = {"name": "t", "version": "1", "sha256": lp.sha256, "frozen_at": "2026-01-02T03:04:05+00:00",
           "resolved": lp.resolved}
    (tmp_path / "p.yaml.lock").write_text(json.dumps(old))
    verify(load_protocol(p))
    kept = freeze(p, Store)  # unchanged content: a no-op, the old lock kept as is
    assert kept.as_dict() == old and list(kept.as_dict()) == list(old)
    assert (kept.format, kept.versions, kept.frozen_at) == (None, None, "2026-01-02T03:04:05+00:00")  # format 1
    doc = json.loads(json.dumps(BASE))
    doc["sampling"]["max_tokens"] = 64
    write(tmp_path, doc)
    monkeypatch.setenv("EVALGATE_HOME", str(tmp_path / "fresh-home"))
    with pytest.raises(BadInput, match="t@1 is already locked in"):
        freeze(p, Store)
    doc["version"] = "2"
    write(tmp_path, doc)
    new = freeze(p, Store)
    assert new.format == 2 and new.frozen_at is not None
    assert new.versions == [LockedVersion(name="t", version="1", sha256=lp.sha256,
                                          frozen_at="2026-01-02T03:04:05+00:00"),
                            LockedVersion(name="t", version="2", sha256=new.sha256, frozen_at=new.frozen_at)]
    doc["version"] = "1"
    write(tmp_path, doc)
    with pytest.raises(BadInput, match="t@1 was frozen before"):
        freeze(p, Store)


def test_a_lock_with_a_key_this_version_does_not_know_still_freezes(tmp_path: Path) -> None:
    """A consistent lock holding a key evalgate never wrote (added by hand, or by a later version) freezes as before:
    the file is left as it is and the typed lock leaves the key out."""
    p = write(tmp_path, BASE)
    lp = load_protocol(p)
    old = {"name": "t", "version": "1", "sha256": lp.sha256, "frozen_at": "2026-01-02T03:04:05+00:00",
           "resolved": lp.resolved, "reviewed_by": "carol"}
    (tmp_path / "p.yaml.lock").write_text(json.dumps(old))
    kept = freeze(p, Store)
    assert kept.as_dict() == {k: v for k, v in old.items() if k != "reviewed_by"}
    assert json.loads((tmp_path / "p.yaml.lock").read_text()) == old


def test_a_lock_whose_versions_disagree_is_inconsistent(tmp_path: Path) -> None:
    from evalgate.protocol.spec import lock_problem

    p = write(tmp_path, BASE)
    lock = freeze(p, Store).as_dict()
    assert lock_problem(lock) is None
    other = {**lock["versions"][0], "sha256": "0" * 64}
    assert "two hashes" in str(lock_problem({**lock, "versions": [*lock["versions"], other]}))
    assert "does not hold its current" in str(lock_problem({**lock, "versions": []}))
    assert "not a list" in str(lock_problem({**lock, "versions": [{"name": "t"}]}))
    (tmp_path / "p.yaml.lock").write_text(json.dumps({**lock, "versions": [*lock["versions"], other]}))
    with pytest.raises(BadInput, match="two hashes"):
        verify(load_protocol(p))
