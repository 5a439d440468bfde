"""The host's question in flight, on the relay's side: the broadcast's next step, computed and held back.

"Ask the class" steps the paused broadcast once; every frame the run sends from then on (the step, its
parts, the status, a `done` if that token ended the reply) is held here instead of going to the room, so no
follower's socket carries the step's logits, stages, probabilities or draw until the host reveals. The
question itself (the text so far and the shuffled candidates, no odds) goes out in the broadcast's summary
(`broadcast.quiz` in every `workshop` message), so a student who arrives mid-question sees it too.
"""
from __future__ import annotations

from explainer.protocol import ProtocolError
from explainer.services.workshop import quiz
from inference.wire.said import said
from inference.wire.framing import join_message

IDLE, COMPUTING, OPEN = "idle", "computing", "open"


class Asking:
    """One relay's question: idle, computing (the step was asked for), or open (answers come in)."""

    def __init__(self):
        self.state, self.held, self.question = IDLE, [], None

    @property
    def holding(self) -> bool:
        return self.state != IDLE

    def refuse_run_verbs(self) -> None:
        """While the class guesses, the broadcast waits: a step or a resume would show the answer."""
        if self.holding:
            raise ProtocolError("quiz_open", said("the class is answering: reveal the answer first"), "type")

    def hold(self, frame: dict) -> dict | None:
        """Keep a frame back from the room; the complete next step once it is in (its `part`s joined)."""
        self.held.append(frame)
        if self.state != COMPUTING:
            return None
        steps = [i for i, f in enumerate(self.held) if f["type"] == "step"]
        if not steps:
            return None
        head = self.held[steps[0]]
        frames = [head] + [f for f in self.held[steps[0] + 1:] if f["type"] == "part" and f.get("of") == "step"]
        if len(frames) - 1 < head.get("parts", 0):
            return None
        return join_message(frames[:head.get("parts", 0) + 1])

    def release(self) -> list[dict]:
        """The held frames, in order, for the room; back to idle."""
        held, self.held, self.state, self.question = self.held, [], IDLE, None
        return held


def context_of(summary: dict, kept: list[tuple[int, dict]]) -> dict:
    """The text so far: the visitor's (host's) own words and the reply before the asked token."""
    messages = summary.get("messages") or []
    prompt = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), summary.get("text") or "")
    reply = "".join(f.get("text_delta", "") for _, f in kept if f["type"] == "step")
    return {"prompt": prompt, "reply": reply}


def eos_ids(kept: list[tuple[int, dict]]) -> set[int]:
    session = next((f for _, f in kept if f["type"] == "session"), {})
    return {t["id"] for t in session.get("eos", [])}


async def open_question(asking: Asking, step: dict, broadcast) -> dict:
    """Store the question and return what the room is shown (no probability in it)."""
    context = context_of(broadcast.summary, broadcast.kept)
    candidates = quiz.candidates_of(step, eos_ids(broadcast.kept))
    question_id = await quiz.open_question(broadcast.id, step["step"], context, candidates)
    asking.state, asking.question = OPEN, {"step": step, "candidates": candidates, "id": question_id}
    return {"id": question_id, "state": "open", "step": step["step"], "context": context,
            "candidates": [{k: c[k] for k in ("key", "text", "special")} for c in candidates]}
