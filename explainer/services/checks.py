"""The article's "what did not happen" checks, measured on the visitor's own run."""
import torch

from inference import checks
from inference.payload_builder import check_payload as check_message, piece


def causal_mask(session) -> dict:
    """Replace the prompt's last ordinary token: every earlier position's hidden state must not move."""
    ids, tok = session.prompt.ids, session.tokenizer
    position = checks.causal_position(ids, session.special_ids, tok.decode)
    if position is None:
        return check_message("causal_mask", True, {"change_at": None, "reason": "the prompt has no later token to change"})
    replacement = checks.replacement_token(ids[position], session.description.vocab_size, session.special_ids, tok.decode)
    result = checks.causal_mask_check(session.loaded, ids, position, replacement)
    result["original"] = {"id": ids[position], "text": piece(tok, ids[position])}
    result["replacement"] = {"id": replacement, "text": piece(tok, replacement)}
    return check_message("causal_mask", result["earlier_unchanged"], result)


def embedding_rows(session) -> torch.Tensor:
    """Copies of the prompt tokens' embedding rows, to compare after the run."""
    table = session.adapter.token_embeddings(session.model).weight
    return table[torch.tensor(session.prompt.ids, device=table.device)].detach().clone()  # (P, hidden)


def after_run(session, rows_before: torch.Tensor, weights_before: dict) -> list[dict]:
    """After the reply: the weights and the looked-up rows are exactly what they were."""
    rows_after = embedding_rows(session)
    change = float((rows_after.float() - rows_before.float()).abs().max()) if rows_before.numel() else 0.0
    rows = [{"position": n, "id": i, "norm_before": round(float(rows_before[n].float().norm()), 6),
             "norm_after": round(float(rows_after[n].float().norm()), 6)} for n, i in enumerate(session.prompt.ids[:64])]
    weights_after = checks.weights_checksum(session.model)
    return [
        check_message("embedding_rows_unchanged", change == 0.0, {"rows": rows, "max_abs_change": change}),
        check_message("weights_unchanged", weights_after == weights_before,
                      {"checksum_before": weights_before["sum"], "checksum_after": weights_after["sum"],
                       "abs_sum_before": weights_before["abs_sum"], "abs_sum_after": weights_after["abs_sum"],
                       "parameters": weights_after["parameters"]}),
    ]
