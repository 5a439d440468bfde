"""Close codes as docs/protocol.md says (issue 16, finding 5), on a real Daphne with make run's flags:
1009 for a frame past Daphne's size limit, 1001 when the server shuts down (SIGTERM)."""
import asyncio
import json
import signal

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from tests.explainer.live_server import daphne_flag, start_daphne
from tests.inference.conftest import STORIES


async def close_code_seen(ws, timeout: float = 15) -> int | None:
    """Read until the server closes; the code in its close frame (None: the TCP connection just dropped, 1006)."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                await ws.recv()
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None
    pytest.fail("the server did not close the socket")


async def test_a_frame_past_daphnes_limit_closes_with_1009(tmp_path):
    server = await asyncio.to_thread(start_daphne, tmp_path, str(STORIES))
    try:
        async with ws_connect(server.ws_url, origin=server.origin, proxy=None, max_size=None) as ws:
            assert json.loads(await ws.recv())["state"] == "ready"
            await ws.send("x" * (int(daphne_flag("--websocket-max-frame-size")) + 1))
            assert await close_code_seen(ws) == 1009
        async with ws_connect(server.ws_url, origin=server.origin, proxy=None) as ws:  # the server goes on
            assert json.loads(await ws.recv())["state"] == "ready"
        assert "Traceback" not in server.log(), server.log()[-3000:]
    finally:
        await asyncio.to_thread(server.stop)


async def test_shutdown_closes_open_sockets_with_1001(tmp_path):
    server = await asyncio.to_thread(start_daphne, tmp_path, str(STORIES))
    try:
        async with ws_connect(server.ws_url, origin=server.origin, proxy=None) as ws:
            assert json.loads(await ws.recv())["state"] == "ready"
            await ws.send(json.dumps({"type": "start", "text": "<t403> <t407>", "params": {"seed": 1, "max_new_tokens": 200}}))
            await ws.recv()
            server.proc.send_signal(signal.SIGTERM)
            assert await close_code_seen(ws) == 1001
        assert await asyncio.to_thread(server.proc.wait, 20) == 0, server.log()[-3000:]
    finally:
        await asyncio.to_thread(server.stop)
