"""A run's answers on demand: detail, retemper and measure, refused with `busy` rather than queued."""
from __future__ import annotations

import asyncio

from django.conf import settings

from explainer.protocol import DETAIL_WHATS, MEASURES, choice, integer, number
from explainer.services.device import measurements
from explainer.services.device import model_registry
from explainer.services.device.executors import queue_depth, run_on
from explainer.services.run.errors import refusal
from explainer.services.run.control import HELD, status
from inference.ondemand import detail, retemper
from explainer.messages import busy_payload, status_payload
from inference.wire.builders import serving_progress_payload
from inference.wire.said import said, told

READER_PAUSED = status(HELD)


class OnDemandAnswers:
    """Mixed into VisitorRun (explainer/services/run/visitor_run.py): its session, device, window, address and send."""

    async def _busy(self, device: str | None = None, what: str | None = None) -> bool:
        """Refuse a request for a payload with `busy` while the client is behind on reading, or (given a
        device) while more than EXPLAINER_MAX_DEVICE_QUEUE model calls wait for it: nothing is queued. `what`:
        the measurement refused, so its diagram asks again by itself."""
        if self.window.full:
            reason = READER_PAUSED["message"]
        elif device is not None and (waiting := queue_depth(device)) > settings.EXPLAINER_MAX_DEVICE_QUEUE:
            reason = said("%(waiting)s model calls are waiting for the device", waiting=waiting)
        else:
            return False
        await self.send(busy_payload(reason, 1, what))
        return True

    async def detail(self, message: dict) -> None:
        await self.after_opening()
        session = self._session_for(message)  # run a, or b in compare mode
        what = choice(message, "what", DETAIL_WHATS)
        args = {k: integer(message, k, 0, required=False) for k in ("step", "layer", "head", "position")}
        if await self._busy(self.device):
            return
        await self.send(self._as_run(session, await run_on(self.device, lambda: detail(session, what, **args))))

    async def retemper(self, message: dict) -> None:
        await self.after_opening()
        session = self._session_for(message)
        step = integer(message, "step", 1, session.step_index)
        changes = {k: number(message, k) for k in ("temperature", "top_p", "min_p")}
        changes["top_k"] = integer(message, "top_k", 0, required=False)
        if await self._busy(self.device):
            return
        await self.send(self._as_run(session, await run_on(self.device, lambda: retemper(session, step, **changes))))

    async def measure(self, message: dict) -> None:
        """A serving-view measurement on this server's model: the visitor's prompt when there is a run, unless
        `prompt` is "article". It runs as its own task, so the socket's next verbs (a start, a stop) are read
        while it measures; its `serving_progress` frames say what it is measuring now."""
        what = choice(message, "what", MEASURES)
        await self.after_opening()
        own = choice({"prompt": message.get("prompt") or "yours"}, "prompt", ("yours", "article")) == "yours"
        if not model_registry.is_loaded():
            await self.send(LOADING)
        device = self.device if self.session else (await run_on("loader", model_registry.get_model)).description.device
        if await self._busy(device, what):
            return
        self._keep(asyncio.create_task(self._measure(what, message, self.session if own else None, device)))

    async def _measure(self, what: str, message: dict, session, device: str) -> None:
        loop = asyncio.get_running_loop()

        def progress(done: int, total: int, label: str) -> None:  # called on the model thread
            frame = serving_progress_payload(what, done, total, label)
            loop.call_soon_threadsafe(lambda: self._keep(asyncio.ensure_future(self.send(frame))))
        try:
            reply = await measurements.serve(what, message, session, device, self.address, progress)
        except measurements.MeasureBusy as busy:
            reply = busy_payload(told(busy), busy.retry_after_s, what)
        except Exception as exc:  # a refused field or a model failure: this measurement's answer only
            reply = refusal(exc)
        await self.send(reply)

    def _keep(self, task: asyncio.Future) -> None:
        """Hold a measurement's task (or a progress send) until it ends: the loop holds tasks only weakly."""
        self.measuring.add(task)
        task.add_done_callback(self.measuring.discard)


LOADING = status_payload("loading", said("Loading the model…"))
