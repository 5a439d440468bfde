"""The article's "what did not happen" checks, measured on the visitor's own run."""
import asyncio
import copy
import time
import weakref
from collections import OrderedDict
from functools import partial

import torch

from explainer.services.device.executors import CHECK, run_on
from inference import article_checks
from inference.capture_records import piece
from inference.wire.builders import check_payload as check_message


CHECKED_MOST = 64  # causal-mask results kept, by model and prompt: a room on one prompt runs the check once
CHECKED: OrderedDict = OrderedDict()  # (model, spec, dtype, prompt ids) -> the result, least recently used first


def causal_mask(session) -> dict:
    """Replace the prompt's last ordinary token: every earlier position's hidden state must not move (its device
    calls run here, one after another: for tools, tests and workers' own threads)."""
    calls = causal_calls(session)
    try:
        call = next(calls)
        while True:
            call = calls.send(call())
    except StopIteration as done:
        return done.value


async def causal_mask_on(device: str, session, owner=None) -> dict:
    """causal_mask with each of its device calls queued on the device as a CHECK for `owner` (visitors' calls go
    first, and while ticks are due the checks take a small share of the time)."""
    calls = causal_calls(session)
    try:
        call = next(calls)
        while True:
            tokens = call.tokens if isinstance(call, Chunk) else 0
            call = calls.send(await run_on(device, call, priority=CHECK, owner=owner, tokens=tokens))
    except StopIteration as done:
        return done.value


class Chunk:
    """A device call that feeds `tokens` prompt tokens (its time paces the device's next chunks)."""

    def __init__(self, fn, tokens: int):
        self.fn, self.tokens = fn, tokens

    def __call__(self):
        return self.fn()


def causal_calls(session):
    """The check as device calls of at most one prefill chunk each (yielded; each call's result is sent back):
    a prefill that ran in chunks has its twin fed through the same chunks, so positions before the change see
    exactly the computation the run's own prefill did. A prompt checked lately on this model is not run again."""
    change = causal_change(session)
    if change is None:
        return no_change()
    position, replacement = change
    own, sizes, batched, start = session.prefill_hidden, session.prefill_chunked, session.prefill_batched, session.prefix
    session.prefill_hidden = session.prefix = None  # the run's own prefill tensors, then freed
    key = (id(session.model), session.description.spec, session.description.dtype, tuple(session.prompt.ids))
    if (known := CHECKED.get(key)) is not None:
        CHECKED.move_to_end(key)
        return causal_message(session, {**copy.deepcopy(known), "reused": True})
    ids, started = session.prompt.ids, time.perf_counter()
    changed = ids[:position] + [replacement] + ids[position + 1:]
    if start is not None and start.tokens < position:
        result = yield from from_prefix(session, ids, changed, position, replacement, start)
    else:
        twin = None
        if own is not None and sizes:
            twin = yield from chunked_calls(article_checks.ResidualPass(session.loaded, changed, sizes))
        result = yield partial(article_checks.causal_mask_check, session.loaded, ids, position, replacement, own, twin)
        if batched and own is not None and not result["earlier_unchanged"]:  # a batch row against a lone pass: lone passes decide
            result = yield partial(article_checks.causal_mask_check, session.loaded, ids, position, replacement)
    result["measured_ms"] = round((time.perf_counter() - started) * 1e3, 3)  # its own device calls and the waits between
    CHECKED[key] = copy.deepcopy(result)
    while len(CHECKED) > CHECKED_MOST:
        CHECKED.popitem(last=False)
    return causal_message(session, {**result, "reused": False})


def from_prefix(session, ids: list[int], changed: list[int], position: int, replacement: int, start):
    """A prefill that began in the prefix cache: the prompt and its changed twin each continue from the same
    cached keys and values, as the run did, and only the positions after the prefix are computed (two passes of the
    same shape, in chunks of at most the prefill's). The prefix's positions are the same rows in both: the
    result says how many (`from_prefix_cache`), and at least one computed position comes before the change."""
    left, most = len(ids) - start.tokens, session.prefill_chunk or len(ids)
    sizes = [min(most, left - n) for n in range(0, left, most)]
    original = yield from chunked_calls(article_checks.ResidualPass(session.loaded, ids, sizes, start))
    twin = yield from chunked_calls(article_checks.ResidualPass(session.loaded, changed, sizes, start))
    result = yield partial(article_checks.causal_mask_check, session.loaded, ids, position, replacement, original, twin)
    return {**result, "from_prefix_cache": start.tokens}


def chunked_calls(feed):
    """Each chunk of `feed` as its own device call; then its residuals, joined by one more (no torch on the event
    loop: see executors.serial_torch_here)."""
    for size in list(feed.sizes):
        yield Chunk(feed.feed, size)
    return (yield feed.result)


def causal_change(session) -> tuple[int, int] | None:
    """(position, replacement) of the check, or None when the prompt has no later token to change."""
    return article_checks.causal_change(session.prompt.ids, session.special_ids, session.tokenizer.decode,
                                        session.description.vocab_size)


def no_change() -> dict:
    return check_message("causal_mask", True, {"change_at": None, "reason": "the prompt has no later token to change"})


def causal_message(session, result: dict) -> dict:
    ids, position, replacement = session.prompt.ids, result["change_at"], result["replacement"]
    result["original"] = {"id": ids[position], "text": piece(session.tokenizer, ids[position])}
    result["replacement"] = {"id": replacement, "text": piece(session.tokenizer, replacement)}
    return check_message("causal_mask", result["earlier_unchanged"], result)


def embedding_rows(session) -> torch.Tensor:
    """Copies of the prompt tokens' embedding rows, to compare after the run."""
    table = session.adapter.token_embeddings(session.model).weight
    return table[torch.tensor(session.prompt.ids, device=table.device)].detach().clone()  # (P, hidden)


def after_run(session, rows_before: torch.Tensor, weights_before: dict, weights_after: dict | None = None) -> list[dict]:
    """After the reply: the weights and the looked-up rows are exactly what they were (weights_after: a checksum
    taken after the run, from weights_after_run(); else taken now)."""
    rows_after = embedding_rows(session)
    change = float((rows_after.float() - rows_before.float()).abs().max()) if rows_before.numel() else 0.0
    rows = [{"position": n, "id": i, "norm_before": round(float(rows_before[n].float().norm()), 6),
             "norm_after": round(float(rows_after[n].float().norm()), 6)} for n, i in enumerate(session.prompt.ids[:64])]
    weights_after = weights_after or article_checks.weights_checksum(session.model)
    return [
        check_message("embedding_rows_unchanged", change == 0.0, {"rows": rows, "max_abs_change": change}),
        check_message("weights_unchanged", weights_after == weights_before,
                      {"checksum_before": weights_before["sum"], "checksum_after": weights_after["sum"],
                       "abs_sum_before": weights_before["abs_sum"], "abs_sum_after": weights_after["abs_sum"],
                       "parameters": weights_after["parameters"]}),
    ]


SLICE_ELEMENTS = 4_000_000  # parameters summed per device call: decode ticks run between the slices
_next: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # loop -> {device: the checksum not begun yet}
_running: set[asyncio.Task] = set()  # a task the loop only holds weakly


async def weights_after_run(device: str, model) -> dict:
    """A weights checksum begun after this call, in slices between decode ticks; every run that finishes
    before it begins shares it (a crowd finishing together costs one checksum, not one each)."""
    loop = asyncio.get_running_loop()
    waiting = _next.setdefault(loop, {})
    if device not in waiting:
        waiting[device] = loop.create_future()
        task = loop.create_task(_checksum_in_slices(device, model, waiting))
        _running.add(task)
        task.add_done_callback(_running.discard)
    return await asyncio.shield(waiting[device])


async def _checksum_in_slices(device: str, model, waiting: dict) -> None:
    try:
        await run_on(device, lambda: None, priority=CHECK)  # the checks' turn comes (after the tick in flight): runs finishing until then join
    finally:
        future = waiting.pop(device)  # it begins: a run finishing from here on waits for the next one
    try:
        sums = []
        for group in article_checks.parameter_slices(model, SLICE_ELEMENTS):
            sums += await run_on(device, article_checks.parameter_sums, group, priority=CHECK)
        future.set_result(article_checks.checksum_of(sums, sum(p.numel() for p in model.parameters())))
    except Exception as exc:  # noqa: BLE001 - every run waiting on it hears
        future.set_exception(exc)
