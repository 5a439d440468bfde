"""The prefix cache over the socket (issue 24 point 3): a visitor whose prompt starts like an earlier visitor's
gets a prefill that says how many tokens came from the cache, and the same tokens as without it; the causal
check still holds; EXPLAINER_PREFIX_CACHE_BYTES=0 turns it off."""
import pytest

from explainer.services.device import model_registry
from tests.support import connect, until

SHARED = "A mole is a small animal that lives under the ground and"
FIRST, SECOND = SHARED + " eats worms.", SHARED + " has soft dark fur."


@pytest.fixture
def bundled_site(settings):
    """The bundled model (its tokenizer knows these words) as the site's model, loaded afresh."""
    settings.EXPLAINER_MODEL, settings.EXPLAINER_DEVICE = "bundled", "cpu"
    model_registry.reset()
    yield settings
    model_registry.reset()


async def run(text: str) -> tuple[dict, dict, dict]:
    """One greedy run of `text` on its own socket: (prefill, done, causal_mask check)."""
    comm = await connect()
    try:
        await comm.send_json_to({"type": "start", "text": text, "params": {"temperature": 0, "max_new_tokens": 6}})
        seen = await until(comm, lambda m: m.get("type") == "status" and m.get("state") == "finished")
    finally:
        await comm.disconnect()
    prefill = next(m for m in seen if m["type"] == "prefill")
    check = next(m for m in seen if m["type"] == "check" and m["name"] == "causal_mask")
    return prefill, next(m for m in seen if m["type"] == "done"), check


async def test_a_second_visitor_starts_from_the_first_ones_prefix(bundled_site):
    first, _, _ = await run(FIRST)
    assert first["cached_tokens"] == 0 and first["prefix_cache"]["lookups"] >= 1
    second, done, check = await run(SECOND)
    shared = next(i for i, (a, b) in enumerate(zip(first["tokens"], second["tokens"])) if a["id"] != b["id"])
    assert second["cached_tokens"] == shared >= 10  # SHARED computed once, by the first visitor's prefill
    assert second["prefix_cache"]["hits"] >= 1 and second["prefix_cache"]["bytes"] > 0
    assert check["passed"] and check["data"]["earlier_unchanged"]  # the mask check holds on a prefill from the cache
    bundled_site.EXPLAINER_PREFIX_CACHE_BYTES = 0  # a fresh server with the cache off: the same tokens
    model_registry.reset()
    plain, plain_done, _ = await run(SECOND)
    assert plain["cached_tokens"] == 0 and plain["prefix_cache"] is None
    assert plain_done["token_ids"] == done["token_ids"]
