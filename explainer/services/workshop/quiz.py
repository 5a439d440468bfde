"""Guess the next token with a class (issue 26): the question, the room's answers, the reveal and the recap.

The question is built from the broadcast's next step, which the relay has computed and holds back from the
room (explainer/services/workshop/asking.py): the candidates are the model's top 8 by raw logit and 2 from
lower down, shuffled, and go out without a probability. Answers are rows in the database under the question
(one per socket, changed until the reveal); the reveal adds the model's odds and the draw.
"""
from __future__ import annotations

import functools
import random

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from explainer.models import QuizAnswer, QuizQuestion
from explainer.protocol import ProtocolError, integer
from inference.wire.said import said

TOP, LOWER = 8, 2  # candidates: the model's top TOP, and LOWER more from further down its list
MAX_TYPED, MAX_NICKNAME = 64, 24
_shuffle = random.SystemRandom().shuffle  # the order shown must not give the rank away


def candidates_of(step: dict, eos_ids: set[int]) -> list[dict]:
    """The question's choices: top TOP by raw logit, LOWER more from below them (the drawn token always among
    the ten, so the reveal can mark it), in a shuffled order; `key` is the position shown."""
    ranked = step["logits"]["top"]  # sorted by raw logit, highest first
    chosen, lower = ranked[:TOP], ranked[TOP:]
    drawn = step["token"]["id"]
    if drawn not in {c["id"] for c in chosen}:
        lower = [t for t in lower if t["id"] == drawn] + [t for t in lower if t["id"] != drawn]
        if drawn not in {t["id"] for t in lower}:  # sampled from beyond the listed top: it takes the last place
            lower = [{"id": drawn, "text": step["token"]["text"]}] + lower
    chosen = chosen + lower[:LOWER]
    _shuffle(chosen)
    return [{"key": key, "id": t["id"], "text": t["text"], "special": t["id"] in eos_ids} for key, t in enumerate(chosen)]


def outcome_of(step: dict, candidates: list[dict]) -> dict:
    """What the reveal adds: each candidate's probability (softmax of the raw logits, and in the distribution the
    dice drew from), its rank, and the draw."""
    raw = {t["id"]: (rank, t["prob"]) for rank, t in enumerate(step["logits"]["top"], 1)}
    final = {t["id"]: t["prob"] for t in step["probs"]}
    listed_floor = min(p for _, p in raw.values())
    rows = [{**c, "rank": raw.get(c["id"], (None, None))[0], "model_prob": raw.get(c["id"], (None, None))[1],
             "final_prob": final.get(c["id"])} for c in candidates]
    draw = step.get("draw") or {}
    return {"step": step["step"], "token": {k: step["token"][k] for k in ("id", "text", "special", "prob")},
            "u": draw.get("u"), "greedy": step["greedy"], "candidates": rows,
            "listed": len(raw), "below_listed": listed_floor}


# ---- the database -------------------------------------------------------------------------------------

@database_sync_to_async
def open_question(broadcast: str, step: int, context: dict, candidates: list[dict]) -> str:
    return QuizQuestion.objects.create(broadcast=broadcast, step=step, context=context, candidates=candidates).id


@database_sync_to_async
def reveal(question_id: str, outcome: dict) -> dict:
    """Close the question (answers from now on are refused) and add the room's counts to the outcome."""
    with transaction.atomic():
        question = QuizQuestion.objects.select_for_update().get(pk=question_id)
        question.revealed_at = timezone.now()
        counts = _counts(question)
        question.outcome = {**outcome, **counts}
        question.save()
    return question.outcome


def _counts(question: QuizQuestion) -> dict:
    """answered, and per candidate (by its key, as shown) its count; typed tokens outside them in `others`."""
    by_id: dict[int, int] = {}
    texts: dict[int, str] = {}
    for token_id, text in question.answers.values_list("token_id", "token_text"):
        by_id[token_id] = by_id.get(token_id, 0) + 1
        texts[token_id] = text
    keys = {c["id"]: c["key"] for c in question.candidates}
    return {"answered": sum(by_id.values()),
            "counts": {str(keys[k]): v for k, v in by_id.items() if k in keys},
            "others": [{"id": k, "text": texts[k], "count": v} for k, v in sorted(by_id.items(), key=lambda kv: -kv[1])
                       if k not in keys]}


@database_sync_to_async
def counts(question_id: str) -> dict:
    question = QuizQuestion.objects.filter(pk=question_id).first()
    return _counts(question) if question else {"answered": 0, "counts": {}, "others": []}


@database_sync_to_async
def forget(question_id: str) -> None:
    """A question dropped before its reveal (a new broadcast, the run failed): answers to it are refused from now."""
    QuizQuestion.objects.filter(pk=question_id).delete()


@database_sync_to_async
def forget_all() -> None:
    """The workshop's Reset: every question and answer goes."""
    QuizQuestion.objects.all().delete()


# ---- a follower's answer ------------------------------------------------------------------------------

def answer_fields(message: dict) -> dict:
    """{"type": "answer", "question": id, "choice": key} or {… "text": "free text"}; optional "nickname"."""
    question = message.get("question")
    if not isinstance(question, str) or not 0 < len(question) <= 32:
        raise ProtocolError("missing_field", said("question must be the id of the open question"), "question")
    has_choice, has_text = message.get("choice") is not None, message.get("text") is not None
    if has_choice == has_text:
        raise ProtocolError("missing_field", said("an answer needs exactly one of choice or text"), "choice")
    text = message.get("text")
    if has_text and (not isinstance(text, str) or not text.strip() or len(text) > MAX_TYPED):
        raise ProtocolError("out_of_range", said("text must be 1 to %(limit)s characters", limit=MAX_TYPED), "text")
    nickname = message.get("nickname", "")
    if not isinstance(nickname, str) or len(nickname) > MAX_NICKNAME:
        raise ProtocolError("out_of_range", said("nickname must be text of at most %(limit)s characters",
                                                 limit=MAX_NICKNAME), "nickname")
    choice = integer(message, "choice", 0, TOP + LOWER - 1, required=False)
    return {"question": question, "choice": choice, "text": text, "nickname": nickname.strip()}


@database_sync_to_async
def record_answer(fields: dict, socket: str) -> dict:
    """Store (or change) this socket's answer; refused by name once the question is revealed or gone."""
    question = QuizQuestion.objects.filter(pk=fields["question"]).first()
    if question is None:
        raise ProtocolError("quiz_closed", said("that question is no longer asked"), "question")
    if question.revealed_at is not None:
        raise ProtocolError("quiz_closed", said("the answer has been revealed: answers are closed for this question"),
                            "question")
    if fields["choice"] is not None:
        picked = question.candidates[fields["choice"]]
        token_id, token_text, pieces = picked["id"], picked["text"], 1
    else:
        token_id, token_text, pieces = match_typed(fields["text"], question.context.get("reply", ""))
    _, created = QuizAnswer.objects.update_or_create(
        question=question, socket=socket,
        defaults={"token_id": token_id, "token_text": token_text, "typed": fields["text"] or "",
                  "nickname": fields["nickname"]})
    key = next((c["key"] for c in question.candidates if c["id"] == token_id), None)
    return {"question": question.id, "key": key, "token": {"id": token_id, "text": token_text},
            "typed": fields["text"], "typed_tokens": pieces, "changed": not created}


def match_typed(text: str, reply: str) -> tuple[int, str, int]:
    """A typed guess as the model's token: (id, text, how many tokens the entry is). A word typed without its
    leading space is read with one where the reply so far does not end in a space (how this tokenizer writes
    words mid-text); of the readings, one that is a single token wins; else the entry's first token counts."""
    tokenizer = _tokenizer()
    readings = [text]
    if not text[:1].isspace():
        spaced = " " + text
        readings = [spaced, text] if reply and not reply[-1:].isspace() else [text, spaced]
    encoded = [tokenizer.encode(r, add_special_tokens=False) for r in readings]
    ids = next((e for e in encoded if len(e) == 1), encoded[0])
    if not ids:
        raise ProtocolError("invalid_value", said("that text reads as no token at all"), "text")
    if ids[0] == tokenizer.unk_token_id:
        raise ProtocolError("invalid_value", said("%(text)s is not a token this model knows: pick a candidate or type "
                                                  "another word", text=repr(text.strip()[:20])), "text")
    return ids[0], tokenizer.decode([ids[0]]), len(ids)


@functools.lru_cache(maxsize=1)
def _tokenizer_for(spec: str):
    from inference.loading import load_tokenizer  # the tokenizer alone: no weights in a web process
    return load_tokenizer(spec)


def _tokenizer():
    from explainer.services.device import model_registry
    if model_registry.is_loaded():
        return model_registry.get_model().tokenizer
    return _tokenizer_for(settings.EXPLAINER_MODEL)


# ---- the recap ----------------------------------------------------------------------------------------

def recap() -> list[dict]:
    """Every question since the workshop's last Reset: its step, context, candidates (in the order shown) with
    the model's probabilities and the class's counts, and the draw (None before its reveal)."""
    out = []
    for question in QuizQuestion.objects.prefetch_related("answers"):
        counted = _counts(question)
        shown = {row["id"]: row for row in question.outcome.get("candidates", [])}
        rows = [{**c, **{k: shown.get(c["id"], {}).get(k) for k in ("rank", "model_prob", "final_prob")},
                 "count": counted["counts"].get(str(c["key"]), 0)} for c in question.candidates]
        outcome = question.outcome
        out.append({"question": question.id, "broadcast": question.broadcast, "step": question.step,
                    "asked_at": question.asked_at.isoformat(), "revealed": question.revealed_at is not None,
                    "context": question.context, "candidates": rows, "others": counted["others"],
                    "answered": counted["answered"], "named": _named(question), "drawn": outcome.get("token"), "u": outcome.get("u"),
                    "greedy": outcome.get("greedy")})
    return out


def _named(question: QuizQuestion) -> list[dict]:
    """The answers given with a nickname (the only thing about a person kept): who picked which token."""
    return [{"nickname": a.nickname, "token": a.token_text} for a in question.answers.all() if a.nickname]


CSV_FIELDS = ("question", "broadcast", "step", "prompt", "reply_so_far", "token_id", "token", "shown_as",
              "model_rank", "model_prob", "final_prob", "class_count", "class_answered", "drawn", "u")


def recap_rows(questions: list[dict]):
    """One CSV row per (question, token): the candidates, then typed tokens outside them (shown_as empty)."""
    for q in questions:
        drawn = (q["drawn"] or {}).get("id")
        tokens = [(c, c["key"]) for c in q["candidates"]] + [(o, "") for o in q["others"]]
        for token, shown_as in tokens:
            yield {"question": q["question"], "broadcast": q["broadcast"], "step": q["step"],
                   "prompt": q["context"].get("prompt", ""), "reply_so_far": q["context"].get("reply", ""),
                   "token_id": token["id"], "token": token["text"], "shown_as": shown_as,
                   "model_rank": token.get("rank"), "model_prob": token.get("model_prob"),
                   "final_prob": token.get("final_prob"), "class_count": token.get("count", 0),
                   "class_answered": q["answered"], "drawn": token["id"] == drawn if drawn is not None else "",
                   "u": q["u"]}
