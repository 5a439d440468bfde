"""The messages only the web side sends (docs/protocol.md): refusals, busy, the page's status line and the
workshop banner. The run's own payloads come from inference/wire/builders.py."""
from __future__ import annotations


def error_payload(code: str, message: str, field: str | None = None) -> dict:
    return {"type": "error", "code": code, "message": message, "field": field}


def busy_payload(reason: str, retry_after_s: float, what: str | None = None) -> dict:
    """`what`: the measurement refused (its diagram shows the wait and asks again, not the page's banner)."""
    reply = {"type": "busy", "reason": reason, "retry_after_s": retry_after_s}
    return reply if what is None else {**reply, "what": what}


def status_payload(state: str, message: str = "", **extra) -> dict:
    """extra: run_state (the run's own state), reason (why a run ended)."""
    return {"type": "status", "state": state, "message": message, **extra}


def tokenized_payload(seq: int | None, tokens: int | None = None, typed: int | None = None, limit: int | None = None,
                      context_window: int | None = None) -> dict:
    """The answer to `tokenize`: the prompt's length as the model would read it, and the server's cap (all None,
    beside an `error`, when it could not be counted)."""
    return {"type": "tokenized", "seq": seq, "tokens": tokens, "typed_tokens": typed,
            "template_tokens": None if tokens is None else tokens - typed, "limit": limit, "context_window": context_window}


def workshop_payload(following: bool, host_live: bool, pins: dict, limits: dict, broadcast: dict) -> dict:
    """A follower page's view of the workshop: the toggle, the banner, the pinned parameters."""
    return {"type": "workshop", "following": following, "host_live": host_live, "pins": pins, "limits": limits,
            "broadcast": broadcast}


def answered_payload(answer: dict) -> dict:
    """The answer to a follower's `answer`: how it counted (key: the candidate it matches, or null for a typed
    token outside them), and whether it changed an earlier one."""
    return {"type": "answered", **answer}
