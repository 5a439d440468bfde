"""From chat messages (or raw text, or raw ids) to prompt token ids, with the template and spans."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from .wire.said import said

ROLES = ("system", "user", "assistant")


class PromptError(ValueError):
    """The prompt is malformed; names the field."""

    def __init__(self, field_name: str, message: str, code: str = "invalid_prompt"):
        super().__init__(said("%(field)s: %(problem)s", field=field_name, problem=message))
        self.field, self.message, self.code = field_name, message, code


@dataclass
class Prompt:
    kind: str  # "messages" | "text" | "input_ids"
    ids: list[int]
    text: str  # what the model reads (the rendered template for messages)
    spans: list[dict] = field(default_factory=list)  # [{role, start, end, message?}] character spans in text
    offsets: list[list[int]] = field(default_factory=list)  # per token [start, end) byte offsets in text
    messages: list[dict] = field(default_factory=list)
    tokenize_ms: float = 0.0  # template + tokenizer


def validate_messages(messages) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise PromptError("messages", said("must be a non-empty list of {role, content}"), "wrong_type")
    if len(messages) > 64:
        raise PromptError("messages", said("at most 64 messages"), "out_of_range")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in ROLES:
            raise PromptError(f"messages[{i}]", said("must be {role: one of %(roles)s, content: string}", roles=", ".join(ROLES)),
                              "wrong_type")
        if not is_unicode(m["content"]):
            raise PromptError(f"messages[{i}]", said("content must be valid Unicode (no lone surrogates)"), "invalid_value")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def validate_text(text) -> str:
    """Raw prompt text: a non-empty string the tokenizer can encode."""
    if not isinstance(text, str) or not text:
        raise PromptError("text", said("must be a non-empty string"), "wrong_type")
    if not is_unicode(text):
        raise PromptError("text", said("must be valid Unicode (no lone surrogates)"), "invalid_value")
    return text


def is_unicode(text: str) -> bool:
    """False for strings with lone surrogates (JSON allows "\\ud800"; UTF-8 and the tokenizers do not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


MARK = "HITENTERMARK"  # stands in for a message's content when learning how the template wraps a role
# Short valid conversations after which a turn of each role is not the first (no first-turn additions).
CONTEXTS = {"user": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
            "assistant": [{"role": "user", "content": "a"}],
            "system": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}


def render_messages(tokenizer, messages: list[dict]) -> tuple[str, list[dict]]:
    """The chat template's text and where each character came from: a typed message's turn (its role,
    with ``message``: its index), text the template adds on its own (``template``: a default system
    prompt, a date line), and the generation prompt. Turns come from rendering prefix by prefix; within a
    turn, only the role's own wrapper around the content (learned from a marker message) is the message's."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    spans, start = [], 0
    wrappers = {role: role_wrapper(tokenizer, role) for role in {m["role"] for m in messages}}
    for i, message in enumerate(messages):
        prefix = tokenizer.apply_chat_template(messages[: i + 1], tokenize=False)
        end = len(prefix) if text.startswith(prefix) else start
        spans += turn_spans(text, start, end, message, i, wrappers[message["role"]])
        start = end
    if start < len(text):
        spans.append({"role": "generation_prompt", "start": start, "end": len(text)})
    return text, merged(spans)


def role_wrapper(tokenizer, role: str) -> tuple[str, str] | None:
    """(header, footer) the template puts around a ``role`` message's content; None if it cannot tell."""
    context = CONTEXTS[role]
    try:
        before = tokenizer.apply_chat_template(context, tokenize=False)
        after = tokenizer.apply_chat_template(context + [{"role": role, "content": MARK}], tokenize=False)
    except Exception:  # noqa: BLE001 - a template may refuse the order (e.g. roles must alternate)
        return None
    if not after.startswith(before) or after.count(MARK) != 1:
        return None
    turn = after[len(before):]
    return turn[: turn.index(MARK)], turn[turn.index(MARK) + len(MARK):]


def turn_spans(text: str, start: int, end: int, message: dict, index: int, wrapper) -> list[dict]:
    """One message's turn [start, end): its header, content and footer are the message's; the rest the template's."""
    own = owned_ranges(text[start:end], message["content"], wrapper)
    spans, at = [], start
    for a, b in own:
        if a > 0 and at < start + a:
            spans.append({"role": "template", "start": at, "end": start + a})
        spans.append({"role": message["role"], "start": start + a, "end": start + b, "message": index})
        at = start + b
    if at < end:
        spans.append({"role": "template", "start": at, "end": end})
    return spans or [{"role": message["role"], "start": start, "end": end, "message": index}]


def owned_ranges(turn: str, content: str, wrapper) -> list[tuple[int, int]]:
    """Ranges of ``turn`` written for the message; the whole turn where the wrapper cannot be found."""
    if wrapper is None:
        return [(0, len(turn))]
    header, footer = wrapper
    for body in (content, content.strip()):  # templates may trim the content
        at = turn.rfind(header + body)
        if at >= 0:
            return [(at, tail(turn, at + len(header + body), footer))]
        at = turn.rfind(body) if body else -1
        head = turn.rfind(header, 0, at) if at >= 0 else -1
        if head >= 0:  # something the template wrote sits between the header and the content (a date line)
            return [(head, head + len(header)), (at, tail(turn, at + len(body), footer))]
    return [(0, len(turn))]


def tail(turn: str, at: int, footer: str) -> int:
    return at + len(footer) if footer and turn.startswith(footer, at) else at


def merged(spans: list[dict]) -> list[dict]:
    """Adjacent pieces of one origin become one span; empty ones go."""
    out: list[dict] = []
    for s in spans:
        if s["end"] <= s["start"]:
            continue
        last = out[-1] if out else None
        if last and last["end"] == s["start"] and last["role"] == s["role"] and last.get("message") == s.get("message"):
            last["end"] = s["end"]
        else:
            out.append(dict(s))
    return out


def byte_offsets(text: str, char_offsets: list[tuple[int, int]]) -> list[list[int]]:
    prefix_bytes = [0]
    for ch in text:
        prefix_bytes.append(prefix_bytes[-1] + len(ch.encode("utf-8")))
    return [[prefix_bytes[s], prefix_bytes[e]] for s, e in char_offsets]


def build_prompt(tokenizer, messages=None, text=None, input_ids=None) -> Prompt:
    started = time.perf_counter()
    prompt = _build(tokenizer, messages, text, input_ids)
    prompt.tokenize_ms = round((time.perf_counter() - started) * 1e3, 3)
    return prompt


def _build(tokenizer, messages, text, input_ids) -> Prompt:
    given = [x is not None for x in (messages, text, input_ids)]
    if sum(given) != 1:
        raise PromptError("prompt", said("give exactly one of messages, text or input_ids"))
    if input_ids is not None:
        return _from_ids(tokenizer, input_ids)
    if messages is not None:
        messages = validate_messages(messages)
        rendered, spans = render_messages(tokenizer, messages)
        encoded = tokenizer(rendered, add_special_tokens=False, return_offsets_mapping=True)
    else:
        validate_text(text)
        rendered, spans = text, [{"role": "text", "start": 0, "end": len(text)}]
        encoded = tokenizer(rendered, return_offsets_mapping=True)
    ids = list(encoded["input_ids"])
    return Prompt("messages" if messages else "text", ids, rendered, spans,
                  byte_offsets(rendered, encoded["offset_mapping"]), messages or [])


def _from_ids(tokenizer, input_ids) -> Prompt:
    vocab = len(tokenizer)
    if not isinstance(input_ids, list) or not input_ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in input_ids):
        raise PromptError("input_ids", said("must be a non-empty list of integers"), "wrong_type")
    bad = [i for i in input_ids if not 0 <= i < vocab]
    if bad:
        raise PromptError("input_ids", said("ids must be in [0, %(high)s], got %(got)s", high=vocab - 1, got=bad[0]),
                          "out_of_range")
    pieces = [tokenizer.decode([i]) for i in input_ids]
    offsets, at = [], 0
    for piece in pieces:
        n = len(piece.encode("utf-8"))
        offsets.append([at, at + n])
        at += n
    return Prompt("input_ids", list(input_ids), "".join(pieces), [{"role": "input_ids", "start": 0, "end": at}], offsets)


def typed_tokens(prompt: Prompt) -> int:
    """How many of the prompt's tokens hold text the visitor typed (a message's content, or the raw text); the
    others are the template's: role markers, text it adds on its own, the generation prompt, special tokens."""
    if prompt.kind == "input_ids":
        return len(prompt.ids)
    typed = [_byte_range(prompt.text, a, b) for a, b in content_ranges(prompt)]
    return sum(1 for a, b in prompt.offsets if b > a and any(a < end and start < b for start, end in typed))


def content_ranges(prompt: Prompt) -> list[tuple[int, int]]:
    """Character ranges of the typed contents in the text the model reads (each inside its message's span)."""
    if prompt.kind == "text":
        return [(0, len(prompt.text))]
    found = []
    for span in prompt.spans:
        if "message" not in span:
            continue
        content = prompt.messages[span["message"]]["content"]
        for body in (content, content.strip()):
            at = prompt.text.find(body, span["start"], span["end"]) if body else -1
            if at >= 0:
                found.append((at, at + len(body)))
                break
    return found


def _byte_range(text: str, start: int, end: int) -> tuple[int, int]:
    before = len(text[:start].encode("utf-8", "surrogatepass"))
    return before, before + len(text[start:end].encode("utf-8", "surrogatepass"))
