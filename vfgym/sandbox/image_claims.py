"""Which checkout made a sandbox image, which checkouts use it, and which are stale.

One Docker daemon often serves several checkouts of vfgym (worktrees, CI jobs,
colleagues on a shared machine), each building the image of its own runner. A
rebuild should free the images it made obsolete, but never one that another
checkout still runs its sandboxes on. Two marks make that decidable:

* the label `vfgym.sandbox.checkout`, set when an image is built: who made it;
* a claim tag, `<repository>:checkout-<id>`, that each checkout moves onto the
  image it uses whenever it builds or finds its image up to date: who uses it.

A rebuild removes only images that this checkout made, that are not of the
current build context, that no other checkout claims and that no container was
made from. Images made before these marks existed carry no checkout label and are
never removed automatically. A checkout that is deleted keeps its claim; release
it with `docker rmi <repository>:checkout-<id>` (the id is in `docker images`).
"""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Callable
from importlib import resources

import docker
from docker.errors import APIError

#: Label naming the checkout that built an image (see checkout_id).
CHECKOUT_LABEL = "vfgym.sandbox.checkout"
#: Label with the same checkout in words (host and path), for people reading `docker inspect`.
CHECKOUT_PATH_LABEL = "vfgym.sandbox.checkout-path"
CONTEXT_LABEL = "vfgym.sandbox.context"
CLAIM_PREFIX = "checkout-"


def checkout_location() -> str:
    """This installation of vfgym as `host:path` (the path of its sandbox build contexts)."""
    root = resources.files("vfgym.sandboxes")
    return f"{socket.gethostname()}:{root}"


def checkout_id(location: str | None = None) -> str:
    """A short id for a checkout, stable for as long as it stays where it is.

    The host name is part of it because a daemon reached over the network may
    serve checkouts at the same path on different machines.
    """
    location = checkout_location() if location is None else location
    return hashlib.sha256(location.encode()).hexdigest()[:12]


def claim_tag(checkout: str) -> str:
    """The tag by which `checkout` claims the image it uses."""
    return f"{CLAIM_PREFIX}{checkout}"


def claim_image(client: docker.DockerClient, image: str, repository: str, checkout: str) -> None:
    """Mark `image` as the one `checkout` uses (moving its claim off any earlier image)."""
    client.api.tag(image, repository, claim_tag(checkout), force=True)


def remove_stale_images(
    client: docker.DockerClient,
    repository: str,
    current_context: str,
    checkout: str,
    log: Callable[[str], None],
) -> list[str]:
    """Remove the images of `repository` that `checkout` made and nobody uses any more.

    Kept: images of `current_context`, images another checkout made (or that carry
    no checkout label), images another checkout claims, and images a container
    (running or not) was made from. Returns the tags removed.
    """
    removed: list[str] = []
    mine = f"{repository}:{claim_tag(checkout)}"
    for image in client.api.images(name=repository):
        labels = image.get("Labels") or {}
        if labels.get(CHECKOUT_LABEL) != checkout or labels.get(CONTEXT_LABEL) == current_context:
            continue
        tags = [tag for tag in image.get("RepoTags") or [] if tag.startswith(f"{repository}:")]
        claims = [tag for tag in tags if tag.split(":", 1)[1].startswith(CLAIM_PREFIX)]
        others = [tag for tag in claims if tag != mine]
        if others:
            log(f"kept {tags[0]}: another checkout uses it ({', '.join(others)})")
            continue
        if client.api.containers(all=True, quiet=True, filters={"ancestor": image["Id"]}):
            log(f"kept {tags[0]}: a container was made from it")
            continue
        for tag in tags:
            try:
                client.api.remove_image(tag)
            except APIError as exc:
                log(f"could not remove stale image {tag}: {exc.explanation or exc}")
                continue
            removed.append(tag)
            log(f"removed stale image {tag}")
    return removed
