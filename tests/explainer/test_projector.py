"""The projector view and "everyone look at step N" (issue 25 point 7): /host/present/ is the article for the host's
session only, marked to follow the broadcast by itself; the host's `look` reaches every follower in the broadcast's
summary, within the steps the broadcast has."""
from tests.explainer.test_workshop import (  # noqa: F401 (fixtures)
    DB, MESSAGES, PASSWORD, close, follow, logged_in_host, no_leftovers, of_type, until, visitor, workshop_on)

PAUSED = {"type": "broadcast", "messages": MESSAGES, "paused": True, "params": {"seed": 3, "max_new_tokens": 6}}


@DB
def test_the_projector_view_is_the_hosts_only(client):
    assert client.get("/host/present/").url == "/host/"  # not logged in: the login page
    client.post("/host/", {"password": PASSWORD})
    page = client.get("/host/present/")
    text = page.content.decode()
    assert page.status_code == 200 and 'class="present" data-present' in text and "js/article/main.js" in text
    assert "<title>Projector · Hit Enter</title>" in text
    assert 'href="/host/present/"' in client.get("/host/").content.decode()  # the host page links to it
    assert 'data-present' not in client.get("/").content.decode()  # the students' article is the plain one


@DB
async def test_everyone_look_at_step_n_reaches_every_follower_within_the_run():
    followers = [await visitor(), await visitor()]
    for comm in followers:
        await follow(comm)
    host = await logged_in_host()
    await host.send_json_to({"type": "look", "step": 0})  # nothing broadcast yet
    assert (await until(host, of_type("error")))[-1]["code"] == "no_run"
    await host.send_json_to(PAUSED)
    for _ in range(3):
        await host.send_json_to({"type": "step"})
        await until(host, of_type("step"))
    await host.send_json_to({"type": "look", "step": 4})  # past the steps the run has
    refused = (await until(host, of_type("error")))[-1]
    assert (refused["code"], refused["field"]) == ("out_of_range", "step")
    await host.send_json_to({"type": "look", "step": 1})
    for comm in followers:
        news = (await until(comm, lambda m: m["type"] == "workshop" and m["broadcast"].get("look")))[-1]
        assert news["broadcast"]["look"]["step"] == 1 and news["broadcast"]["step"] == 3
    await host.send_json_to({"type": "stop"})
    await close(*followers, host)


@DB
async def test_the_projector_view_is_not_counted_as_a_student():
    """The host's own browser following (the projector view) is listed apart from the room's students."""
    from asgiref.sync import sync_to_async
    from channels.testing import WebsocketCommunicator
    from explainer.asgi import application
    from tests.explainer.test_workshop import OPEN, ORIGIN, host_socket, log_in
    session = await sync_to_async(log_in)()
    host = await host_socket(session)
    student = await visitor()
    await follow(student)
    projector = WebsocketCommunicator(application, "/ws/session/", headers=[ORIGIN, (b"cookie", f"sessionid={session}".encode())])
    assert (await projector.connect())[0]
    OPEN.append(projector)
    await until(projector, lambda m: m.get("state") == "ready")
    await follow(projector)
    stats = (await until(host, lambda m: m["type"] == "host_stats" and m["visitors"]["projectors"] == 1))[-1]
    assert (stats["visitors"]["connected"], stats["visitors"]["following"]) == (1, 1)
    await close(projector, student, host)
