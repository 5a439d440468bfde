"""A run's answers on demand: detail, retemper and measure, refused with `busy` rather than queued."""
from __future__ import annotations

from django.conf import settings

from explainer.protocol import DETAIL_WHATS, MEASURES, choice, integer, number
from explainer.services import measurements, model_registry
from explainer.services.executors import queue_depth, run_on
from explainer.services.run_state import HELD, status
from inference.ondemand import detail, retemper
from inference.payload_builder import busy_payload, status_payload

READER_PAUSED = status(HELD)


class OnDemandAnswers:
    """Mixed into VisitorRun (explainer/services/sessions.py): its session, device, window, address and send."""

    async def _busy(self, device: str | None = None) -> bool:
        """Refuse a request for a payload with `busy` while the client is behind on reading, or (given a
        device) while more than EXPLAINER_MAX_DEVICE_QUEUE model calls wait for it: nothing is queued."""
        if self.window.full:
            reason = READER_PAUSED["message"]
        elif device is not None and (waiting := queue_depth(device)) > settings.EXPLAINER_MAX_DEVICE_QUEUE:
            reason = f"{waiting} model calls are waiting for the device"
        else:
            return False
        await self.send(busy_payload(reason, 1))
        return True

    async def detail(self, message: dict) -> None:
        session = self._require_session()
        what = choice(message, "what", DETAIL_WHATS)
        args = {k: integer(message, k, 0, required=False) for k in ("step", "layer", "head", "position")}
        if await self._busy(self.device):
            return
        await self.send(await run_on(self.device, lambda: detail(session, what, **args)))

    async def retemper(self, message: dict) -> None:
        session = self._require_session()
        step = integer(message, "step", 1, session.step_index)
        changes = {k: number(message, k) for k in ("temperature", "top_p", "min_p")}
        changes["top_k"] = integer(message, "top_k", 0, required=False)
        if await self._busy(self.device):
            return
        await self.send(await run_on(self.device, lambda: retemper(session, step, **changes)))

    async def measure(self, message: dict) -> None:
        """A serving-view measurement on this server's model (the visitor's prompt when there is a run)."""
        what = choice(message, "what", MEASURES)
        if not model_registry.is_loaded():
            await self.send(LOADING)
        device = self.device if self.session else (await run_on("loader", model_registry.get_model)).description.device
        if await self._busy(device):
            return
        try:
            reply = await measurements.serve(what, message, self.session, device, self.address)
        except measurements.MeasureBusy as busy:
            reply = busy_payload(str(busy), busy.retry_after_s)
        await self.send(reply)


LOADING = status_payload("loading", "Loading the model…")
