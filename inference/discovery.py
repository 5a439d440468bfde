"""Find a causal LM's parts by looking at it: one tiny forward pass, watched by hooks that always come off.

- the decoder layers: the ModuleList of ``num_hidden_layers`` blocks holding the most parameters;
- the final norm: whatever runs after the last layer finishes and before the LM head starts;
- a learned position table: an embedding other than the token table that runs before layer 0;
- rotary positions: a module with the model's ``inv_freq`` (or rope settings in the config);
- which stages exist: attention weights returned, a cache returned.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

from .adapters import SCALED_EMBEDDINGS, FamilyAdapter
from .model_config import NO_CACHE_NOTE, UnsupportedModel, setting, text_config
from .wire.said import said

PROBE_IDS = [1, 2, 3]
SKIPPED = (torch.nn.Dropout, torch.nn.Identity)


@contextmanager
def call_order(model):
    """Record ("start"|"end", module name) for every submodule call; the hooks are always removed."""
    events: list[tuple[str, str]] = []
    handles = []
    for name, module in model.named_modules():
        if not name:
            continue
        handles.append(module.register_forward_pre_hook(lambda _m, _a, name=name: events.append(("start", name))))
        handles.append(module.register_forward_hook(lambda _m, _a, _o, name=name: events.append(("end", name))))
    try:
        yield events
    finally:
        for handle in handles:
            handle.remove()


def layer_list(model, family: str) -> str:
    """The name of the decoder layer list: ModuleLists of num_hidden_layers blocks, the heaviest one."""
    layers = getattr(text_config(model.config), "num_hidden_layers", None)
    lists = [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m)]
    sized = [(name, m) for name, m in lists if len(m) == layers] or lists
    if not sized:
        raise UnsupportedModel(f"{family}: no list of decoder layers found in {type(model).__name__}")
    return max(sized, key=lambda item: sum(p.numel() for p in item[1].parameters()))[0]


@torch.no_grad()
def probe(model, family: str):
    """One forward over a few tokens, watched; returns (output, call events)."""
    vocab = model.get_input_embeddings().num_embeddings
    ids = torch.tensor([[i % vocab for i in PROBE_IDS]], device=model.device)
    with call_order(model) as events:
        try:
            out = model(input_ids=ids, use_cache=True, output_attentions=True)
        except Exception as exc:  # any failure here is this architecture's: name it
            raise UnsupportedModel(f"{family} ({type(model).__name__}): a plain forward pass failed "
                                   f"({type(exc).__name__}: {exc})") from exc
    return out, list(events)


def final_modules(model, events, layers_path: str, count: int, family: str) -> tuple[str, ...]:
    """The outermost modules that start after the last layer ends and end before the LM head starts."""
    head = model.get_output_embeddings()
    if head is None:
        raise UnsupportedModel(f"{family} ({type(model).__name__}): get_output_embeddings() is None, no LM head to read")
    names = {id(m): n for n, m in model.named_modules()}
    last = f"{layers_path}.{count - 1}"
    last_end = max(i for i, (kind, name) in enumerate(events) if kind == "end" and name == last)
    head_start = next((i for i, (kind, name) in enumerate(events) if i > last_end and kind == "start"
                       and name == names.get(id(head))), len(events))
    between = [name for kind, name in events[last_end + 1: head_start] if kind == "start"]
    outer = [n for n in dict.fromkeys(between) if not any(n.startswith(o + ".") for o in between if o != n)]
    return tuple(n for n in outer if not isinstance(model.get_submodule(n), SKIPPED))


def position_table(model, events, layers_path: str) -> str | None:
    """An embedding table, other than the token table, that runs before the first layer."""
    first = next(i for i, (kind, name) in enumerate(events) if kind == "start" and name.startswith(layers_path + "."))
    token_table = model.get_input_embeddings()
    for kind, name in events[:first]:
        module = model.get_submodule(name)
        if kind == "end" and isinstance(module, torch.nn.Embedding) and module is not token_table:
            return name
    return None


def position_scheme(model, positions_path: str | None) -> str:
    config = text_config(model.config)
    if any(isinstance(getattr(m, "inv_freq", None), torch.Tensor) for m in model.modules()):
        return "rotary"
    if setting(config, "rotary_dim") or setting(config, "rope_parameters") and setting(config, "num_attention_heads"):
        return "rotary" if positions_path is None else "learned"
    return "learned" if positions_path else "none"


def attention_layers(out, count: int, config) -> tuple[int, ...] | None:
    """Which decoder layers returned attention weights (None: every one; models that loop repeat them)."""
    returned = [a for a in (getattr(out, "attentions", None) or ()) if is_attention(a, len(PROBE_IDS))]
    if len(returned) >= count:
        return None
    kinds = list(setting(config, "layer_types") or [])
    attending = [i for i, kind in enumerate(kinds) if "attention" in str(kind) and "linear" not in str(kind)]
    return tuple(attending) if len(attending) == len(returned) else tuple(range(len(returned)))


def is_attention(weights, tokens: int, keys: int | None = None) -> bool:
    """Softmax attention weights (batch, heads, queries, keys), not a recurrent model's own "attentions"."""
    keys = tokens if keys is None else keys
    return isinstance(weights, torch.Tensor) and weights.dim() == 4 and weights.shape[-2] == tokens \
        and weights.shape[-1] <= keys


@torch.no_grad()
def lens_reads_logits(model, layers_path: str, finals: tuple[str, ...], ids: list[int]) -> bool:
    """Whether the last layer's output, through the final modules and the head, ranks tokens as the model
    does (a monotone logit scale or soft cap keeps the ranking; multi-stream residuals do not fit)."""
    recorded = []
    last = model.get_submodule(layers_path)[-1]
    handle = last.register_forward_hook(lambda _m, _a, o: recorded.append(o[0] if isinstance(o, (tuple, list)) else o))
    try:
        logits = model(input_ids=torch.tensor([ids], device=model.device), use_cache=False).logits[0, -1]
        hidden = recorded[-1][0, -1:]  # (1, hidden)
        for path in finals:
            hidden = model.get_submodule(path)(hidden)
        read = model.get_output_embeddings()(hidden)[0]
    except Exception:  # the final modules take more than one residual row: no lens for this model
        return False
    finally:
        handle.remove()
    k = min(5, logits.shape[-1])
    return read.shape == logits.shape and torch.equal(read.topk(k).indices, logits.topk(k).indices)


def stage_notes(scheme: str, has_cache: bool, attending, count: int, lens: bool = True) -> dict:
    notes = {}
    # said: the model card shows them in the page's language (the recorded session payload keeps the English)
    if not lens:
        notes["lens"] = said("the last layer's output does not go straight through a norm to the LM head in this "
                             "model, so only the final layer's prediction (the model's own logits) is shown")
    if attending is not None:
        notes["attention"] = said("this model has no attention layers: its layers mix tokens with a recurrence or "
                                  "convolution (state-space / linear layers) instead") if not attending else \
            said("only layers %(layers)s of %(count)s use attention; the others mix tokens with a recurrence or "
                 "convolution", layers=str(list(attending)), count=count)
    if scheme == "none":
        notes["positions"] = said("this model adds no position vectors and rotates nothing: order comes from "
                                  "attention biases (ALiBi), fixed sinusoids or its recurrence")
    if not has_cache:
        notes["kv_cache"] = NO_CACHE_NOTE
    return notes


@torch.no_grad()
def cache_works(model, out, ids: list[int]) -> bool:
    """Whether feeding one more token on top of the returned cache gives the logits of a fresh forward."""
    cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
    if cache is None:
        return False
    device = model.device
    try:
        step = model(input_ids=torch.tensor([[ids[0]]], device=device), cache=cache, use_cache=True).logits[0, -1]
        fresh = model(input_ids=torch.tensor([ids + ids[:1]], device=device), use_cache=False).logits[0, -1]
    except Exception:  # a cache this explainer cannot drive (the model's own format): re-run instead
        return False
    return torch.allclose(step.float(), fresh.float(), atol=1e-3 * max(1.0, float(fresh.abs().max())), rtol=1e-3)


def discover(model, adapter_class, scaled: set[str]):
    """Build the adapter of ``model`` from what one watched forward pass shows."""
    family = model.config.model_type
    layers_path = layer_list(model, family)
    count = len(model.get_submodule(layers_path))
    out, events = probe(model, family)
    finals = final_modules(model, events, layers_path, count, family)
    positions_path = position_table(model, events, layers_path)
    scheme = position_scheme(model, positions_path)
    vocab = model.get_input_embeddings().num_embeddings
    has_cache = cache_works(model, out, [i % vocab for i in PROBE_IDS])
    attending = attention_layers(out, count, text_config(model.config))
    lens = lens_reads_logits(model, layers_path, finals, [i % vocab for i in PROBE_IDS])
    return adapter_class(family, scheme, family in scaled, layers_path, finals,
                         positions_path if scheme == "learned" else None, has_cache, attending,
                         stage_notes(scheme, has_cache, attending, count, lens), lens)


def adapter_for(model) -> FamilyAdapter:
    """The adapter of a loaded model, its parts found from the model itself."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError("adapter_for takes the model (its parts are found by looking at it), not a config")
    return discover(model, FamilyAdapter, SCALED_EMBEDDINGS)
