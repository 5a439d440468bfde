"""Detail on demand and retemper: answered from what the session kept, never by rerunning the model."""
from __future__ import annotations

import torch

from .kept_steps import NotKept
from .sampling import SamplingParams, dice_roll, sample_token
from .capture_records import lens_rows, texts_of
from .wire.builders import detail_payload, lens_view, retemper_payload
from .wire.packing import packed
from .wire.records import RetemperRecord
from .wire.said import said

DETAIL_KINDS = ("attention", "hidden", "embedding", "lens")


class DetailError(ValueError):
    def __init__(self, field_name: str, message: str, code: str = "out_of_range"):
        super().__init__(said("%(field)s: %(problem)s", field=field_name, problem=message))
        self.field, self.message, self.code = field_name, message, code


def _index(name: str, value, size: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < size:
        raise DetailError(name, said("must be an integer in [0, %(high)s], got %(got)s", high=size - 1, got=repr(value)))
    return value


def detail(session, what: str, step: int | None = None, layer: int | None = None, head: int | None = None,
           position: int | None = None) -> dict:
    """attention: (step 0: tokens x tokens; step n: 1 x keys) for (layer, head); hidden: the residual vector
    after ``layer`` (0 = layer 0's input) at ``position`` (step 0) or the step's position; embedding: the
    full row of the token at ``position``; lens: every layer's logit lens for the step."""
    if what not in DETAIL_KINDS:
        raise DetailError("what", said("must be one of %(names)s", names=", ".join(DETAIL_KINDS)), "invalid_value")
    d = session.description
    asked = dict(step=step, layer=layer, head=head, position=position)  # echoed as asked (lens: position may be None)
    if what == "embedding":
        position = _index("position", position, len(session.ids))
        row = session.adapter.embed(session.model, torch.tensor([[session.ids[position]]], device=session.model.device))[0, 0]
        return detail_payload(what, packed(row), **asked)
    step = _index("step", step, session.step_index + 1)
    if what == "attention":
        layer, head = _index("layer", layer, d.layers), _index("head", head, d.query_heads)
        try:
            matrix = session.kept.get(step, "attn")[layer, head]
        except NotKept:
            if step != 0:
                raise
            matrix = prompt_attention(session, layer)[head]  # too large to keep: recompute the prefill
        return detail_payload(what, packed(matrix), **asked)
    hidden = session.kept.get(step, "hidden")  # (layers + 1, [P,] hidden)
    if step == 0:
        position = hidden.shape[1] - 1 if position is None and what == "lens" else position  # lens: the last position
        position = _index("position", position, hidden.shape[1])
        hidden = hidden[:, position]
    if what == "hidden":
        layer = _index("layer", layer, d.layers + 1)
        return detail_payload(what, packed(hidden[layer]), **asked)
    rows = lens_rows(session, hidden.float(), layers=list(range(d.layers)))
    rows = lens_view(texts_of(session.tokenizer, rows), rows)
    return detail_payload(what, packed(torch.tensor([r["probs"][0] for r in rows])), lens=rows, **asked)


@torch.no_grad()
def prompt_attention(session, layer: int) -> torch.Tensor:
    """(heads, P, P) of one layer, from a fresh forward over the prompt (the same computation as prefill)."""
    ids = torch.tensor([session.prompt.ids], device=session.model.device)
    return session.model(input_ids=ids, use_cache=False, output_attentions=True).attentions[layer][0]


def retemper(session, step: int, temperature=None, top_k=None, top_p=None, min_p=None) -> dict:
    """Re-apply temperature / top-k / top-p / min-p to step's kept logits; the same u is rolled."""
    step = _index("step", step, session.step_index + 1)
    if step == 0:
        raise DetailError("step", said("retemper needs a decode step (>= 1)"))
    logits = session.kept.get(step, "logits")
    changes = {k: v for k, v in dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p).items() if v is not None}
    params = SamplingParams.from_dict({**session.params.to_dict(), **changes})
    prefix = torch.tensor([session.ids[: session.prompt_length + step - 1]])
    draw = sample_token(prefix, logits, params, session.prompt_length, step, eos_ids=session.eos_ids)
    applied = {k: getattr(params, k) for k in ("temperature", "top_k", "top_p", "min_p")}
    texts = texts_of(session.tokenizer, [draw.token_id], draw.probs_top)
    return retemper_payload(RetemperRecord(step=step, params=applied, draw=draw, texts=texts))


__all__ = ["detail", "retemper", "DetailError", "NotKept", "dice_roll"]
