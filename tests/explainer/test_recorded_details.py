"""A saved run carries the details its page asked for (every layer's lens of a step): validated like every payload,
and still "recorded on this server" when the server sent them (issue 23, the lens in recordings)."""
import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from tests.explainer.test_recording_abuse import as_a_browser_sends, finished_run
from tests.explainer.test_recordings import PARAMS, post
from tests.support import until

RECORDED = ("session", "prefill", "step", "done", "check", "detail")  # static/js/save-run.js


@sync_to_async
def save(data: dict) -> tuple[dict, dict]:
    """POST /api/runs (201), then GET the saved run back: (the answer to the post, the run as the API serves it)."""
    created = post(Client(), data)
    assert created.status_code == 201, created.content
    return created.json(), Client().get(f"/api/runs/{created.json()['id']}").json()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("stories_model")
async def test_a_run_with_the_lens_it_was_asked_for_is_recorded_on_this_server():
    comm, start, seen = await finished_run("203.0.113.14")
    await comm.send_json_to({"type": "detail", "what": "lens", "step": 1})
    seen += await until(comm, lambda m: m.get("type") == "detail")
    await comm.disconnect()
    payloads = as_a_browser_sends([m for m in seen if m["type"] in RECORDED])
    detail = payloads[-1]
    assert detail["type"] == "detail" and detail["what"] == "lens" and detail["step"] == 1
    layers = payloads[0]["model"]["layers"]
    assert [row["layer"] for row in detail["lens"]] == list(range(layers))
    data = {"messages": start["messages"], "params": PARAMS, "seed": payloads[0]["params"]["seed"],
            "model_spec": payloads[0]["model"]["spec"], "payloads": payloads}
    created, api = await save(data)
    assert created["recorded_on_this_server"] is True
    assert api["payloads"][-1] == detail  # replayed as posted
    forged = {**data, "payloads": payloads[:-1] + [{**detail, "lens": detail["lens"][:1]}]}
    created, _ = await save(forged)
    assert created["recorded_on_this_server"] is False  # a detail the server never sent
