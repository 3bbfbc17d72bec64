"""The checks a cluster run makes before it starts anything."""

from __future__ import annotations

import pytest

from vfgym.cluster import ClusterSettings
from vfgym.cluster.batch import worker_args
from vfgym.cluster.connect import check_address
from vfgym.envs.registry import load_environment
from vfgym.inference.server import ModelServer


@pytest.mark.parametrize("address", ["", "  ", None, 6379])
def test_an_address_that_names_no_cluster_is_refused_with_the_forms_that_do(
    address: object,
) -> None:
    with pytest.raises(ValueError, match=r"'auto'.*'local'"):
        check_address(address)


def test_an_address_is_kept_as_given_without_surrounding_blanks() -> None:
    assert check_address(" auto ") == "auto"
    assert check_address("10.0.0.1:6379") == "10.0.0.1:6379"


@pytest.mark.parametrize("field", ["workers", "groups_per_worker"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_worker_counts_must_be_positive_integers(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"{field} must be a positive integer"):
        ClusterSettings(**{field: value})  # type: ignore[arg-type]


async def test_an_environment_without_an_id_cannot_travel_to_workers() -> None:
    env = load_environment("guess-the-number")
    env.env_id = None  # as a hand-built environment has
    async with ModelServer(env.reference_policy) as server:
        client = server.client()
        with pytest.raises(ValueError, match=r"vfgym\.environments"):
            worker_args(env, client, "m", None, True, None)
        env.env_id = "guess-the-number"
        args = worker_args(env, client, "m", {"temperature": 0.5}, True, None)
        await client.close()
    assert args["env_id"] == "guess-the-number"
    assert args["base_url"] == str(client.base_url)
    assert args["sampling_args"] == {"temperature": 0.5}
