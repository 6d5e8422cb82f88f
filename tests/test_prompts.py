"""Prompt rendering and tokenization with the real SmolLM2 tokenizer (no model weights loaded): system role
handling, few-shot exemplars, and one BOS token, never two."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from evalgate.core.errors import BadInput
from evalgate.protocol.prompts import PromptEncoder, render_prompt
from evalgate.protocol.spec import load_protocol

# SmolLM2's special tokens: <|im_start|> (id 1) is both its BOS token and its turn marker; <|im_end|> (id 2)
# is EOS and PAD.
BOS, EOS = 1, 2
# A chat template in SmolLM2's format that refuses a system message, as Gemma's and Mistral's templates do.
NO_SYSTEM = (
    "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# One that silently leaves system messages out.
DROPS_SYSTEM = (
    "{% for m in messages %}{% if m['role'] != 'system' %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# Writes the BOS token once, then turn markers that are not BOS (like Llama 3's template).
WRITES_BOS = (
    "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}[assistant] {% endif %}"
)


def load_tokenizer(path: str):  # noqa: ANN201 - a transformers tokenizer
    """``AutoTokenizer.from_pretrained(path)``, imported here: the module's fast tests need no transformers."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def tokenizer_copy(tiny_checkpoint: Path, dest: Path, single: list | None = None) -> Path:
    """The SmolLM2 tokenizer files in ``dest``; ``single``: a TemplateProcessing 'single' template, to make
    the tokenizer add special tokens by default (as Llama/Gemma tokenizers add BOS)."""
    dest.mkdir()
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(tiny_checkpoint / f, dest / f)
    if single is not None:
        set_post_processor(dest / "tokenizer.json", single)
    return dest


def set_post_processor(tokenizer_json: Path, single: list) -> None:
    """Make a SmolLM2 tokenizer.json add special tokens by default, per a TemplateProcessing template."""
    tj = json.loads(tokenizer_json.read_text())
    tj["post_processor"] = {
        "type": "TemplateProcessing", "single": single,
        "pair": [*single, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]}
                           for t, i in (("<|im_start|>", BOS), ("<|im_end|>", EOS))}}
    tokenizer_json.write_text(json.dumps(tj))


ADD_BOS = [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]
ADD_BOS_EOS = [*ADD_BOS, {"SpecialToken": {"id": "<|im_end|>", "type_id": 0}}]


@pytest.fixture(scope="module")
def tok(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory):
    return load_tokenizer(str(tokenizer_copy(tiny_checkpoint, tmp_path_factory.mktemp("t") / "t")))


def protocol(tmp_path: Path, chat_template: str = "model", files: dict[str, str] | None = None, **prompt):
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(text)
    doc = {"name": "t", "version": "1", "scorer": {"name": "exact"},
           "prompt": {"template": "Q: {{ question }}", "chat_template": chat_template, **prompt}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(doc))
    return load_protocol(tmp_path / "p.yaml")


ITEM = {"id": "i1", "question": "2+2?"}


def test_system_role_rejected_by_template_is_merged_into_first_user_turn(tmp_path: Path, tok) -> None:
    p = protocol(tmp_path, "nosys.jinja", {"nosys.jinja": NO_SYSTEM}, system_prompt="Be terse.")
    r = render_prompt(p, ITEM, tok)
    assert r.text == "<|im_start|>user\nBe terse.\n\nQ: 2+2?<|im_end|>\n<|im_start|>assistant\n"
    assert r.system_merged


def test_system_role_rejected_by_template_fails_loudly_when_protocol_says_fail(tmp_path: Path, tok) -> None:
    p = protocol(tmp_path, "nosys.jinja", {"nosys.jinja": NO_SYSTEM}, system_prompt="Be terse.",
                 system_role="fail")
    with pytest.raises(BadInput) as e:
        render_prompt(p, ITEM, tok)
    assert "the chat template rejects a system role (System role not supported)" in e.value.message
    assert "system_role: fail" in e.value.message


def test_system_prompt_silently_dropped_by_template_is_caught(tmp_path: Path, tok) -> None:
    p = protocol(tmp_path, "drop.jinja", {"drop.jinja": DROPS_SYSTEM}, system_prompt="Be terse.")
    assert render_prompt(p, ITEM, tok).text.startswith("<|im_start|>user\nBe terse.\n\nQ: 2+2?<|im_end|>")
    p = protocol(tmp_path, "drop.jinja", {"drop.jinja": DROPS_SYSTEM}, system_prompt="Be terse.",
                 system_role="fail")
    with pytest.raises(BadInput, match="the chat template drops the system prompt"):
        render_prompt(p, ITEM, tok)


def test_model_template_that_accepts_system_role_keeps_it(tmp_path: Path, tok) -> None:
    r = render_prompt(protocol(tmp_path, system_prompt="Be terse."), ITEM, tok)
    assert r.text == ("<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nQ: 2+2?<|im_end|>\n"
                      "<|im_start|>assistant\n")
    assert not r.system_merged


def test_fewshot_exemplars_precede_the_item_in_file_order(tmp_path: Path, tok) -> None:
    shots = '{"question": "1+1?", "target": "2"}\n{"question": "1+2?", "target": "3"}\n'
    p = protocol(tmp_path, "none", {"shots.jsonl": shots}, fewshot_file="shots.jsonl", system_prompt="Math.")
    assert render_prompt(p, ITEM, None).text == "Math.\n\nQ: 1+1?\n\n2\n\nQ: 1+2?\n\n3\n\nQ: 2+2?"
    p = protocol(tmp_path, "model", {"shots.jsonl": shots}, fewshot_file="shots.jsonl")
    assert render_prompt(p, ITEM, tok).text.endswith(
        "<|im_start|>user\nQ: 1+1?<|im_end|>\n<|im_start|>assistant\n2<|im_end|>\n"
        "<|im_start|>user\nQ: 1+2?<|im_end|>\n<|im_start|>assistant\n3<|im_end|>\n"
        "<|im_start|>user\nQ: 2+2?<|im_end|>\n<|im_start|>assistant\n")


def test_fewshot_file_content_is_hashed_and_its_path_is_not(tmp_path: Path) -> None:
    shots = '{"question": "1+1?", "target": "2"}\n'
    h = protocol(tmp_path, "none", {"shots.jsonl": shots}, fewshot_file="shots.jsonl").sha256
    assert protocol(tmp_path, "none", {"other.jsonl": shots}, fewshot_file="other.jsonl").sha256 == h
    changed = protocol(tmp_path, "none", {"shots.jsonl": shots.replace('"2"', '"two"')},
                       fewshot_file="shots.jsonl")
    assert changed.sha256 != h


def test_fewshot_record_without_target_is_rejected_at_load_with_line(tmp_path: Path) -> None:
    shots = '{"question": "1+1?", "target": "2"}\n\n{"question": "1+2?", "answer": "3"}\n'
    with pytest.raises(BadInput) as e:
        protocol(tmp_path, "none", {"shots.jsonl": shots}, fewshot_file="shots.jsonl")
    assert f"{tmp_path / 'shots.jsonl'}:3: a few-shot exemplar must be a JSON object with the answer in " \
           "'target'" in e.value.message


def test_template_that_writes_bos_gives_one_bos_with_a_tokenizer_that_adds_one(tiny_checkpoint: Path,
                                                                              tmp_path: Path) -> None:
    tok = load_tokenizer(str(tokenizer_copy(tiny_checkpoint, tmp_path / "tok", ADD_BOS)))
    p = protocol(tmp_path, "bos.jinja", {"bos.jinja": WRITES_BOS})
    text = render_prompt(p, ITEM, tok).text
    assert text == "<|im_start|>[user] Q: 2+2?\n[assistant] "
    assert tok(text)["input_ids"][:2] == [BOS, BOS]  # the hazard: default encoding doubles the BOS
    t = PromptEncoder(tok).encode(text)
    assert t.ids.count(BOS) == 1 and t.ids[0] == BOS and t.bos_count == 1 and not t.bos_added


def test_raw_prompt_gets_one_bos_when_the_tokenizer_adds_one(tiny_checkpoint: Path, tmp_path: Path) -> None:
    tok = load_tokenizer(str(tokenizer_copy(tiny_checkpoint, tmp_path / "tok", ADD_BOS)))
    text = render_prompt(protocol(tmp_path, "none"), ITEM, None).text
    t = PromptEncoder(tok).encode(text)
    assert t.ids[0] == BOS and t.ids.count(BOS) == 1 and t.bos_added
    assert list(t.ids[1:]) == tok(text, add_special_tokens=False)["input_ids"]


def test_smollm2_chat_prompt_starts_with_one_bos_and_nothing_is_added(tmp_path: Path, tok) -> None:
    enc = PromptEncoder(tok)
    assert not enc.adds_bos and not enc.adds_eos
    t = enc.encode(render_prompt(protocol(tmp_path), ITEM, tok).text)
    # SmolLM2's template writes <|im_start|> for its default system turn, the user turn and the assistant
    # turn.
    assert t.ids[0] == BOS and t.ids[1] != BOS and t.bos_count == 3 and not t.bos_added
    assert enc.special_tokens() == {
        "bos_token": "<|im_start|>", "bos_token_id": BOS, "eos_token": "<|im_end|>", "eos_token_id": EOS,
        "pad_token": "<|im_end|>", "pad_token_id": EOS, "tokenizer_adds_bos": False,
        "tokenizer_adds_eos": False, "add_special_tokens": False, "eos_appended": False}


def test_eos_is_never_appended_to_a_prompt(tiny_checkpoint: Path, tmp_path: Path) -> None:
    tok = load_tokenizer(str(tokenizer_copy(tiny_checkpoint, tmp_path / "tok", ADD_BOS_EOS)))
    assert tok("Q")["input_ids"][-1] == EOS
    enc = PromptEncoder(tok)
    assert enc.adds_bos and enc.adds_eos
    assert enc.encode("Q: 2+2?").ids[-1] != EOS


def test_template_writing_bos_twice_is_refused(tiny_checkpoint: Path, tmp_path: Path, tok) -> None:
    p = protocol(tmp_path, "bos2.jinja", {"bos2.jinja": "{{ bos_token }}" + WRITES_BOS})
    text = render_prompt(p, ITEM, tok).text
    with pytest.raises(BadInput, match="item 'i1' starts with 2 BOS tokens"):
        PromptEncoder(tok).encode(text, "i1")


# instructlab/training#232: SmolLM2's own template with its generation prompt ({% if add_generation_prompt %}...)
# removed, so the assistant header is never written.
def _ignores_generation_prompt(tok) -> str:
    src = tok.chat_template
    assert "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}" in src
    return src.replace("{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}", "")


# Llama 2's shape: no add_generation_prompt at all, but the user turn ends with the assistant's cue [/INST].
LLAMA2_STYLE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]"
    "{% else %} {{ m['content'] }} {{ eos_token }}{% endif %}{% endfor %}"
)


def test_template_that_ignores_add_generation_prompt_is_refused(tmp_path: Path, tok) -> None:
    from evalgate.protocol.prompts import check_generation_prompt

    p = protocol(tmp_path, "nogen.jinja", {"nogen.jinja": _ignores_generation_prompt(tok)})
    # what the model would be sent: the user turn closed, no assistant header
    assert render_prompt(p, ITEM, tok).text.endswith("Q: 2+2?<|im_end|>\n")
    with pytest.raises(BadInput, match="ignores add_generation_prompt"):
        check_generation_prompt(tok, p, ITEM)


def test_templates_that_end_the_prompt_at_the_assistant_turn_are_accepted(tmp_path: Path, tok) -> None:
    from evalgate.protocol.prompts import check_generation_prompt

    check_generation_prompt(tok, protocol(tmp_path), ITEM)  # SmolLM2's own template honours the flag
    p = protocol(tmp_path, "llama2.jinja", {"llama2.jinja": LLAMA2_STYLE})
    assert render_prompt(p, ITEM, tok).text.endswith("[INST] Q: 2+2? [/INST]")
    check_generation_prompt(tok, p, ITEM)


# Issue 42, item 9: a generation prompt that closes the assistant turn it opens; the model would start a new turn.
SMOL_GEN = "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
LLAMA3 = (
    "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' "
    "+ m['content'] + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}GEN{% endif %}")
GEMMA = (
    "{{ bos_token }}{% for m in messages %}{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else "
    "m['role']) + '\n' + m['content'] + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<start_of_turn>model\n' }}GEN{% endif %}")


@pytest.mark.parametrize(("name", "source", "mark"), [
    ("chatml", None, "<|im_end|>"),  # the report: SmolLM2's template, generation prompt '...assistant\n<|im_end|>\n'
    ("llama3", LLAMA3.replace("GEN", "{{ '<|eot_id|>' }}"), "<|eot_id|>"),
    ("gemma", GEMMA.replace("GEN", "{{ '<end_of_turn>\n' }}"), "<end_of_turn>"),
    ("eos", LLAMA3.replace("GEN", "{{ eos_token }}"), "<|im_end|>"),  # the tokenizer's EOS (SmolLM2: <|im_end|>)
    ("own-close", "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}[END]{% endfor %}"
     "{% if add_generation_prompt %}[assistant][END]{% endif %}", "[END]"),  # a marker only its turns show
])
def test_a_generation_prompt_that_closes_the_assistant_turn_is_refused(tmp_path: Path, tok, name: str,
                                                                       source: str | None, mark: str) -> None:
    from evalgate.protocol.prompts import check_generation_prompt

    if source is None:
        assert SMOL_GEN in tok.chat_template
        source = tok.chat_template.replace(SMOL_GEN, SMOL_GEN.replace("assistant\n", "assistant\n<|im_end|>\n"))
    p = protocol(tmp_path, f"{name}.jinja", {f"{name}.jinja": source})
    assert render_prompt(p, ITEM, tok).text.rstrip().endswith(mark)
    with pytest.raises(BadInput, match="closes the assistant turn") as e:
        check_generation_prompt(tok, p, ITEM)
    assert repr(mark) in e.value.message


def test_generation_prompts_that_open_the_assistant_turn_are_accepted(tmp_path: Path, tok) -> None:
    from evalgate.protocol.prompts import check_generation_prompt

    for name, source in (("llama3", LLAMA3.replace("GEN", "")), ("gemma", GEMMA.replace("GEN", "")),
                         ("r1", tok.chat_template.replace(SMOL_GEN, SMOL_GEN.replace("\n'", "\n<think>\n'")))):
        p = protocol(tmp_path, f"{name}.jinja", {f"{name}.jinja": source})
        check_generation_prompt(tok, p, ITEM)


@pytest.mark.parametrize(("kind", "message"), [("ignores", "ignores add_generation_prompt"),
                                               ("closes", "closes the assistant turn")])
def test_run_with_a_template_that_ignores_add_generation_prompt_is_refused_before_the_read(
        tmp_path: Path, tok, tiny_checkpoint: Path, kind: str, message: str) -> None:
    """The CLI exits 2 naming the cause, and nothing is logged as read, spent or created (issue 42, item 9: the
    closed-turn template ran to pass@1 1.0 with no warning)."""
    from click.testing import CliRunner

    from evalgate.cli import main
    from evalgate.protocol.freeze import freeze
    from evalgate.splits import write_split
    from evalgate.store import Store

    source = _ignores_generation_prompt(tok) if kind == "ignores" else \
        tok.chat_template.replace(SMOL_GEN, SMOL_GEN.replace("assistant\n", "assistant\n<|im_end|>\n"))
    p = protocol(tmp_path, "nogen.jinja", {"nogen.jinja": source})
    freeze(p.path, Store)
    write_split("gen-split", "dev", [{**ITEM, "answer": "4"}], {"source": "test"})
    r = CliRunner().invoke(main, ["run", "--protocol", str(p.path), "--checkpoint", str(tiny_checkpoint),
                                  "--split", "gen-split", "--json"])
    assert r.exit_code == 2, r.output
    assert message in r.output
    store = Store()
    assert [row for row in store.access_rows("gen-split") if row.outcome != "added"] == []
    assert store.runs() == []


@pytest.mark.parametrize("template", [
    "{{ cycler.__init__.__globals__.os.environ['EVALGATE_TEST_SECRET'] }} {{ question }}",
    "{{ question.__class__.__mro__[1].__subclasses__() | length }}",
    "{{ lipsum['__glob' ~ 'als__'].os.environ['EVALGATE_TEST_SECRET'] }}",  # a computed name: refused when rendered
])
def test_a_prompt_template_cannot_reach_python_internals(tmp_path: Path, template: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Adversary, third pass: the protocol's prompt template ran in a plain jinja2 Environment, so a template could
    reach any Python object from a jinja global: the first form rendered the process environment (where CI keeps
    EVALGATE_PRIVATE_KEY) into every prompt, sent to the model server and stored; the second lists every class
    (the way to run code). Templates now run in jinja2's immutable sandbox (transformers renders chat templates
    the same way), and a template that names an attribute starting with '_' is refused when the protocol loads."""
    monkeypatch.setenv("EVALGATE_TEST_SECRET", "hunter2")
    if "~" in template:
        p = protocol(tmp_path, chat_template="none", template=template)
        with pytest.raises(BadInput, match="unsafe"):
            render_prompt(p, ITEM, None)
        return
    with pytest.raises(BadInput, match="prompt.template: .*'_"):
        protocol(tmp_path, chat_template="none", template=template)
    from evalgate.protocol.prompts import render_template_text

    with pytest.raises(BadInput, match="unsafe"):
        render_template_text(template, ITEM)


def test_ordinary_template_features_still_render_in_the_sandbox(tmp_path: Path) -> None:
    """Loops, filters, conditionals and string methods that read (split, join, upper) are unchanged."""
    p = protocol(tmp_path, chat_template="none",
                 template="{% for w in question.split() %}[{{ w | upper }}]{% endfor %}{% if id %} {{ id }}{% endif %}")
    assert render_prompt(p, ITEM, None).text == "[2+2?] i1"


@pytest.mark.parametrize("template", ["{{ question | attr(question) }}", "{{ {}[question] }}",
                                      "{{ question.format() }}", "{{ question.encode('ascii') }}"])
def test_a_template_error_never_quotes_the_items_text(tmp_path: Path, template: str) -> None:
    """Adversary, third pass: a template's error message quoted what the template computed from the item (jinja's
    "'str object' has no attribute '<the question>'", Python's KeyError of a '{...}' in the text), and that message
    is printed by the CLI, kept as the run's error and written into a failed gate's reports: one private item's
    text per gate run, out through CI logs. A quoted part the template does not itself write is withheld."""
    secret = "SECRET {token} café"
    p = protocol(tmp_path, chat_template="none", template=template)
    with pytest.raises(BadInput) as e:
        render_prompt(p, {"id": "i1", "question": secret}, None)
    assert "SECRET" not in e.value.message and "token" not in e.value.message and "é" not in e.value.message
    assert "i1" in e.value.message


def test_a_missing_field_is_still_named(tmp_path: Path) -> None:
    p = protocol(tmp_path, chat_template="none", template="{{ question }} {{ choices }}")
    with pytest.raises(BadInput, match="'choices' is undefined in item 'i1'"):
        render_prompt(p, ITEM, None)


RAISES_CONTENT = "{{ raise_exception('no: ' ~ messages[-1]['content']) }}"


@pytest.mark.parametrize("system_prompt", [None, "Be terse."])
def test_a_chat_template_error_never_quotes_the_items_text(tmp_path: Path, tok, system_prompt: str | None) -> None:
    """The same through a protocol's chat template file: raise_exception(...) with the user turn's content raised
    a TemplateError whose message was the item's text (printed, and a failed gate's reports), and with a system
    prompt under system_role: fail it went into the BadInput's reason. A message the template does not write
    literally is withheld; one it writes (System role not supported, above) is kept."""
    extra = {"system_prompt": system_prompt, "system_role": "fail"} if system_prompt else {}
    p = protocol(tmp_path, "raises.jinja", {"raises.jinja": RAISES_CONTENT}, **extra)
    with pytest.raises(Exception) as e:
        render_prompt(p, {"id": "i1", "question": "SECRET question"}, tok)
    assert "SECRET" not in str(e.value)
