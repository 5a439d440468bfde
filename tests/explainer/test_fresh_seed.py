"""Issue 23: a start without a seed gets a fresh random one (shown in the session payload's params, so the
page and a saved recording can reproduce it); a given seed gives the same reply again."""
import pytest

from inference.sampling import FRESH_SEEDS, with_fresh_seed
from tests.support import connect, until

START = {"type": "start", "messages": [{"role": "user", "content": "<t403> <t407>"}],
         "params": {"temperature": 1.0, "max_new_tokens": 6}}

pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py


async def run_once(params: dict) -> tuple[int, list[int]]:
    comm = await connect()
    await comm.send_json_to({**START, "params": params})
    seen = await until(comm, "done")
    await comm.disconnect()
    session = next(m for m in seen if m["type"] == "session")
    return session["params"]["seed"], [m["token"]["id"] for m in seen if m["type"] == "step"]


async def test_two_starts_without_a_seed_get_different_seeds():
    seeds = {(await run_once(START["params"]))[0] for _ in range(2)}
    assert len(seeds) == 2 and all(0 <= s < FRESH_SEEDS for s in seeds)


async def test_a_null_seed_is_a_fresh_one_too():
    seed, _ = await run_once({**START["params"], "seed": None})
    assert isinstance(seed, int)


async def test_seed_1234_gives_the_same_reply_again():
    first, again = [await run_once({**START["params"], "seed": 1234}) for _ in range(2)]
    assert first == again and first[0] == 1234 and len(first[1]) == 6


def test_a_given_seed_is_kept():
    assert with_fresh_seed({"seed": 0}) == {"seed": 0}
    assert with_fresh_seed({"seed": 7, "temperature": 0.7}) == {"seed": 7, "temperature": 0.7}
