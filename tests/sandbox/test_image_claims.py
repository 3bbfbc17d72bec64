"""Freeing stale sandbox images on a daemon that several checkouts share.

Made against a real Docker Engine with tiny label-only images in a repository of
the test's own, so no real sandbox image is touched.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator

import docker
import pytest

from vfgym.sandbox.image_claims import (
    CHECKOUT_LABEL,
    CONTEXT_LABEL,
    checkout_id,
    claim_image,
    claim_tag,
    remove_stale_images,
)

ME, NEIGHBOUR = "aaaaaaaaaaaa", "bbbbbbbbbbbb"


@pytest.fixture
def repository(docker_client: docker.DockerClient) -> Iterator[str]:
    """A repository of this test's own, emptied (with its containers) afterwards."""
    name = f"vfgym-test-claims-{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        for image in docker_client.api.images(name=name):
            for container in docker_client.api.containers(
                all=True, quiet=True, filters={"ancestor": image["Id"]}
            ):
                docker_client.api.remove_container(container["Id"], force=True)
            docker_client.api.remove_image(image["Id"], force=True)


def make_image(
    client: docker.DockerClient, repository: str, context: str, checkout: str | None
) -> str:
    """A layer-less image carrying the labels a sandbox build would give it."""
    labels = {CONTEXT_LABEL: context, **({CHECKOUT_LABEL: checkout} if checkout else {})}
    tag = f"{repository}:{context[:12]}"
    dockerfile = io.BytesIO(b"FROM scratch\nLABEL vfgym.test=claims\n")
    built = client.api.build(
        fileobj=dockerfile, tag=tag, labels=labels, decode=True, rm=True, forcerm=True
    )  # rm: no intermediate container of the build stays behind
    for chunk in built:
        assert "error" not in chunk, chunk
    return tag


def tags_of(client: docker.DockerClient, repository: str) -> set[str]:
    return {tag for image in client.api.images(name=repository) for tag in image["RepoTags"]}


def test_a_rebuild_frees_only_what_this_checkout_made_and_nobody_uses(
    docker_client: docker.DockerClient, repository: str
) -> None:
    client = docker_client
    stale = make_image(client, repository, "c1-stale-of-mine", ME)
    shared = make_image(client, repository, "c2-mine-but-neighbours", ME)
    claim_image(client, shared, repository, NEIGHBOUR)
    theirs = make_image(client, repository, "c3-the-neighbours", NEIGHBOUR)
    legacy = make_image(client, repository, "c4-from-before-labels", None)
    in_use = make_image(client, repository, "c5-a-container-uses", ME)
    client.api.create_container(in_use, command=["/nothing"])
    current = make_image(client, repository, "c6-current", ME)
    claim_image(client, stale, repository, ME)  # my claim as it was before the rebuild
    claim_image(client, current, repository, ME)  # moved onto the new image

    logs: list[str] = []
    removed = remove_stale_images(client, repository, "c6-current", ME, logs.append)

    assert removed == [stale], logs
    left = tags_of(client, repository)
    assert stale not in left
    assert {shared, theirs, legacy, in_use, current} <= left
    assert f"{repository}:{claim_tag(ME)}" in left  # still on the current image
    assert f"{repository}:{claim_tag(NEIGHBOUR)}" in left
    assert any("another checkout uses it" in line and shared in line for line in logs), logs
    assert any("a container was made from it" in line for line in logs), logs


def test_the_neighbours_rebuild_leaves_my_image_alone(
    docker_client: docker.DockerClient, repository: str
) -> None:
    mine = make_image(docker_client, repository, "c1-mine", ME)
    claim_image(docker_client, mine, repository, ME)
    removed = remove_stale_images(docker_client, repository, "c2-theirs", NEIGHBOUR, print)
    assert removed == []
    assert mine in tags_of(docker_client, repository)


def test_checkout_ids_tell_checkouts_apart_and_stay_put() -> None:
    here = checkout_id()
    assert here == checkout_id() and len(here) == 12
    assert checkout_id("host:/work/a/sandboxes") != checkout_id("host:/work/b/sandboxes")
    assert checkout_id("one:/same/path") != checkout_id("two:/same/path")
