"""The prefill's default attention head (issue 23, point 9): chosen from every head by a stated rule, sent with its
own matrix when the prompt is short enough to draw in full; block averages over disjoint blocks."""
import torch

from inference.capture import FIRST_TOKEN_RULE, block_average, block_edges, least_first_token_head
from inference.wire.builders import FULL_MATRIX_TOKENS, default_head
from inference.wire.packing import unpack


def causal(p: int, heads: int, first: list[float]) -> torch.Tensor:
    """(heads, p, p) causal rows: head h puts first[h] on key 0 (row 0: all of it), the rest spread evenly."""
    out = torch.zeros(heads, p, p)
    for h, share in enumerate(first):
        out[h, 0, 0] = 1.0
        for r in range(1, p):
            out[h, r, 0] = share
            out[h, r, 1:r + 1] = (1 - share) / r
    return out


def test_the_head_that_looks_least_at_the_first_token_is_chosen_from_every_layer():
    attentions = [causal(6, 3, [0.9, 0.8, 0.7]), causal(6, 3, [0.95, 0.2, 0.6])]
    chosen = least_first_token_head(attentions)
    assert (chosen["layer"], chosen["head"]) == (1, 1)
    assert chosen["rule"] == FIRST_TOKEN_RULE
    assert abs(chosen["first_token_weight"] - 0.2) < 1e-4  # row 0 (which can read only key 0) left out


def test_ties_go_to_the_first_head_and_one_token_or_no_layers_are_answered():
    attentions = [causal(4, 2, [0.5, 0.3]), causal(4, 2, [0.3, 0.9])]
    assert (least_first_token_head(attentions)["layer"], least_first_token_head(attentions)["head"]) == (0, 1)
    assert least_first_token_head([causal(1, 2, [1.0, 1.0])])["head"] == 0
    assert least_first_token_head([]) is None


def test_a_short_summary_prefill_carries_the_default_heads_matrix_only():
    short = [causal(10, 2, [0.9, 0.1])]
    sent = default_head(short, full=False)
    assert sent["head"] == 1 and torch.allclose(torch.from_numpy(unpack(sent["full"])), short[0][1], atol=1e-3)
    assert default_head(short, full=True)["full"] is None  # every matrix is sent already
    long = [causal(FULL_MATRIX_TOKENS + 1, 2, [0.9, 0.1])]
    assert default_head(long, full=False)["full"] is None  # drawn as block averages
    assert default_head([], full=False) is None  # no attention layers


def test_block_averages_use_disjoint_blocks_as_their_edges_say():
    matrix = torch.arange(25, dtype=torch.float32).reshape(5, 5)
    edges = block_edges(5, 2)
    assert edges == [0, 2, 5]
    blocks = block_average(matrix, 2)
    for r in range(2):
        for c in range(2):
            want = matrix[edges[r]:edges[r + 1], edges[c]:edges[c + 1]].mean()
            assert torch.isclose(blocks[r, c], want), (r, c, blocks[r, c], want)
    assert block_average(torch.ones(3, 4, 7, 7), 16).shape == (3, 4, 7, 7)  # fewer tokens than blocks
