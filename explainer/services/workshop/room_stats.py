"""What the workshop host's page shows about this server: visitors (presence.py), generations, queue, model,
device memory."""
from __future__ import annotations

import os

from django.conf import settings

from explainer.services.device import model_registry
from explainer.services.workshop.presence import room_census
from explainer.services.admission.capacity import generating
from explainer.services.admission.start_queue import local_queue
from explainer.services.device.executors import queue_depth
from explainer.services.run.remote_line import remote_queue

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


def server_stats() -> dict:
    """This process's numbers, and the visitors of the whole room."""
    found = model_and_device()
    device = found["device"]["name"]
    devices = {device, "loader"} if device != "auto" else {"loader"}
    return {
        "visitors": room_census(),
        "generations": {"active": generating.active, "limit": generating.limit},
        "start_line": len(local_queue) + len(remote_queue),  # starts waiting for a slot (this process's line)
        "queue": {name: queue_depth(name) for name in sorted(devices)},
        **found,
    }


def summed_memory(workers: list[dict]) -> dict:
    """The workers' memory together (each its own process's resident set, or its GPU's allocations)."""
    memories = [w["stats"]["device"]["memory"] for w in workers]
    used = [m["used_bytes"] for m in memories if m.get("used_bytes") is not None]
    return {**memories[0], "used_bytes": sum(used) if used else None, "processes": len(memories)}


def with_workers(local: dict, workers: list[dict], silent: list[str] = ()) -> dict:
    """REDIS_URL mode: generations, queues, model and device are the inference workers' (visitors stay this
    process's sockets); each worker is listed with its own numbers, and the silent ones by name."""
    if not workers:
        return {**local, "workers": [], "workers_silent": list(silent), "generations": {"active": 0, "limit": 0},
                "queue": {}}
    first = workers[0]["stats"]
    return {**local, "model": first["model"], "device": {**first["device"], "memory": summed_memory(workers)},
            "start_line": local["start_line"] + sum(w["stats"].get("start_line", 0) for w in workers),
            "generations": {"active": sum(w["stats"]["generations"]["active"] for w in workers),
                            "limit": sum(w["stats"]["generations"]["limit"] for w in workers)},
            "queue": {f"{w['worker']} {name}": n for w in workers for name, n in w["stats"]["queue"].items()},
            "workers": [{"worker": w["worker"], "sessions": w["sessions"], **w["stats"]} for w in workers],
            "workers_silent": list(silent)}
