"""What the workshop host's page shows about this server: visitors, generations, queue, model, device memory.

Visitors are counted in the whole room: every Daphne process writes its own census into a slot of the
shared cache (Redis with REDIS_URL) every second, and the host page sums the slots that are fresh.
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache import cache

from explainer.services import model_registry, workshop
from explainer.services.capacity import generating
from explainer.services.executors import queue_depth

log = logging.getLogger(__name__)
CENSUS_SLOTS, CENSUS_EVERY_S, CENSUS_TTL_S = 64, 1.0, 5  # Daphne processes counted, how often, kept how long


def device_memory(device: str) -> dict:
    """CUDA: the caching allocator's view of the GPU; CPU: this process's resident memory and the RAM."""
    if device.startswith("cuda"):
        import torch

        index = torch.device(device).index or 0
        return {"kind": "cuda", "used_bytes": torch.cuda.memory_allocated(index),
                "reserved_bytes": torch.cuda.memory_reserved(index),
                "total_bytes": torch.cuda.get_device_properties(index).total_memory}
    return {"kind": "cpu", "used_bytes": resident_bytes(), "reserved_bytes": None, "total_bytes": total_ram_bytes()}


def resident_bytes() -> int | None:
    """This process's resident set (Linux /proc/self/statm, second field, in pages)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def total_ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def model_and_device() -> dict:
    """The model's description once loaded (the host page never loads it by itself)."""
    if not model_registry.is_loaded():
        return {"model": {"spec": settings.EXPLAINER_MODEL, "loaded": False},
                "device": {"name": settings.EXPLAINER_DEVICE, "memory": device_memory("cpu")}}
    description = model_registry.get_model().description.to_dict()
    device = description["device"]
    return {"model": {**description, "loaded": True}, "device": {"name": device, "memory": device_memory(device)}}


class Census:
    """This process's slot in the shared cache: claimed once (cache.add is atomic), renewed every second."""

    def __init__(self):
        self.slot: int | None = None
        self.me = f"{os.getpid()}-{secrets.token_hex(3)}"
        self.task: asyncio.Task | None = None

    def ensure_running(self) -> None:
        """Start publishing from this process's event loop (the first workshop socket or host page)."""
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.task = loop.create_task(self._publish_forever())

    async def _publish_forever(self) -> None:
        while True:
            try:
                await sync_to_async(self.publish, thread_sensitive=False)()
            except Exception as exc:  # a Redis hiccup: the room's count is stale for a second
                log.warning("census not published: %s", exc)
            await asyncio.sleep(CENSUS_EVERY_S)

    def publish(self) -> None:
        entry = {"process": self.me, **workshop.census()}
        if self.slot is not None and (cache.get(f"census:{self.slot}") or {}).get("process") == self.me:
            cache.set(f"census:{self.slot}", entry, CENSUS_TTL_S)
            return
        self.slot = next((i for i in range(CENSUS_SLOTS) if cache.add(f"census:{i}", entry, CENSUS_TTL_S)), None)


census_publisher = Census()


def room_census() -> dict:
    """Connected and following visitors over every Daphne process whose census is fresh, and this one's."""
    here = workshop.census()
    entries = [e for e in cache.get_many([f"census:{i}" for i in range(CENSUS_SLOTS)]).values() if e]
    entries = [e for e in entries if e["process"] != census_publisher.me] + [{"process": census_publisher.me, **here}]
    return {"connected": sum(e["connected"] for e in entries), "following": sum(e["following"] for e in entries),
            "processes": len(entries), "this_process": here}


def server_stats() -> dict:
    """This process's numbers, and the visitors of the whole room."""
    found = model_and_device()
    device = found["device"]["name"]
    devices = {device, "loader"} if device != "auto" else {"loader"}
    return {
        "visitors": room_census(),
        "generations": {"active": generating.active, "limit": generating.limit},
        "queue": {name: queue_depth(name) for name in sorted(devices)},
        **found,
    }


def with_workers(local: dict, workers: list[dict], silent: list[str] = ()) -> dict:
    """REDIS_URL mode: generations, queues, model and device are the inference workers' (visitors stay this
    process's sockets); each worker is listed with its own numbers, and the silent ones by name."""
    if not workers:
        return {**local, "workers": [], "workers_silent": list(silent), "generations": {"active": 0, "limit": 0},
                "queue": {}}
    first = workers[0]["stats"]
    return {**local, "model": first["model"], "device": first["device"],
            "generations": {"active": sum(w["stats"]["generations"]["active"] for w in workers),
                            "limit": sum(w["stats"]["generations"]["limit"] for w in workers)},
            "queue": {f"{w['worker']} {name}": n for w in workers for name, n in w["stats"]["queue"].items()},
            "workers": [{"worker": w["worker"], "sessions": w["sessions"], **w["stats"]} for w in workers],
            "workers_silent": list(silent)}
