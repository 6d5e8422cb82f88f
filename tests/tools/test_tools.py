"""The tool registry, call parsing in each format, and the protocol's ``tools`` section refused at load."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from evalgate.core.errors import BadInput
from evalgate.protocol.spec import load_protocol
from evalgate.runner.agent.calls import ToolCall, parse_hermes, parse_llama3, parse_openai, parse_text
from evalgate.tools import Tool, ToolContext, ToolOutput, get_tool, known_tools
from tests.plugin_fixtures import _forget_plugins, install_dist  # noqa: F401 - the fixture is autouse

BASE = {"name": "t", "version": "1", "prompt": {"template": "{{ q }}", "chat_template": "none"},
        "scorer": {"name": "exact"}}


def _write(tmp_path: Path, tools: dict) -> Path:
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump({**BASE, "tools": tools}, sort_keys=False))
    return p


# -- parsing ---------------------------------------------------------------------------------------------------
def test_text_format_fenced_python_blocks_are_python_calls() -> None:
    text = "Let me compute.\n```python\nprint(6*7)\n```\nand\n```py\nprint(1)\n```\n"
    assert parse_text(text).calls == (ToolCall("python", {"code": "print(6*7)\n"}),
                                       ToolCall("python", {"code": "print(1)\n"}))
    assert parse_text("The answer is 42").final
    assert parse_text("```python\nprint(1)\n").error is not None  # opened, never closed


def test_hermes_calls_and_unparsable_ones() -> None:
    # the format of Hermes 2 Pro / Qwen2.5's chat templates
    text = 'ok <tool_call>\n{"name": "calculator", "arguments": {"expression": "1+1"}}\n</tool_call>'
    assert parse_hermes(text).calls == (ToolCall("calculator", {"expression": "1+1"}),)
    assert parse_hermes('<tool_call>{"name": "x", "arguments": "{\\"a\\": 1}"}</tool_call>').calls == (
        ToolCall("x", {"a": 1}),)  # arguments given as a JSON string
    assert "not JSON" in str(parse_hermes("<tool_call>{name: x}</tool_call>").error)
    assert parse_hermes('<tool_call>{"name": "x"}').error is not None
    assert parse_hermes('<tool_call>["x"]</tool_call>').error is not None
    assert parse_hermes("no calls here").final


def test_llama3_json_calls() -> None:
    # Llama 3.1 JSON-based tool calling: the whole reply is {"name", "parameters"}
    assert parse_llama3('{"name": "calculator", "parameters": {"expression": "2*3"}}').calls == (
        ToolCall("calculator", {"expression": "2*3"}),)
    assert parse_llama3('<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {}}').calls == (
        ToolCall("a", {}), ToolCall("b", {}))
    assert parse_llama3('{"name": "a", "parameters": ').error is not None
    assert parse_llama3("The answer is 6").final


# Issue 28, point 4. vllm-project/vllm#45167: a literal </tool_call> inside a JSON string argument ended the call.
@pytest.mark.parametrize(("text", "calls"), [
    ('<tool_call>{"name": "write_file", "arguments": {"path": "a.md", "content": "use </tool_call> to end"}}'
     "</tool_call>", [ToolCall("write_file", {"path": "a.md", "content": "use </tool_call> to end"})]),
    ('<tool_call>{"name": "python", "arguments": {"code": "print(\'<tool_call>\')"}}</tool_call>',
     [ToolCall("python", {"code": "print('<tool_call>')"})]),  # an opening tag inside a string
    ('<tool_call>{"name": "a", "arguments": {"s": "</tool_call>"}}</tool_call>\n'
     '<tool_call>{"name": "b", "arguments": {}}</tool_call>',
     [ToolCall("a", {"s": "</tool_call>"}), ToolCall("b", {})]),
])
def test_hermes_tags_inside_json_strings_belong_to_the_argument(text: str, calls: list[ToolCall]) -> None:
    assert parse_hermes(text).calls == tuple(calls)


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "a", "arguments": {"s": "</tool_call>"}}',  # the real closing tag is missing
    '<tool_call>{"name": "a", "arguments": {}} trailing</tool_call>',  # text after the object inside the tag
    '<tool_call>{"name": "a", "arguments": {</tool_call>',
])
def test_hermes_calls_that_stay_unparsable(text: str) -> None:
    assert parse_hermes(text).error is not None and not parse_hermes(text).calls


# ai-dynamo/dynamo#9536: a llama3 call written with "arguments" (as vLLM's llama3_json parser accepts) got {}.
# vllm-project/vllm#49923: two calls on separate lines were a parse error.
@pytest.mark.parametrize(("text", "calls"), [
    ('{"name": "calculator", "arguments": {"expression": "2*3"}}', [ToolCall("calculator", {"expression": "2*3"})]),
    ('{"name": "a", "arguments": "{\\"x\\": 1}"}', [ToolCall("a", {"x": 1})]),  # arguments as a JSON string
    ('{"name": "a", "parameters": {"x": 1}, "arguments": {"x": 2}}', [ToolCall("a", {"x": 1})]),  # both: parameters
    ('{"name": "a", "parameters": {"x": 1}}\n{"name": "b", "parameters": {"y": 2}}',
     [ToolCall("a", {"x": 1}), ToolCall("b", {"y": 2})]),
    ('{"name": "a", "parameters": {}}\n\n{"name": "b", "arguments": {}}', [ToolCall("a", {}), ToolCall("b", {})]),
    ('{"name": "a", "parameters": {}};\n{"name": "b", "parameters": {}};', [ToolCall("a", {}), ToolCall("b", {})]),
    ('{"name": "a", "parameters": {}} {"name": "b", "parameters": {}}', [ToolCall("a", {}), ToolCall("b", {})]),
    ('{"name": "a", "parameters": {}};;{"name": "b", "parameters": {}}', [ToolCall("a", {}), ToolCall("b", {})]),
    ('{"name": "a", "parameters": {"s": "x; y"}}', [ToolCall("a", {"s": "x; y"})]),  # ";" inside a string
])
def test_llama3_arguments_key_and_calls_on_separate_lines(text: str, calls: list[ToolCall]) -> None:
    assert parse_llama3(text).calls == tuple(calls)


@pytest.mark.parametrize("text", [
    '{"name": "a", "parameters": {}}\nSo the answer is 6',  # prose after a call
    '{"name": "a", "parameters": {}}\n{"name": ',  # a second call cut off
])
def test_llama3_replies_that_stay_unparsable(text: str) -> None:
    assert parse_llama3(text).error is not None and not parse_llama3(text).calls


# The same inputs through vLLM's maintained parsers (vllm.tool_parsers, in the engine's environment .venv-vllm,
# where `make test-vllm` runs this test): ours must agree wherever theirs reads calls.
# vLLM's hermes parser still ends a call at the first </tool_call> (vllm-project/vllm#45167), so that input is
# compared above, not here.
AGREED_HERMES = [
    'ok <tool_call>\n{"name": "calculator", "arguments": {"expression": "1+1"}}\n</tool_call>',
    '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n<tool_call>{"name": "b", "arguments": {"q": 1}}'
    "</tool_call>",
    'no calls here',
]
AGREED_LLAMA3 = [
    '{"name": "calculator", "parameters": {"expression": "2*3"}}',
    '{"name": "calculator", "arguments": {"expression": "2*3"}}',
    '{"name": "a", "parameters": {"x": 1}}\n{"name": "b", "parameters": {"y": 2}}',
    '<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {}}',
    'The answer is 6',
]


def _vllm_parsers():
    try:
        from vllm.tool_parsers.hermes_tool_parser import Hermes2ProToolParser
        from vllm.tool_parsers.llama_tool_parser import Llama3JsonToolParser
    except ImportError as e:
        pytest.skip(f"vLLM's tool parsers do not import here ({e}); this test runs in .venv-vllm "
                    "(`make test-vllm`, after `make setup-vllm`)")

    class Vocab:  # the parsers read only the tokenizer's vocabulary (llama3_json: the <|python_tag|> id)
        def get_vocab(self) -> dict[str, int]:
            return {"<|python_tag|>": 1, "<tool_call>": 2, "</tool_call>": 3}

    return Hermes2ProToolParser(Vocab()), Llama3JsonToolParser(Vocab())


def _theirs(parser, text: str) -> list[ToolCall]:
    info = parser.extract_tool_calls(text, None)
    return [ToolCall(c.function.name, json.loads(c.function.arguments)) for c in info.tool_calls]


def test_hermes_and_llama3_agree_with_vllms_parsers() -> None:
    hermes, llama3 = _vllm_parsers()
    for text in AGREED_HERMES:
        assert list(parse_hermes(text).calls) == _theirs(hermes, text), text
    for text in AGREED_LLAMA3:
        assert list(parse_llama3(text).calls) == _theirs(llama3, text), text


def test_openai_tool_calls() -> None:
    parsed = parse_openai([{"id": "c1", "name": "calculator", "arguments": '{"expression": "1"}'}])
    assert parsed.calls == (ToolCall("calculator", {"expression": "1"}, "c1"),)
    assert parse_openai([{"id": "c1", "name": "calculator", "arguments": "{bad"}]).error is not None
    assert parse_openai(None).final


# -- tools -----------------------------------------------------------------------------------------------------
def test_calculator_evaluates_without_eval_and_reports_errors() -> None:
    calc = get_tool("calculator")
    assert calc.run({"expression": "(3 + 4) * 2 / 7"}, ToolContext()) == ToolOutput(True, "2.0")
    bad = calc.run({"expression": "__import__('os').system('true')"}, ToolContext())
    assert not bad.ok and bad.text.startswith("error: ")


def test_file_tools_stay_inside_the_task_directory(tmp_path: Path) -> None:
    task = tmp_path / "task"
    task.mkdir()
    (task / "a.txt").write_text("hello")
    (tmp_path / "secret.txt").write_text("s")
    (task / "link").symlink_to(tmp_path / "secret.txt")
    read, write = get_tool("read_file"), get_tool("write_file")
    ctx = ToolContext(task_dir=task)
    assert read.check is not None and write.check is not None
    assert read.check({"path": "a.txt"}, ctx) is None
    assert read.run({"path": "a.txt"}, ctx) == ToolOutput(True, "hello")
    for path in ("../secret.txt", "/etc/passwd", "link"):
        assert read.check({"path": path}, ctx) == "fs_scope"
    assert write.check({"path": "b.txt", "content": "x"}, ctx) == "fs_write"
    assert write.check({"path": "b.txt", "content": "x"}, ToolContext(task_dir=task, fs_write=True)) is None
    assert not read.run({"path": "missing.txt"}, ctx).ok  # a tool error, not an exception


def test_http_get_is_refused_without_network() -> None:
    tool = get_tool("http_get")
    assert tool.check is not None
    assert tool.check({"url": "http://127.0.0.1:9/"}, ToolContext()) == "network"
    assert tool.check({"url": "http://127.0.0.1:9/"}, ToolContext(network=True)) is None


def test_python_tool_runs_in_the_sandbox_and_returns_output_or_error() -> None:
    py = get_tool("python")
    ok = py.run({"code": "print(6*7)"}, ToolContext(timeout_s=20))
    assert ok == ToolOutput(True, "42\n")
    err = py.run({"code": "1/0"}, ToolContext(timeout_s=20))
    assert not err.ok and "ZeroDivisionError" in err.text


def test_task_defined_tool_by_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution on sys.path declaring an ``evalgate.tools`` entry point adds a tool."""
    from evalgate.tools import TOOLS

    install_dist(tmp_path, monkeypatch, "mytools", {"mytools": (
        "from evalgate.tools import Tool, ToolOutput\n"
        "ECHO = Tool('echo', 'Echo text.', {'type': 'object', 'properties': {'s': {'type': 'string'}}},\n"
        "            lambda args, ctx: ToolOutput(True, args['s']))\n")}, {"evalgate.tools": {"echo": "mytools:ECHO"}},
        (TOOLS,))
    assert "echo" in known_tools() and "mytools" not in sys.modules  # listing names imports no tool
    tool = get_tool("echo")
    assert isinstance(tool, Tool) and tool.run({"s": "hi"}, ToolContext()) == ToolOutput(True, "hi")
    lp = load_protocol(_write(tmp_path, {"allowed": ["echo"], "max_calls": 1}))
    assert lp.tools[0]["description"] == "Echo text."


# -- the protocol section --------------------------------------------------------------------------------------
def test_allowed_tools_are_offered_with_registry_defaults_and_hashed(tmp_path: Path) -> None:
    lp = load_protocol(_write(tmp_path, {"allowed": ["calculator"], "max_calls": 3}))
    assert lp.tools == ({"name": "calculator", "description": get_tool("calculator").description,
                         "parameters": get_tool("calculator").parameters, "implementation": "calculator"},)
    assert lp.resolved["tools"]["offered"] == list(lp.tools)
    single = load_protocol(_write(tmp_path, {}))
    assert single.tools == () and "offered" not in single.resolved["tools"]  # older locks keep their hash


def test_task_directory_content_is_in_the_hash(tmp_path: Path) -> None:
    (tmp_path / "task").mkdir()
    (tmp_path / "task" / "f.txt").write_text("a")
    p = _write(tmp_path, {"allowed": ["read_file"], "max_calls": 1, "task_dir": "task"})
    before = load_protocol(p).sha256
    (tmp_path / "task" / "f.txt").write_text("b")
    assert load_protocol(p).sha256 != before


@pytest.mark.parametrize(("tools", "expect"), [
    ({"allowed": ["pyhton"], "max_calls": 1}, ":10: tools.allowed.0: unknown tool 'pyhton'; did you mean 'python'?"),
    ({"offered": [{"name": "calc", "implementation": "abacus"}]}, ":11: tools.offered.0: unknown tool 'abacus'"),
    ({"offered": [{"name": "calc", "implementation": "calculator", "parameters": {"type": "objekt"}}]},
     ":13: tools.offered.0.parameters: not a valid JSON Schema"),
    ({"offered": [{"name": "calculator"}], "allowed": ["python"]},
     ":11: tools.allowed: tools.allowed names ['python'], which tools.offered does not offer"),
    ({"offered": [{"name": "calculator"}, {"name": "calculator"}]}, "tools.offered: tools.offered names a tool twice"),
    ({"fs_write": True}, "tools.fs_write: tools.fs_write grants writing but tools.task_dir is not set"),
    ({"allowed": ["read_file"]}, "tools.allowed.0: tool 'read_file' reads or writes files but tools.task_dir"),
    ({"task_dir": "nowhere"}, ":9: tools.task_dir: 'nowhere' is not a directory"),
    ({"violation": "ignore"}, ":9: tools.violation: Input should be 'refuse' or 'end'"),
])
def test_bad_tools_sections_are_refused_at_load_with_file_and_line(tmp_path: Path, tools: dict, expect: str) -> None:
    """Each refusal names the file and the line of the offending key (BASE dumped by yaml.safe_dump puts
    ``tools:`` on line 8)."""
    p = _write(tmp_path, tools)
    with pytest.raises(BadInput) as e:
        load_protocol(p)
    assert f"{p}{expect}" in str(e.value) if expect.startswith(":") else expect in str(e.value)


def test_a_tool_schema_is_checked_once_per_process_and_a_bad_one_every_time(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import jsonschema

    from evalgate.protocol import spec

    real, checked = jsonschema.Draft202012Validator.check_schema, []

    def counted(schema: dict) -> None:
        checked.append(schema)
        real(schema)

    monkeypatch.setattr(spec, "_SCHEMAS_CHECKED", set())
    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", counted)
    schema = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}
    good = {"offered": [{"name": "calc", "implementation": "calculator", "parameters": schema}]}
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        assert load_protocol(_write(tmp_path / d, good)).tools[0]["parameters"] == schema
    assert checked == [schema]
    bad = {"offered": [{"name": "calc", "implementation": "calculator", "parameters": {"type": "objekt"}}]}
    for _ in range(2):
        with pytest.raises(BadInput, match="tools.offered.0.parameters: not a valid JSON Schema"):
            load_protocol(_write(tmp_path, bad))
    assert len(checked) == 3


def test_committed_protocols_load() -> None:
    from tests.conftest import REPO

    for name, fmt in (("tool-probe", "hermes"), ("gsm8k-python-tool", "text"), ("gsm8k-python-tool-native", "hermes")):
        lp = load_protocol(REPO / "protocols" / f"{name}.yaml")
        assert json.loads((REPO / "protocols" / f"{name}.yaml.lock").read_text())["sha256"] == lp.sha256
        assert lp.spec.tools.format == fmt and lp.tools


def test_slow_or_raising_tool_is_a_result_not_a_hang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from evalgate.runner.agent.permissions import ToolBox
    from evalgate.tools import TOOLS

    release = threading.Event()
    slow = Tool("calculator", "slow", get_tool("calculator").parameters,
                lambda args, ctx: ToolOutput(True, "late") if release.wait(5) else ToolOutput(True, "never"))
    monkeypatch.setitem(TOOLS, "calculator", slow)
    box = ToolBox(load_protocol(_write(tmp_path, {"allowed": ["calculator"], "max_calls": 3, "timeout_s": 0.2})))
    out = box.execute(ToolCall("calculator", {"expression": "1"}), 0)
    release.set()
    assert out.status == "error" and out.result == "error: timed out after 0.2 s"
    boom = Tool("calculator", "boom", get_tool("calculator").parameters,
                lambda args, ctx: (_ for _ in ()).throw(RuntimeError("tool bug")))
    monkeypatch.setitem(TOOLS, "calculator", boom)
    box = ToolBox(load_protocol(_write(tmp_path, {"allowed": ["calculator"], "max_calls": 3})))
    out = box.execute(ToolCall("calculator", {"expression": "1"}), 0)
    assert out.status == "error" and out.result == "error: RuntimeError: tool bug"
