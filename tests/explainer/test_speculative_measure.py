"""The serving view's speculative measurement: n-gram prompt lookup on whatever model is served."""
import pytest

from explainer.services.device import model_registry
from tests.explainer.test_consumer import connect, until

pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py: stories260K is served


async def test_a_model_without_a_draft_gets_ngram_lookup_identical_to_greedy():
    comm = await connect()
    await comm.send_json_to({"type": "measure", "what": "speculative"})
    data = (await until(comm, "serving", timeout=300))[-1]["data"]
    assert data["method"] == "ngram" and data["draft_forward_passes"] == 0
    assert data["identical"] and data["tokens"] == data["target_tokens"]
    assert data["target_forward_passes"] == len(data["rounds"]) and data["speedup"] > 0
    await comm.send_json_to({"type": "measure", "what": "speculative", "draft": "oracle"})
    error = (await until(comm, "error"))[-1]
    assert error["code"] == "invalid_value" and error["field"] == "draft"
    await comm.disconnect()


async def test_the_bundled_pair_keeps_its_draft_model_and_can_ask_for_ngram(settings):
    settings.EXPLAINER_MODEL = "bundled"
    model_registry.reset()
    comm = await connect()
    for draft, method in ((None, "draft_model"), ("ngram", "ngram"), ("model", "draft_model")):
        await comm.send_json_to({"type": "measure", "what": "speculative", **({"draft": draft} if draft else {})})
        data = (await until(comm, "serving", timeout=300))[-1]["data"]
        assert data["method"] == method and data["identical"], draft
    await comm.disconnect()
