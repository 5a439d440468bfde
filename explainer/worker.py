"""Inference workers (REDIS_URL mode): placeholder until the worker consumer lands."""


async def worker_router(scope, receive, send):
    raise ValueError(f"no worker consumer for channel {scope.get('channel')!r}")
