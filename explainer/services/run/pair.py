"""The pair's side of VisitorRun (compare mode, compared.py): run B's slot, its opening, the pair's steps and forks.
Mixed into VisitorRun; a lone run (self.b None) goes through each of these as before."""
from __future__ import annotations

import asyncio
from functools import partial

from django.conf import settings

from explainer.protocol import ProtocolError, choice
from explainer.services.admission.capacity import generating
from explainer.services.admission.start_queue import local_queue
from explainer.services.device.executors import run_on, scheduler_for
from explainer.services.run.compared import RUNS, CompareAsk, RunB, as_b, asked, b_model, b_params, two_slots_refusal
from explainer.services.workshop import policy
from inference.engine import GenerationSession
from inference.prompting import build_prompt
from inference.sampling import SamplingParams
from inference.wire.said import said


class ComparedRun:
    """VisitorRun's run B (self.b), asked at a start (self.b_asked) and holding its own slot (self.b_slot)."""

    b: RunB | None = None
    b_asked: tuple | None = None  # (model, params, ask, prompt_for) between a start's checks and its opening
    b_slot = False

    def sessions(self) -> list[GenerationSession]:
        """Run A's session, then run B's in compare mode."""
        return [s for s in (self.session, self.b and self.b.session) if s is not None]

    def all_finished(self) -> bool:
        return all(s.finished for s in self.sessions())

    async def _asked_b(self, message: dict, fields: dict, params: SamplingParams, loaded) -> None:
        """A start's `compare`, checked before any slot is taken: B's parameters (the host's pins hold for B too)
        and its model, loaded now if it is the first compare on it."""
        self.b_asked = None
        ask: CompareAsk | None = asked(message)
        if ask is None:
            return
        cap = settings.EXPLAINER_MAX_NEW_TOKENS
        pinned, _ = await policy.apply_to_start({**fields, "params": b_params(ask, params, cap).to_dict()})
        params_b = SamplingParams.from_dict(pinned["params"], max_new_tokens_cap=cap)
        if params_b == params and ask.weights == "float" and ask.model is None:
            raise ProtocolError("invalid_value", said("run B would be the same run as A: the workshop host pinned what "
                                                      "compare changes"), "compare")
        loaded_b = await b_model(ask)
        prompt_for = partial(build_prompt, messages=fields["messages"], text=fields["text"])
        self.b_asked = (loaded_b, params_b, ask, prompt_for)

    def _refused_b_slot(self) -> str | None:
        """Run B's generation slot, taken now beside A's (None), or why not: A's slot (or place in line) goes back."""
        if self.b_asked is None:
            return None
        if self.ticket is not None:  # visitors are waiting: a pair does not jump the line, nor wait in it half-open
            local_queue.leave(self.ticket)
            self.ticket = None
            return two_slots_refusal(said("visitors are waiting in line for a slot"))
        if (refused := generating.refusal(self.slot_limit, self.address)) is not None:
            self._give_back_a_slot()
            return two_slots_refusal(refused)
        self.b_slot = True
        return None

    def _give_back_a_slot(self) -> None:
        """Run A's slot back unused (its pair could not start): no run held it, so the line's estimate is not told."""
        if self.holds_slot:
            self.holds_slot = False
            generating.release(self.address)

    def _release_b(self) -> None:
        if self.b_slot:
            self.b_slot = False
            generating.release(self.address, held_s=self._held_s())

    def _retake_b_slot(self) -> str | None:
        """Resuming a paused pair: B's slot again (None), or why not (the caller gives A's back)."""
        if self.b is None or self.b_slot or self.b.session.finished:
            return None
        if (refused := generating.refusal(self.slot_limit, self.address)) is not None:
            return two_slots_refusal(refused)
        self.b_slot = True
        return None

    async def _open_b(self) -> None:
        """After A's prefill: B's session and prefill (its own pass: it may be another model's)."""
        if self.b_asked is None:
            return
        loaded_b, params_b, ask, prompt_for = self.b_asked
        self.b_asked = None
        self.b = await asyncio.to_thread(RunB.open, loaded_b, self.session.loaded, self.session.prompt, params_b, ask,
                                         prompt_for)
        await self.send(self.b.session_message())
        session = self.b.session
        await self.send(as_b(await run_on(self.device, session.prefill, owner=self.address, tokens=len(session.ids))))

    async def _step_runs(self) -> None:
        """One step of each run still going (run A alone outside compare mode), in the same scheduler tick, batched
        with other visitors' steps; in compare mode, then what parts them at that step."""
        going = [s for s in self.sessions() if not s.finished]
        scheduler = scheduler_for(self.device)
        payloads = await asyncio.gather(*(scheduler.step(s) for s in going))
        for session, payload in zip(going, payloads):
            await self.send(payload if session is self.session else as_b(payload))
        if self.b is not None and (comparison := self.b.compared(self.session)) is not None:
            await self.send(comparison)

    def _session_for(self, message: dict) -> GenerationSession:
        """The session a detail or retemper asks about: `run` a (the default) or b."""
        which = choice({"run": message.get("run") or "a"}, "run", ("a", "b"))
        if which == "b":
            if self.b is None:
                raise ProtocolError("invalid_value", said("run b needs a compared run (start with compare)"), "run")
            return self.b.session
        return self._require_session()

    def _as_run(self, session: GenerationSession, payload: dict) -> dict:
        return payload if session is self.session else as_b(payload)

    def _fork_plan(self, message: dict, step: int, token: int) -> list[tuple[GenerationSession, int | None]]:
        """(session, forced token or None: re-stepped from its own step) for each run the fork goes back in."""
        which = choice({"run": message.get("run") or "a"}, "run", RUNS)
        if self.b is None:
            if which != "a":
                raise ProtocolError("invalid_value", said("run b needs a compared run (start with compare)"), "run")
            return [(self.session, token)]
        a, b = self.session, self.b.session
        if which == "both" and not self.b.same_tokenizer:
            raise ProtocolError("invalid_value", said("fork both needs one tokenizer: the two models read different "
                                                      "tokens"), "run")
        forced = {"a": (token, None), "b": (None, token), "both": (token, token)}[which]
        plan = [(s, t) for s, t in zip((a, b), forced) if t is not None or step <= s.step_index]
        for session, t in plan:
            if not 1 <= step <= session.step_index:
                raise ProtocolError("out_of_range", said("step must be in [1, %(high)s], got %(got)s",
                                                         high=session.step_index, got=step), "step")
            if t is not None and t >= session.description.vocab_size:
                raise ProtocolError("out_of_range", said("token_id must be in [0, %(high)s]",
                                                         high=session.description.vocab_size - 1), "token_id")
        return plan

    async def _fork_pair(self, plan, step: int) -> None:
        """Each run of the plan back at `step`: forced, or stepped again from its own context; then the compare."""
        for session, token in plan:
            own = session.ids[session.prompt_length + step - 1]
            await run_on(self.device, session.rewind, step, own if token is None else token, owner=self.address)
            again = session.step if token is None else partial(session.forked_step, token)
            await self.send(self._as_run(session, await run_on(self.device, again, owner=self.address)))
        if self.b is not None:
            self.b.rewound_to(step)
            if (comparison := self.b.compared(self.session)) is not None:
                await self.send(comparison)

    async def _close_b(self) -> None:
        if self.b is not None:
            b, self.b = self.b, None
            await run_on(self.device, b.session.close)
        self.b_asked = None
