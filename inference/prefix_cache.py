"""The prefix cache: the KV of prompt prefixes that visitors share, kept across sessions on one model, so a
prefill starts from the longest cached prefix and computes only the rest.

SmolLM2's template puts the same ~31-token system prompt before every conversation; a workshop's broadcast
sends one prompt to many; a visitor who adds a message resends the whole earlier conversation. As SGLang's
RadixAttention does, the prompts are kept in a radix tree over token ids: each node holds a run of tokens
and, for those positions, every layer's keys and values, plus what the prefill captured there (the residual
stream and the attention rows of those queries over every key before them), so a prefill that starts from
the cache sends exactly the payload a full one would. Positions before a token never depend on it (the
causal mask), which is what makes a prefix reusable at all.

Bounded in bytes (EXPLAINER_PREFIX_CACHE_BYTES), least recently used leaves evicted first. One cache per
loaded model (LoadedModel.prefix_cache): never shared across models, dtypes or quantized copies.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field

import torch
from torch.nn.functional import pad

from .forward import cache_holding, plain_cache


@dataclass
class Span:
    """The tensors of positions [start, start + n) of one prompt."""
    start: int
    keys: list[torch.Tensor]  # layers x (1, kv_heads, n, head_dim)
    values: list[torch.Tensor]  # layers x (1, kv_heads, n, head_dim)
    hidden: torch.Tensor  # (layers + 1, n, hidden): the residual stream at these positions
    attentions: list[torch.Tensor]  # attention layers x (heads, n, start + n): these queries over keys up to them

    @property
    def length(self) -> int:
        return self.hidden.shape[1]

    @property
    def bytes(self) -> int:
        tensors = [*self.keys, *self.values, self.hidden, *self.attentions]
        return sum(t.numel() * t.element_size() for t in tensors)

    def part(self, begin: int, end: int) -> "Span":
        """Positions [start + begin, start + end) as their own tensors (cloned: no view keeps a parent alive)."""
        last = self.start + end
        return Span(self.start + begin, [k[:, :, begin:end].clone() for k in self.keys],
                    [v[:, :, begin:end].clone() for v in self.values], self.hidden[:, begin:end].clone(),
                    [a[:, begin:end, :last].clone() for a in self.attentions])


def span_of(cache, hidden: torch.Tensor, attentions: list[torch.Tensor], begin: int, end: int) -> Span:
    """Positions [begin, end) of a prefill: its cache (DynamicCache), hidden (layers + 1, P, hidden) and
    attentions (layers x (heads, P, P))."""
    whole = Span(0, [layer.keys for layer in cache.layers], [layer.values for layer in cache.layers], hidden, attentions)
    return whole.part(begin, end)


@dataclass
class Node:
    tokens: tuple[int, ...]
    span: Span | None  # None only at the root
    parent: "Node | None" = None
    children: dict[int, "Node"] = field(default_factory=dict)  # first token -> child
    used: int = 0


@dataclass
class Hit:
    """The longest cached prefix of a prompt: `tokens` positions, as a cache to continue and a prefill part."""
    tokens: int
    cache: object  # DynamicCache holding the prefix's keys and values (the session's own tensors)
    hidden: torch.Tensor  # (layers + 1, tokens, hidden)
    attentions: list[torch.Tensor]  # layers x (heads, tokens, tokens)


@dataclass
class PrefixStart:
    """Where a session's prefill began in the prefix cache: the prefix's keys and values (layers x (keys, values),
    each (1, kv_heads, tokens, head_dim)) and residuals (layers + 1, tokens, hidden). The causal-mask check
    continues its two passes from the same keys and values (inference/article_checks.py ResidualPass)."""
    kv: list[tuple[torch.Tensor, torch.Tensor]]
    hidden: torch.Tensor

    @property
    def tokens(self) -> int:
        return self.hidden.shape[1]


@dataclass
class PrefixStats:
    entries: int
    bytes: int
    budget_bytes: int
    lookups: int
    hits: int
    tokens_looked_up: int
    tokens_saved: int
    evicted_tokens: int

    def to_dict(self) -> dict:
        rate = self.hits / self.lookups if self.lookups else None
        return {**self.__dict__, "hit_rate": None if rate is None else round(rate, 4)}


class PrefixCache:
    """A radix tree of prompt prefixes with their KV and captured rows, bounded in bytes, LRU-evicted."""

    def __init__(self, budget_bytes: int):
        self.budget_bytes = max(0, int(budget_bytes))
        self.root = Node((), None)
        self.bytes = self.entries = 0
        self.clock = itertools.count(1)
        self.lock = threading.Lock()
        self.lookups = self.hits = self.tokens_looked_up = self.tokens_saved = self.evicted_tokens = 0

    @property
    def enabled(self) -> bool:
        return self.budget_bytes > 0

    def longest(self, ids: list[int], most: int) -> Hit | None:
        """The longest cached prefix of `ids`, at most `most` tokens (a prefill must compute its last one)."""
        if not self.enabled:
            return None
        with self.lock:
            self.lookups += 1
            self.tokens_looked_up += len(ids)
            spans = self._matched(ids[:most])
            if not spans:
                return None
            hit = joined(spans)
            self.hits += 1
            self.tokens_saved += hit.tokens
            return hit

    def matched_length(self, ids: list[int], most: int) -> int:
        """How many of `ids` (at most `most`) longest() would find now: a count, no tensors, not a lookup."""
        if not self.enabled:
            return 0
        with self.lock:
            node, at = self.root, 0
            while at < min(len(ids), most):
                child = node.children.get(ids[at])
                if child is None:
                    break
                common = shared_length(child.tokens, ids[at:most])
                at += common
                if common < len(child.tokens):
                    break
                node = child
            return at

    def insert(self, ids: list[int], cache, hidden: torch.Tensor, attentions: list[torch.Tensor]) -> None:
        """Keep a finished prefill of `ids`: the positions the tree does not hold yet are copied in."""
        if not self.enabled or not plain_cache(cache) or cache.get_seq_length() != len(ids) or not ids:
            return
        with self.lock:
            node, at = self.root, 0
            while at < len(ids):
                child = node.children.get(ids[at])
                if child is None:
                    self._add(node, ids[at:], span_of(cache, hidden, attentions, at, len(ids)))
                    break
                common = shared_length(child.tokens, ids[at:])
                if common < len(child.tokens):
                    child = self._split(child, common)
                node, at = child, at + common
                node.used = next(self.clock)
            self._evict()

    def stats(self) -> PrefixStats:
        with self.lock:
            return PrefixStats(entries=self.entries, bytes=self.bytes, budget_bytes=self.budget_bytes,
                               lookups=self.lookups, hits=self.hits, tokens_looked_up=self.tokens_looked_up,
                               tokens_saved=self.tokens_saved, evicted_tokens=self.evicted_tokens)

    def clear(self) -> None:
        with self.lock:
            self.root, self.bytes, self.entries = Node((), None), 0, 0

    # ---- the tree ------------------------------------------------------------------------------
    def _matched(self, ids: list[int]) -> list[Span]:
        """The spans along the path that matches ids (the last one cut where the match ends); marks them used."""
        spans, node, at = [], self.root, 0
        now = next(self.clock)
        while at < len(ids):
            child = node.children.get(ids[at])
            if child is None:
                break
            common = shared_length(child.tokens, ids[at:])
            child.used = now
            spans.append(child.span if common == len(child.tokens) else child.span.part(0, common))
            if common < len(child.tokens):
                break
            node, at = child, at + common
        return spans

    def _add(self, parent: Node, tokens: list[int], span: Span) -> None:
        node = Node(tuple(tokens), span, parent, used=next(self.clock))
        parent.children[tokens[0]] = node
        self.bytes += span.bytes
        self.entries += 1

    def _split(self, node: Node, at: int) -> Node:
        """Cut `node` after `at` tokens: the returned head keeps the first ones, the old node the rest."""
        head = Node(node.tokens[:at], node.span.part(0, at), node.parent, used=node.used)
        tail_span = node.span.part(at, len(node.tokens))
        self.bytes += head.span.bytes + tail_span.bytes - node.span.bytes
        node.parent.children[node.tokens[0]] = head
        node.tokens, node.span, node.parent = node.tokens[at:], tail_span, head
        head.children[node.tokens[0]] = node
        self.entries += 1
        return head

    def _evict(self) -> None:
        """Least recently used leaves go first (a parent is used whenever its child is, so leaves age first)."""
        while self.bytes > self.budget_bytes:
            leaves = [n for n in self._nodes(self.root) if not n.children and n is not self.root]
            if not leaves:
                return
            oldest = min(leaves, key=lambda n: n.used)
            del oldest.parent.children[oldest.tokens[0]]
            self.bytes -= oldest.span.bytes
            self.entries -= 1
            self.evicted_tokens += len(oldest.tokens)

    def _nodes(self, node: Node):
        yield node
        for child in node.children.values():
            yield from self._nodes(child)


def shared_length(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def joined(spans: list[Span]) -> Hit:
    """The path's spans as one prefix: a cache of its own tensors, the hidden rows, square attention rows."""
    tokens = sum(s.length for s in spans)
    layers = range(len(spans[0].keys))
    cache = cache_holding((torch.cat([s.keys[n] for s in spans], dim=2), torch.cat([s.values[n] for s in spans], dim=2))
                          for n in layers)
    hidden = torch.cat([s.hidden for s in spans], dim=1)  # (layers + 1, tokens, hidden)
    attentions = [torch.cat([pad(s.attentions[n], (0, tokens - s.attentions[n].shape[-1])) for s in spans], dim=1)
                  for n in range(len(spans[0].attentions))]  # layers x (heads, tokens, tokens)
    return Hit(tokens, cache, hidden, attentions)


def default_budget(device: torch.device) -> int:
    """Sized for the device: 2% of a GPU's memory, or of the machine's memory, capped at 1 GiB on a CPU."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory * 0.02)
    try:
        import os
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = 8 * 2**30
    return min(int(memory * 0.02), 2**30)
