"""A fresh class on start (issue 25 point 5): `make workshop` clears the last class's broadcast, pins and limits
(kept in the database), says so on the console, and a page that connects afterwards is told there is none."""
import io

import pytest

from explainer.management.commands import workshop
from explainer.models import WorkshopState
from explainer.services.workshop import policy


@pytest.mark.django_db
def test_make_workshop_clears_the_last_class_and_says_so(monkeypatch, settings):
    settings.EXPLAINER_HOST_PASSWORD = "pw"
    state = WorkshopState.load()
    state.pins, state.max_new_tokens = {"temperature": 0}, 100
    state.broadcast = {"id": "542efb59f1ad", "state": "running", "step": 0}
    state.save()
    started = []
    monkeypatch.setattr(workshop, "follow", lambda command, env, cwd, log, console: started.append(command) or 0)
    monkeypatch.setattr(workshop, "call_command", lambda *a, **k: None)  # the test database is migrated already
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # no own redis-server needed to get this far
    out = io.StringIO()
    command = workshop.Command(stdout=out)
    command.handle(port=8000, workers=1, daphnes=1, host="127.0.0.1")
    assert started and "A fresh class: the last class's broadcast, pins and limits are cleared." in out.getvalue()
    assert policy.read() == {"pins": {}, "limits": policy.NO_LIMITS, "broadcast": {}}
    out.truncate(0)
    command.handle(port=8000, workers=1, daphnes=1, host="127.0.0.1")
    assert "A fresh class" not in out.getvalue()  # nothing left: nothing said
