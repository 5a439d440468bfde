"""Every error code a reader can receive has a sentence for them (static/js/error-words.js: what happened, what to
do now; issue 25 point 6): the codes raised in the source are the documented ones (docs/protocol.md "Error
codes"), and each documented one is worded."""
import re

from tests.support import ROOT

SOURCES = [*(ROOT / "explainer").rglob("*.py"), *(ROOT / "inference").rglob("*.py")]
RAISED = re.compile(r'(?:ProtocolError|error_payload)\(\s*"([a-z_]+)"')  # the code first
CODE_LAST = re.compile(r'(?:ParamError|PromptError|DetailError|SessionError)\((?:[^()]|\([^()]*\))*?,\s*"([a-z_]+)"\)')
MESSAGE_TYPES = {"start", "stop", "step", "done", "error", "follow", "workshop", "answer", "ask", "reveal"}  # named in the paragraph, not codes
HTTP_ONLY = {"too_deep", "invalid_payload", "unsupported_schema", "too_large", "recordings_full", "not_host"}


def documented() -> set[str]:
    text = (ROOT / "docs" / "protocol.md").read_text()
    paragraph = text[text.index("Error codes: "):text.index("## Limits and flow control")]
    return set(re.findall(r"`([a-z_]+)`", paragraph)) - MESSAGE_TYPES


def worded() -> set[str]:
    return set(re.findall(r"^  ([a-z_]+): \(", (ROOT / "static" / "js" / "error-words.js").read_text(), re.M))


def raised() -> set[str]:
    codes = set()
    for path in SOURCES:
        text = path.read_text()
        codes |= set(RAISED.findall(text)) | set(CODE_LAST.findall(text))
    return codes - HTTP_ONLY


def test_every_code_the_socket_can_send_is_documented():
    missing = raised() - documented()
    assert not missing, f"raised but not in docs/protocol.md's error codes: {sorted(missing)}"


def test_every_documented_code_has_words_for_a_reader():
    missing = documented() - worded()
    assert not missing, f"no sentence in static/js/error-words.js for: {sorted(missing)}"
    assert {"model_error", "worker_lost", "out_of_memory", "no_worker", "workshop_pinned"} <= worded()
