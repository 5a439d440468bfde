"""Issue 23: each character of the templated prompt has one origin. Text a chat template adds on its own (a
default system prompt, a date line) is role `template`, apart from the typed messages' turns and the
generation prompt. Checked on SmolLM2, the bundled model and four templates set on the bundled tokenizer."""
import copy

import pytest

from inference.prompting import render_messages

ONE = [{"role": "user", "content": "How do rainbows form?"}]

DEFAULT_SYSTEM = ("{% if messages[0]['role'] != 'system' %}<|system|>\nYou are a kind helper.<|end|>{% endif %}"
                  "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>{% endfor %}"
                  "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
PLAIN = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>{% endfor %}"
         "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
HEADER = "'<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n'"
LLAMA3 = ("<|begin_of_text|>{% for m in messages %}{{ " + HEADER + " + m['content'] | trim + '<|eot_id|>' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")
LLAMA31_DATE = (  # Llama-3.1's system block: always there, with its date lines before any system text
    "<|begin_of_text|>{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] | trim %}"
    "{% set messages = messages[1:] %}{% else %}{% set system = '' %}{% endif %}"
    "{{ '<|start_header_id|>system<|end_header_id|>\\n\\n' }}Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
    "{{ system }}{{ '<|eot_id|>' }}"
    "{% for m in messages %}{{ " + HEADER + " + m['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}")


def origins(tokenizer, messages):
    text, spans = render_messages(tokenizer, messages)
    assert [s["start"] for s in spans] == [0] + [s["end"] for s in spans[:-1]] and spans[-1]["end"] == len(text)
    return [(s["role"], text[s["start"]:s["end"]]) for s in spans]


@pytest.fixture(scope="module")
def tokenizer_with(bundled):
    def make(template):
        tok = copy.deepcopy(bundled.tokenizer)
        tok.chat_template = template
        return tok
    return make


def test_smollm2_default_system_prompt_is_the_templates(smollm2):
    text, spans = render_messages(smollm2.tokenizer, ONE)
    assert [(s["role"], s["start"], s["end"]) for s in spans] == [("template", 0, 98), ("user", 98, 147),
                                                                  ("generation_prompt", 147, 169)]
    assert "You are a helpful AI assistant named SmolLM" in text[0:98]
    assert spans[1]["message"] == 0 and text[98:147] == "<|im_start|>user\nHow do rainbows form?<|im_end|>\n"


def test_smollm2_typed_system_message_is_the_visitors(smollm2):
    got = origins(smollm2.tokenizer, [{"role": "system", "content": "Be brief."}] + ONE)
    assert [r for r, _ in got] == ["system", "user", "generation_prompt"]


def test_bundled_template_adds_nothing_of_its_own(bundled):
    assert origins(bundled.tokenizer, ONE) == [("user", "<|user|>\nHow do rainbows form?<|end|>"),
                                                ("generation_prompt", "<|assistant|>\n")]


def test_a_default_system_prompt(tokenizer_with):
    assert origins(tokenizer_with(DEFAULT_SYSTEM), ONE) == [
        ("template", "<|system|>\nYou are a kind helper.<|end|>"),
        ("user", "<|user|>\nHow do rainbows form?<|end|>"), ("generation_prompt", "<|assistant|>\n")]


def test_a_template_that_adds_nothing(tokenizer_with):
    got = origins(tokenizer_with(PLAIN), ONE + [{"role": "assistant", "content": "Light."}, {"role": "user", "content": "Why?"}])
    assert [r for r, _ in got] == ["user", "assistant", "user", "generation_prompt"]


def test_llama3_headers(tokenizer_with):
    tok = tokenizer_with(LLAMA3)
    got = origins(tok, ONE)
    assert got == [("template", "<|begin_of_text|>"),
                   ("user", "<|start_header_id|>user<|end_header_id|>\n\nHow do rainbows form?<|eot_id|>"),
                   ("generation_prompt", "<|start_header_id|>assistant<|end_header_id|>\n\n")]


def test_llama31_date_lines_are_the_templates(tokenizer_with):
    tok = tokenizer_with(LLAMA31_DATE)
    got = origins(tok, ONE)
    assert [r for r, _ in got] == ["template", "user", "generation_prompt"]
    assert "Today Date: 26 Jul 2024" in got[0][1] and got[1][1].endswith("How do rainbows form?<|eot_id|>")
    # A typed system message keeps its header and text; the date lines between them stay the template's.
    got = origins(tok, [{"role": "system", "content": "Be brief."}] + ONE)
    assert [r for r, _ in got] == ["template", "system", "template", "system", "user", "generation_prompt"]
    assert got[2][1].startswith("Cutting Knowledge Date") and got[3][1] == "Be brief.<|eot_id|>"


def test_spans_of_one_message_share_its_index(tokenizer_with):
    _, spans = render_messages(tokenizer_with(LLAMA31_DATE), [{"role": "system", "content": "Be brief."}] + ONE)
    assert {s["message"] for s in spans if s["role"] == "system"} == {0}
    assert {s["message"] for s in spans if s["role"] == "user"} == {1}
