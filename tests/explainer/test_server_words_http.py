"""The server's own sentences over HTTP (issue 28): a refused recording's `error.message` is said in the request's
language (`?lang=`, which the page's save button sends, else Accept-Language), as a socket's errors are."""
import json

import pytest
from django.test import Client
from django.utils import translation

# model_spec is checked after messages, params and seed, and before the payloads: this body is refused for it alone.
BODY = {"messages": [{"role": "user", "content": "hi"}], "params": {}, "seed": 1, "model_spec": "", "payloads": []}
TEMPLATE = "model_spec must be a non-empty string (at most %(limit)s characters)"


def refusal(query: str, **headers) -> str:
    response = Client().post(f"/api/runs{query}", json.dumps(BODY), content_type="application/json", **headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("wrong_type", "model_spec")
    return error["message"]


@pytest.mark.django_db
def test_a_refused_recording_is_explained_in_the_requests_language():
    english = refusal("")
    french = refusal("?lang=fr", HTTP_ACCEPT_LANGUAGE="en-US,en;q=0.9")  # the page's ?lang= wins over the browser's
    assert english == TEMPLATE % {"limit": 300}
    with translation.override("fr"):
        assert french == translation.gettext(TEMPLATE) % {"limit": 300}
    assert french != english
