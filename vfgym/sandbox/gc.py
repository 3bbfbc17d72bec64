"""Finding and removing sandbox containers whose owner process is gone."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import docker
from docker.errors import APIError, NotFound

from vfgym.sandbox.labels import LABEL, OWNER_LABEL, owner_is_alive


@dataclass(frozen=True)
class Orphan:
    container_id: str
    owner: str
    status: str


def find_orphans(client: docker.DockerClient, include_foreign: bool = False) -> list[Orphan]:
    """Sandbox containers whose creating process has died.

    Containers made on another host (a shared remote Docker endpoint), or in
    another pid namespace (a container sharing the hostname), cannot be judged
    from here; they count as orphans only with `include_foreign`.
    """
    orphans = []
    for info in client.api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        owner = (info.get("Labels") or {}).get(OWNER_LABEL, "")
        alive = owner_is_alive(owner)
        if alive is False or (alive is None and include_foreign):
            orphans.append(Orphan(info["Id"], owner, info.get("Status", "")))
    return orphans


def remove_orphans(client: docker.DockerClient, include_foreign: bool = False) -> list[Orphan]:
    """Force-remove every orphan (see `find_orphans`); returns what was removed."""
    removed = []
    for orphan in find_orphans(client, include_foreign):
        with contextlib.suppress(NotFound):
            try:
                client.api.remove_container(orphan.container_id, force=True)
            except APIError as exc:
                if exc.status_code != 409:  # 409: auto-remove already under way
                    raise
        removed.append(orphan)
    return removed


def sandbox_containers(client: docker.DockerClient, label: str | None = None) -> list[str]:
    """Ids of all sandbox containers, or of those carrying `label` ("key=value")."""
    filters = {"label": [f"{LABEL}=1", *([label] if label else [])]}
    return [info["Id"] for info in client.api.containers(all=True, filters=filters)]
