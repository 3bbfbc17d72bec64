"""How a hardened sandbox container is specified: every limit, in one place."""

from __future__ import annotations

from typing import Any

import docker
from docker.types import LogConfig, Ulimit

from vfgym.sandbox.config import SandboxConfig


def _tmpfs_options(size: int, extra: str) -> str:
    return f"rw,nosuid,nodev,size={size},{extra}"


def create_kwargs(
    client: docker.DockerClient, config: SandboxConfig, image: str, labels: dict[str, str]
) -> dict[str, Any]:
    """Arguments for `APIClient.create_container` of one sandbox.

    The container's stdin stays open for the runner's requests and closes when
    the host's attach stream goes away (`stdin_once`), which makes the runner
    exit; `auto_remove` then deletes the container. A host process that dies
    therefore leaves nothing running; labels catch whatever remains.
    """
    uid, _, gid = config.user.partition(":")
    gid = gid or uid
    workspace_opts = _tmpfs_options(
        config.workspace_size,  # type: ignore[arg-type]
        f"uid={uid},gid={gid},mode=0755",
    )
    host_config = client.api.create_host_config(
        network_mode="bridge" if config.network else "none",
        mem_limit=config.memory,
        memswap_limit=config.memory,  # equal to mem_limit: no swap
        nano_cpus=int(config.cpus * 1e9),
        pids_limit=config.pids,
        read_only=True,
        tmpfs={
            config.workspace: workspace_opts,
            "/tmp": _tmpfs_options(config.tmp_size, "mode=1777"),  # type: ignore[arg-type]
        },
        shm_size=config.shm_size,
        ipc_mode="private",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        init=False,  # the runner is PID 1: it reaps zombies and cannot be killed from inside
        ulimits=[
            Ulimit(name="nofile", soft=config.max_open_files, hard=config.max_open_files),
            Ulimit(name="fsize", soft=config.max_file_size, hard=config.max_file_size),
            Ulimit(name="core", soft=0, hard=0),
        ],
        log_config=LogConfig(type="none"),
        runtime=config.runtime,
        auto_remove=True,
    )
    return {
        "image": image,
        "user": config.user,
        "working_dir": config.workspace,
        "stdin_open": True,  # with detach=False the SDK also sets StdinOnce
        "tty": False,
        "network_disabled": not config.network,
        "hostname": "sandbox",
        "environment": {"VFGYM_WORKSPACE": config.workspace},
        "labels": labels,
        "host_config": host_config,
    }
