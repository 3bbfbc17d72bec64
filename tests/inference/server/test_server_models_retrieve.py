"""GET /v1/models/{id}: `client.models.retrieve(name)` of the real openai client, sync and async.

OpenAI answers a served id with the model object and an unknown one with a 404 whose
error has type "invalid_request_error" and code "model_not_found"; code that checks a
model exists before a run must see the same here.
"""

from __future__ import annotations

import asyncio

import aiohttp
import openai
import pytest

from vfgym.inference.server import ModelServer


def yes(messages: object) -> str:
    return "yes"


#: Names as served in practice: Hugging Face ids with "/", a LoRA-style suffix.
MAPPED = {"Qwen/Qwen2.5-0.5B-Instruct": yes, "org/team/model:lora-1": yes, "plain": yes}


def assert_model_object(model: openai.types.Model, name: str, server: ModelServer) -> None:
    assert model.id == name
    assert model.object == "model"
    assert model.owned_by == "vfgym"
    assert isinstance(model.created, int) and model.created > 0
    assert model.model_extra["max_model_len"] == server.max_model_len


def assert_model_not_found(exc: openai.NotFoundError, name: str) -> None:
    assert exc.status_code == 404
    error = exc.body
    assert error["message"].startswith(f"The model `{name}` does not exist")
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "model_not_found"
    assert error["param"] == "model"
    # and says what to use instead
    assert "Qwen/Qwen2.5-0.5B-Instruct" in error["message"]


async def test_async_client_retrieves_each_served_model_including_ids_with_slashes() -> None:
    async with ModelServer(MAPPED, max_model_len=4096) as server, server.client() as client:
        for name in MAPPED:
            assert_model_object(await client.models.retrieve(name), name, server)


async def test_retrieved_model_equals_its_entry_in_the_list() -> None:
    async with ModelServer(MAPPED) as server, server.client() as client:
        listed = {m.id: m for m in (await client.models.list()).data}
        for name in MAPPED:
            assert await client.models.retrieve(name) == listed[name]


async def test_async_client_gets_openai_shaped_404_for_an_unknown_model() -> None:
    async with ModelServer(MAPPED) as server, server.client() as client:
        for name in ("gpt-4o", "Qwen/Qwen2.5-7B-Instruct"):
            with pytest.raises(openai.NotFoundError) as caught:
                await client.models.retrieve(name)
            assert_model_not_found(caught.value, name)


def test_sync_client_retrieves_and_gets_404_from_a_threaded_server() -> None:
    with ModelServer(MAPPED) as server, server.sync_client() as client:
        name = "Qwen/Qwen2.5-0.5B-Instruct"
        assert_model_object(client.models.retrieve(name), name, server)
        with pytest.raises(openai.NotFoundError) as caught:
            client.models.retrieve("org/missing")
        assert_model_not_found(caught.value, "org/missing")


async def test_single_policy_server_retrieves_its_listed_name_and_any_name_it_answers() -> None:
    """A single policy answers chats for any model name, so retrieving any name succeeds
    too: a client that checks its configured model first must not fail where its chats
    would work."""
    async with ModelServer(yes, model_name="tiny/judge") as server, server.client() as client:
        assert_model_object(await client.models.retrieve("tiny/judge"), "tiny/judge", server)
        other = await client.models.retrieve("gpt-4.1-nano")
        assert_model_object(other, "gpt-4.1-nano", server)
        reply = await client.chat.completions.create(
            model="gpt-4.1-nano", messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.choices[0].message.content == "yes"


async def test_unencoded_slash_in_the_path_is_served_too() -> None:
    """curl and other clients send "/" as is, not as %2F."""
    async with ModelServer(MAPPED) as server, aiohttp.ClientSession() as http:
        async with http.get(f"{server.base_url}/models/org/team/model:lora-1") as response:
            assert response.status == 200
            assert (await response.json())["id"] == "org/team/model:lora-1"


async def test_concurrent_retrieves_from_many_clients() -> None:
    async with ModelServer(MAPPED) as server, server.client() as client:
        names = list(MAPPED) * 20
        models = await asyncio.gather(*(client.models.retrieve(n) for n in names))
        assert [m.id for m in models] == names
