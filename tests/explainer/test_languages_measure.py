"""What a language costs, over the socket (issue 28 point 4): `measure` languages (the served tokenizer and the
config: at once, never cached) and languages_prefill (each line's prefill timed, as an experiment: progress, then a
cached result per set of lines); a visitor's own lines are measured, bad ones refused by name."""
import pytest

from explainer.services.device import measurements
from inference.wire.schema import validate_payload
from tests.support import connect, until

pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py
MINE = [{"lang": "en", "name": "English", "text": "Once upon a time"}, {"lang": "fr", "name": "French", "text": "Il était une fois"}]


@pytest.fixture(autouse=True)
def fresh_cache():
    measurements.forget()
    yield
    measurements.forget()


async def test_the_six_languages_and_a_visitors_own_lines():
    comm = await connect("198.51.100.60")
    await comm.send_json_to({"type": "measure", "what": "languages"})
    reply = (await until(comm, "serving"))[-1]
    validate_payload(reply)
    assert (reply["what"], reply["prompt"], reply["cached"]) == ("languages", "none", False)
    assert [r["lang"] for r in reply["data"]["rows"]] == ["en", "fr", "es", "zh", "ja", "ar"]
    await comm.send_json_to({"type": "measure", "what": "languages", "lines": MINE})
    mine = (await until(comm, "serving"))[-1]["data"]
    assert [r["text"] for r in mine["rows"]] == [m["text"] for m in MINE] and mine["first"] == "English"
    for bad in ([], [{"lang": "en", "name": "x", "text": ""}], [{"lang": "not a tag", "name": "x", "text": "a"}],
                [{"lang": "en", "name": "x", "text": "a" * 401}], "lines", [{"lang": "en", "name": "", "text": "a"}]):
        await comm.send_json_to({"type": "measure", "what": "languages", "lines": bad})
        error = (await until(comm, "error"))[-1]
        assert error["field"] == "lines" and error["code"] in ("out_of_range", "invalid_value"), (bad, error)
    await comm.disconnect()


async def test_each_lines_prefill_is_timed_on_request_and_cached_for_those_lines():
    comm = await connect("198.51.100.61")
    await comm.send_json_to({"type": "measure", "what": "languages_prefill", "lines": MINE})
    seen = await until(comm, lambda m: m["type"] == "serving", timeout=120)
    progress = [m for m in seen if m["type"] == "serving_progress"]
    assert [(m["done"], m["total"]) for m in progress] == [(0, 2), (1, 2)]
    first = seen[-1]
    validate_payload(first)
    assert first["cached"] is False and all(r["prefill_ms"] > 0 for r in first["data"]["rows"])
    await comm.send_json_to({"type": "measure", "what": "languages_prefill", "lines": MINE})
    again = (await until(comm, "serving"))[-1]
    assert again["cached"] is True and again["data"] == first["data"]
    await comm.send_json_to({"type": "measure", "what": "languages_prefill", "lines": MINE[:1]})  # other lines: measured
    other = (await until(comm, lambda m: m["type"] == "serving", timeout=120))[-1]
    assert other["cached"] is False and len(other["data"]["rows"]) == 1
    await comm.disconnect()
