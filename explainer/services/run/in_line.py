"""A start's generation slot: taken at once, or waited for in this process's line (start_queue.py), where a
stop leaves the line and a closed socket's place goes back. Mixed into VisitorRun through Opening."""
from __future__ import annotations

import time

from explainer.messages import status_payload
from explainer.services.admission.capacity import generating
from explainer.services.admission.start_queue import LEFT_MESSAGE, LEFT_QUEUE, local_queue, queued_status, run_lengths
from explainer.services.run.control import QUEUED
from inference.wire.said import said


def line_full_reason(limit: int) -> str:
    if not local_queue.bound:
        return said("%(limit)s visitors are generating already; press Play again in a little while", limit=limit)
    return said("%(limit)s visitors are generating already and %(waiting)s starts are waiting in line already; press "
                "Play again in a little while", limit=limit, waiting=local_queue.bound)


class InLine:
    """The slot of a start (VisitorRun's state: address, control, holds_slot, slot_limit, send)."""

    ticket = None  # a place in line while the start waits for a slot
    slot_since = 0.0  # when the slot was taken: how long runs hold one is what a wait in line is estimated from

    def _admit(self, slots: int | None) -> str | None:
        """Take a slot now, or join the line (self.ticket); else the `busy` reason (the address's own cap, or a
        full line). A host's broadcast never waits in line: it takes a free slot ahead of the line, or hears `busy`."""
        self.ticket, self.slot_limit = None, slots
        if self.keep_while_connected:
            if (refused := generating.refusal(slots, self.address)) is None:
                self._took_slot()
            return refused
        if not len(local_queue) and self._try_slot():
            return None
        if (refused := generating.address_refusal(self.address)) is not None:
            return refused
        self.ticket = local_queue.join()
        return None if self.ticket is not None else line_full_reason(self._slots_here())

    def _slots_here(self) -> int:
        return generating.limit if self.slot_limit is None else min(self.slot_limit, generating.limit)

    def _took_slot(self) -> None:
        self.holds_slot, self.slot_since = True, time.monotonic()

    def _try_slot(self) -> bool:
        if generating.refusal(self.slot_limit, self.address) is not None:
            return False
        self._took_slot()
        return True

    async def _wait_in_line(self) -> bool:
        """Wait for this start's turn (True: it holds a slot and prefills next), telling the visitor their place
        as the line moves; False when a stop (or a new start, or the socket's end) took it out of the line."""
        ticket, limit = self.ticket, self._slots_here()

        async def take() -> bool:
            return self._try_slot()

        async def tell(position: int) -> None:
            await self.send(queued_status(position, limit, run_lengths.mean_s))

        try:
            waited = await local_queue.wait_turn(ticket, take, tell, lambda: self.control.state != QUEUED)
        finally:
            local_queue.leave(ticket)
            self.ticket = None
        return waited and self.control.dequeued()

    def _leave_line(self) -> None:
        """A stop read while the start waits in line: its wait ends now."""
        if self.ticket is not None:
            self.ticket.wake()

    async def _left_line(self) -> None:
        """The start left the line before its turn (a stop): idle again, and the page is told so."""
        self.control.reset()
        await self._release()  # a stop that came as its turn came: the slot it just took goes back
        self.opened.set()
        await self.send(left_line_status())
        await self._flush()

    def _held_s(self) -> float:
        return time.monotonic() - self.slot_since


def left_line_status() -> dict:
    return status_payload("idle", LEFT_MESSAGE, run_state="idle", reason=LEFT_QUEUE)
