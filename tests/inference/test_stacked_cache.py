"""The kept stack (inference/stacked_cache.py): ticks of the same sessions feed the last tick's stacked cache again,
every row still equals its lone run, and a session that leaves the stack owns its cache."""
import pytest
import torch

from inference import batched_decode as sched
from inference.stacked_cache import KeptStack, storage_of
from tests.inference.test_scheduler import PROMPTS, STEPS, close, lone_run, session, stepped_once


def counting_restacks(monkeypatch) -> list:
    calls = []
    real = sched.stacked_cache

    def counted(*args):
        calls.append(len(args[0]))
        return real(*args)
    monkeypatch.setattr(sched, "stacked_cache", counted)
    return calls


def test_the_same_sessions_reuse_the_stack_and_match_their_lone_runs(stories, monkeypatch):
    restacks = counting_restacks(monkeypatch)
    sessions, kept = stepped_once(stories), KeptStack()
    rows = [[] for _ in sessions]
    for tick in range(STEPS - 1):
        order = sessions if tick % 2 else sessions[::-1]  # asking in another order changes nothing
        for s, payload in zip(order, sched.step_all(order, kept)):
            rows[sessions.index(s)].append(payload)
    assert restacks == [3]  # stacked once, then fed again every tick
    for ids, s, mine in zip(PROMPTS, sessions, rows):
        lone = lone_run(stories, ids, temperature=0.0)[1:]
        assert [p["token"]["id"] for p in mine] == [p["token"]["id"] for p in lone]
        for a, b in zip(mine, lone):
            close(a, b, f"step {b['step']}")
    assert all(storage_of(s.cache) != storage_of(kept.cache) for s in sessions)  # finished: each owns its cache


def test_a_session_that_leaves_gets_its_own_cache_and_the_rest_restack(stories, monkeypatch):
    restacks = counting_restacks(monkeypatch)
    sessions, kept = stepped_once(stories), KeptStack()
    sched.step_all(sessions, kept)
    paused = sessions[0]
    assert storage_of(paused.cache) == storage_of(kept.cache)  # a view of its row
    before = paused.cache.layers[0].keys.clone()
    sched.step_all(sessions[1:], kept)  # the first one paused
    assert restacks == [3, 2] and storage_of(paused.cache) != storage_of(kept.cache)
    assert paused.cache.layers[0].keys.equal(before)  # its own copy of the same numbers
    sched.step_all(sessions[1:], kept)
    assert restacks == [3, 2]
    sched.step_all(sessions, kept)  # back: restacked with the others
    assert restacks == [3, 2, 3]


@pytest.mark.parametrize("change", ["truncate", "fork"])
def test_a_cache_changed_between_ticks_is_restacked(stories, monkeypatch, change):
    restacks = counting_restacks(monkeypatch)
    sessions, kept = stepped_once(stories), KeptStack()
    for _ in range(2):
        sched.step_all(sessions, kept)
    twin = session(stories, PROMPTS[1], temperature=0.0)
    twin.prefill()
    for _ in range(3):
        twin.step()
    if change == "truncate":
        sessions[1].truncate(2)
        sessions[1].finished, twin.finished = None, None
        twin.truncate(2)
        twin.finished = None
    else:
        forced = sessions[1].ids[-1]
        sessions[1].fork(3, forced)
        twin.fork(3, forced)
    after = sched.step_all(sessions, kept)
    assert restacks == [3, 3]
    close(after[1], twin.step(), "the step after the change")


def test_a_cache_holding_tensors_has_the_layers_lazy_initialization_gives():
    """cache_holding sets each layer as transformers' DynamicLayer.lazy_initialization does (less the empty
    tensors it makes to be replaced): the same attributes, the same values, and the cache works as one."""
    from transformers.cache_utils import DynamicCache

    from inference.forward import cache_holding
    keys, values = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    ours = cache_holding([(keys, values)] * 3)
    theirs = DynamicCache(ddp_cache_data=[(None, None)] * 3)
    for layer in theirs.layers:
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values
    for mine, made in zip(ours.layers, theirs.layers):
        assert type(mine) is type(made) and vars(mine).keys() == vars(made).keys()
        assert all(getattr(mine, name) is getattr(made, name) or getattr(mine, name) == getattr(made, name)
                   for name in vars(made) if name not in ("keys", "values"))
        assert mine.keys is keys and mine.values is values
    more = torch.randn(1, 2, 1, 4)
    assert torch.equal(ours.update(more, more, 0)[0], theirs.update(more, more, 0)[0])
    assert ours.get_seq_length() == theirs.get_seq_length() == 6
