"""One executor per device: model steps run off the event loop, one at a time per device."""
import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

_lock = threading.Lock()
_executors: dict[str, ThreadPoolExecutor] = {}


def executor_for(device: str) -> ThreadPoolExecutor:
    """A single worker per device: visitors' steps interleave step by step instead of fighting for cores."""
    with _lock:
        if device not in _executors:
            _executors[device] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"model-{device}")
        return _executors[device]


async def run_on(device: str, fn, *args):
    """Run fn(*args) on the device's executor and hand the result back to the event loop."""
    return await asyncio.get_running_loop().run_in_executor(executor_for(device), fn, *args)


def queue_depth(device: str) -> int:
    """Model calls waiting for the device (not the one running): the host page's queue."""
    with _lock:
        executor = _executors.get(device)
    # ThreadPoolExecutor keeps its backlog in _work_queue; stdlib has no public accessor for it.
    return executor._work_queue.qsize() if executor is not None else 0
