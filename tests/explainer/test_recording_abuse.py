"""Issue 22: saving runs cannot fill the disk (N3, N6), damaged rows are named pages (N6), a recording says
whether this server made it (N8), and the admin's login locks out a guesser (N9)."""
import json

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from explainer.models import RecordedRun
from explainer.services.admission.lockout import MAX_FAILURES
from tests.explainer.test_recordings import PARAMS, body, post, recorded_payloads  # noqa: F401 (a fixture)
from tests.support import connect, until

ATTACK_BYTES = 8_400_000  # the size of each body in the attacker's loop


def padded(payloads, where="params"):
    """The attacker's body: a valid recording with 8.4 MB of padding in `params`."""
    data = body(payloads)
    data[where] = {**PARAMS, "pad": "x" * ATTACK_BYTES}
    return data


def nested(depth: int):
    value = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_text(depth: int, inside: str = "1") -> str:
    """JSON text nested `depth` deep (json.dumps itself cannot write it past its recursion limit)."""
    return '{"a":' * depth + inside + "}" * depth


# ---- N3: a loop of big posts --------------------------------------------------------------------

@pytest.mark.django_db
def test_padded_params_are_refused_by_name(client, recorded_payloads):
    response = post(client, padded(recorded_payloads))
    assert response.status_code == 400, response.content
    assert response.json()["error"] == {"code": "unknown_param", "field": "params.pad",
                                        "message": response.json()["error"]["message"]}
    hot = post(client, body(recorded_payloads, params={**PARAMS, "temperature": 5}))
    assert hot.json()["error"]["field"] == "params.temperature" and "[0, 2]" in hot.json()["error"]["message"]
    many = post(client, body(recorded_payloads, messages=[{"role": "user", "content": "x"}] * 65))
    assert many.json()["error"]["field"] == "messages" and "64" in many.json()["error"]["message"]
    long = post(client, body(recorded_payloads, messages=[{"role": "user", "content": "x" * 10**6}]))
    assert long.json()["error"]["code"] == "out_of_range" and long.json()["error"]["field"] == "messages"
    assert RecordedRun.objects.count() == 0


@pytest.mark.django_db
def test_the_attackers_loop_is_refused_then_rate_limited(settings, recorded_payloads):
    """Before: 20 posts of 8.4 MB in 2.4 s, all 201, the database 18 -> 186 MB. Now: 400s, then 429s."""
    settings.EXPLAINER_RECORDING_SAVE_BURST, settings.EXPLAINER_RECORDING_SAVES_PER_MIN = 3, 1
    raw = json.dumps(padded(recorded_payloads))
    attacker = Client(REMOTE_ADDR="203.0.113.9")
    codes = [post(attacker, raw).status_code for _ in range(20)]
    assert codes == [400] * 3 + [429] * 17
    assert RecordedRun.objects.count() == 0
    limited = post(attacker, body(recorded_payloads))  # even a valid one, until the bucket refills
    assert limited.status_code == 429 and limited.json()["error"]["code"] == "rate_limited"
    assert int(limited["Retry-After"]) > 0
    assert post(Client(REMOTE_ADDR="203.0.113.10"), body(recorded_payloads)).status_code == 201  # others are not


@pytest.mark.django_db
def test_valid_saves_are_rate_limited_per_address(settings, recorded_payloads):
    settings.EXPLAINER_RECORDING_SAVE_BURST = 3
    saver = Client(REMOTE_ADDR="203.0.113.11")
    codes = [post(saver, body(recorded_payloads)).status_code for _ in range(5)]
    assert codes == [201] * 3 + [429] * 2 and RecordedRun.objects.count() == 3


@pytest.mark.django_db
def test_a_full_store_refuses_new_saves_by_name(client, settings, recorded_payloads):
    first = post(client, body(recorded_payloads))
    assert first.status_code == 201
    size = RecordedRun.objects.get(pk=first.json()["id"]).size_bytes
    assert size > 10_000
    settings.EXPLAINER_RECORDINGS_MAX_BYTES = int(size * 1.5)
    refused = post(client, body(recorded_payloads))
    assert refused.status_code == 507 and refused.json()["error"]["code"] == "recordings_full"
    assert "full" in refused.json()["error"]["message"] and RecordedRun.objects.count() == 1
    assert Client().get(f"/runs/{first.json()['id']}").status_code == 200  # what was stored stays


# ---- N6: nesting ---------------------------------------------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize("depth", [17, 951, 966])
def test_deeply_nested_params_are_a_named_400(client, recorded_payloads, depth):
    """Before: 951-966 deep gave a 500 (RecursionError writing the JSONField)."""
    raw = json.dumps(body(recorded_payloads, params="HERE")).replace('"HERE"', nested_text(depth))
    response = post(client, raw)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "too_deep" and error["field"] in ("params", None)  # None: past the parser's own limit
    assert "at most 16 deep" in error["message"]


@pytest.mark.django_db
def test_a_body_nested_past_the_parser_is_too_deep(client):
    response = post(client, '{"params":' + "[" * 200_000 + "]" * 200_000 + "}")
    assert response.status_code == 400 and response.json()["error"]["code"] == "too_deep"


def damage(run_id: str, column: str, text: str) -> None:
    """Change a stored row behind Django's back, as a bad migration or a hand edit would."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE explainer_recordedrun SET {column} = %s WHERE id = %s", [text, run_id])


@pytest.mark.django_db
@pytest.mark.parametrize("column, text", [
    ("payloads", nested_text(1200)),  # past the JSON reader's recursion limit
    ("params", nested_text(999)),
    ("payloads", json.dumps([nested(20)])),  # readable, but deeper than any recording
    ("payloads", json.dumps([{"type": "session"}])),
    ("created_at", "not a date"),
    ("created_at", "2025-13-45 99:99:99"),
])
def test_a_damaged_row_is_a_named_page_never_a_500(client, recorded_payloads, column, text):
    run_id = post(client, body(recorded_payloads)).json()["id"]
    damage(run_id, column, text)
    api = client.get(f"/api/runs/{run_id}")
    assert api.status_code == 422 and api.json()["error"]["code"] == "broken_recording"
    for url in (f"/runs/{run_id}", f"/embed/tokens/static/?run={run_id}"):
        page = client.get(url)
        assert page.status_code == 422, url
        assert b"This recording cannot be replayed" in page.content and b"broken_recording" in page.content
    assert client.get(f"/embed/tokens/?run={run_id}").status_code == 200  # the live embed fetches the API


# ---- N8: who made a recording --------------------------------------------------------------------

@pytest.mark.django_db
def test_a_posted_recording_is_labelled_as_a_visitors_not_verified(client, recorded_payloads):
    forged = json.loads(json.dumps(recorded_payloads))
    forged[0]["model"]["name"] = "<b>GPT-9</b> (100% accurate)"
    run_id = post(client, body(forged)).json()["id"]
    html = client.get(f"/runs/{run_id}").content.decode()
    assert "The model on this server" not in html and "runs a real language model on this server" not in html
    assert "The model named in this recording: &lt;b&gt;GPT-9&lt;/b&gt;" in html
    assert "Recording saved by a visitor on" in html and "posted through the API, not verified" in html
    assert 'data-verified="false"' in html and "recorded on this server" not in html
    assert client.get(f"/api/runs/{run_id}").json()["recorded_on_this_server"] is False


def as_a_browser_sends(messages: list[dict]) -> list[dict]:
    """JSON.parse then JSON.stringify: 2.0 comes back as 2."""
    return json.loads(json.dumps(messages), parse_float=lambda s: int(float(s)) if float(s).is_integer() else float(s))


async def finished_run(address: str) -> tuple:
    """A stories-model run to its end over a socket: (the open communicator, its start, every message seen)."""
    comm = await connect(address=address)
    start = {"type": "start", "messages": [{"role": "user", "content": "<t403> <t407>"}], "params": PARAMS}
    await comm.send_json_to(start)
    return comm, start, await until(comm, lambda m: m.get("type") == "status" and m.get("state") == "finished")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("stories_model")
async def test_a_run_this_server_made_is_recorded_on_this_server():
    comm, start, seen = await finished_run("203.0.113.12")
    await comm.disconnect()
    payloads = as_a_browser_sends([m for m in seen if m["type"] in ("session", "prefill", "step", "done", "check")])
    data = {"messages": start["messages"], "params": PARAMS, "seed": payloads[0]["params"]["seed"],
            "model_spec": payloads[0]["model"]["spec"], "payloads": payloads}

    @sync_to_async
    def save_and_view(data):
        created = post(Client(), data)
        assert created.status_code == 201, created.content
        run_id = created.json()["id"]
        return created.json(), Client().get(f"/runs/{run_id}").content.decode(), Client().get(f"/api/runs/{run_id}").json()

    created, html, api = await save_and_view(data)
    assert created["recorded_on_this_server"] is True and api["recorded_on_this_server"] is True
    assert "<strong>recorded on this server</strong>" in html and 'data-verified="true"' in html
    again, _, _ = await save_and_view(data)
    assert again["id"] == created["id"]  # the same run saved twice is one permalink
    changed = json.loads(json.dumps(data))
    step = next(p for p in changed["payloads"] if p["type"] == "step")
    step["draw"]["u"] = 0.5 if step["draw"]["u"] != 0.5 else 0.25  # one changed figure: not this server's run
    forged, html, api = await save_and_view(changed)
    assert forged["recorded_on_this_server"] is False and "posted through the API, not verified" in html

    @sync_to_async
    def tamper_in_the_database(run_id):
        run = RecordedRun.objects.get(pk=run_id)
        run.payloads[0]["model"]["name"] = "GPT-9"
        RecordedRun.objects.filter(pk=run_id).update(payloads=run.payloads)
        return Client().get(f"/api/runs/{run_id}").json()

    assert (await tamper_in_the_database(created["id"]))["recorded_on_this_server"] is False


# ---- N9: the admin's login -----------------------------------------------------------------------

@pytest.mark.django_db
def test_the_admin_login_locks_out_a_guesser():
    """Before: 30 wrong posts, all 200. Now: MAX_FAILURES wrong answers (200), then 429 for that address."""
    User.objects.create_superuser("boss", "boss@example.com", "right-password-123")
    guesser = Client(REMOTE_ADDR="198.51.100.40")
    codes = [guesser.post("/admin/login/", {"username": "boss", "password": f"guess{n}"}).status_code for n in range(30)]
    assert codes == [200] * MAX_FAILURES + [429] * (30 - MAX_FAILURES)
    locked = guesser.post("/admin/login/", {"username": "boss", "password": "right-password-123"})
    assert locked.status_code == 429 and "Retry-After" in locked
    elsewhere = Client(REMOTE_ADDR="198.51.100.41")
    assert elsewhere.post("/admin/login/", {"username": "boss", "password": "right-password-123"}).status_code == 302
    assert elsewhere.get("/admin/").status_code == 200
