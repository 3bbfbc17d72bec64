"""Serve the scripted policy with vfgym's `ModelServer` until stdin closes.

Prints one JSON line with the base URL once listening. Runs in vfgym's venv;
both frameworks' workers reach it over loopback HTTP with the real openai client.
"""

from __future__ import annotations

import asyncio
import json
import sys

from scripted_model import http_policy

from vfgym.inference.server import ModelServer


async def main() -> None:
    server = ModelServer(http_policy, record_requests=False, model_name="scripted")
    async with server:
        print(json.dumps({"base_url": server.base_url}), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


if __name__ == "__main__":
    asyncio.run(main())
