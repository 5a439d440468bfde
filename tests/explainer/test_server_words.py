"""The server's own sentences in the reader's language (issue 28): an error's detail, a busy reason, a status line,
a measurement's progress are written with `said("…")` (inference/wire/said.py), so each socket hears them in its
language (`?lang=` on its URL, else Accept-Language) and the English stays what it was."""
import ast
import pickle

import pytest
from django.utils import formats, translation

from explainer.words import in_language, packed_message, say, scope_language
from inference.wire.said import Said, said
from tests.support import ROOT, connect

# The callables whose argument is a sentence a reader sees: (position, keyword) of that argument.
READER_WORDS = {
    "ProtocolError": (1, "message"), "TooDeep": (1, "message"), "RateLimited": (1, "message"),
    "ParamError": (1, "message"), "ContextWindowError": (1, "message"), "PromptError": (1, "message"),
    "DetailError": (1, "message"), "SessionError": (0, "message"), "NotKept": (0, "message"),
    "RecordingError": (1, "message"), "MeasureBusy": (0, "reason"),
    "error_payload": (1, "message"), "busy_payload": (0, "reason"), "status_payload": (1, "message"),
    "_error": (1, "message"), "report": (2, "label"),
}


def _plain_english(node: ast.AST) -> bool:
    """A literal, an f-string, a `%`/`+` of strings, or str(…): English that lost (or never had) its template."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and any(c.isalpha() for c in node.value)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp):
        return _plain_english(node.left) or _plain_english(node.right)
    if isinstance(node, ast.IfExp):
        return _plain_english(node.body) or _plain_english(node.orelse)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str"


def _unmarked(path) -> list[str]:
    misses = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name not in READER_WORDS:
            continue
        position, keyword = READER_WORDS[name]
        args = [node.args[position]] if len(node.args) > position else []
        args += [k.value for k in node.keywords if k.arg == keyword]
        misses += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for arg in args if _plain_english(arg)]
    return misses


def test_every_sentence_a_reader_sees_from_the_server_is_marked():
    """A plain string or an f-string where a reader's sentence goes would reach a French reader in English."""
    sources = [p for pkg in ("explainer", "inference") for p in (ROOT / pkg).rglob("*.py")
               if "migrations" not in p.parts and "training" not in p.parts]
    misses = [miss for path in sources for miss in _unmarked(path)]
    assert not misses, "mark these with said(...): " + ", ".join(misses)


def test_a_sentence_is_its_english_and_keeps_its_template():
    text = said("%(field)s: %(problem)s", field="temperature", problem=said("must be in [0, 2], got %(got)s", got=5.0))
    assert text == "temperature: must be in [0, 2], got 5.0" and isinstance(text, str)
    assert pickle.loads(pickle.dumps(text)).values["problem"].template == "must be in [0, 2], got %(got)s"
    assert say(text, "en") == "temperature: must be in [0, 2], got 5.0"


def test_a_sentence_crosses_a_channel_layer_and_is_said_in_each_language():
    text = said("You left the queue. Press Play to join it again.")
    crossed = packed_message({"type": "status", "state": "idle", "message": text})
    assert not isinstance(crossed["message"], Said) and crossed["message"]["said"] == text.template  # plain data
    french = in_language(crossed, "fr")["message"]
    assert french != text and "Lancer" in french
    assert in_language(crossed, "en")["message"] == text


def test_numbers_in_a_sentence_are_written_the_languages_way():
    problem = said("must be in [%(low)s, %(high)s], got %(got)s", low=0, high=2, got=5.5)
    assert "5,5" in say(problem, "fr") and "5.5" in say(problem, "en")


def test_the_models_text_is_never_translated():
    """Only `said` sentences are: a step payload, or any plain string, goes out as it came."""
    step = {"type": "step", "token": {"text": "You left the queue. Press Play to join it again."}}
    assert in_language(step, "fr") is step
    status = {"type": "status", "state": "finished", "message": "You left the queue. Press Play to join it again."}
    assert in_language(status, "fr") == status


@pytest.mark.parametrize("query,header,expected", [
    (b"lang=fr", b"en-US,en;q=0.9", "fr"),
    (b"", b"es-ES,es;q=0.9", "es"),
    (b"lang=zh", b"", "zh-hans"),
    (b"lang=xx", b"de-DE", "en"),
])
def test_a_sockets_language_is_its_urls_then_its_browsers(query, header, expected):
    scope = {"query_string": query, "headers": [(b"accept-language", header)]}
    assert scope_language(scope) == expected


@pytest.mark.usefixtures("stories_model")
@pytest.mark.parametrize("lang", ["fr", "es", "zh-hans"])
async def test_a_refused_setting_is_explained_in_the_sockets_language(lang):
    """What a visitor meets: temperature 5 on a French page is refused in French, its numbers written the French way."""
    english = await _refusal_detail("")
    translated = await _refusal_detail(f"?lang={lang}")
    assert english == "temperature: must be in [0, 2], got 5.5"
    with translation.override(lang):
        problem = translation.gettext("must be in [%(low)s, %(high)s], got %(got)s") % {
            "low": 0, "high": 2, "got": formats.number_format(5.5, use_l10n=True)}
        assert translated == translation.gettext("%(field)s: %(problem)s") % {"field": "temperature", "problem": problem}
    assert translated != english


async def _refusal_detail(query: str) -> str:
    comm = await connect(path="/ws/session/" + query)
    try:
        await comm.send_json_to({"type": "start", "text": "hi", "params": {"temperature": 5.5}})
        while (message := await comm.receive_json_from(timeout=30))["type"] != "error":
            pass
        assert message["code"] == "out_of_range" and message["field"] == "temperature"
        return message["message"]
    finally:
        await comm.disconnect()


def test_the_model_cards_notes_on_missing_stages_are_said_in_the_pages_language():
    """A model with no attention, no cache, no positions (Mamba, RWKV, Bloom): the card's notes follow the page;
    the description the session payload records keeps the English."""
    from explainer.model_words import translated_status
    from inference.discovery import stage_notes

    notes = stage_notes("none", False, [1, 3], 4, lens=False)
    assert notes["attention"] == "only layers [1, 3] of 4 use attention; the others mix tokens with a recurrence or convolution"
    status = {"ok": True, "description": {"absent_stages": notes}}
    with translation.override("fr"):
        french = translated_status(status)["description"]["absent_stages"]
    assert set(french) == set(notes) and all(french[stage] != notes[stage] for stage in notes)
    assert "[1, 3]" in french["attention"] and all(isinstance(n, Said) for n in notes.values())
