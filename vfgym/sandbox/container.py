"""How a hardened sandbox container is specified: every limit, in one place."""

from __future__ import annotations

from typing import Any

import docker
from docker.types import LogConfig, Ulimit

from vfgym.sandbox.config import SandboxConfig
from vfgym.sandbox.seccomp import security_option

# gVisor's kernel (the Sentry) runs inside the container's pids cgroup, and on its
# ptrace platform every sandboxed task costs it many host threads and stub
# processes (about 2,200 for a 96-task fork bomb, measured). A cgroup limit sized
# for user processes makes it panic, so under runsc the cgroup only bounds the
# Sentry and the process limit is enforced inside the sandbox with RLIMIT_NPROC,
# which gVisor counts per sandbox.
RUNSC_HOST_PIDS_PER_TASK = 64
RUNSC_HOST_PIDS_BASE = 1024

# A closed TCP connection waits in TIME_WAIT for a minute, keeping its port (a plain
# bind() of it fails) and showing it in /proc/net/tcp: the next user of a pooled
# container would see both. With no TIME_WAIT buckets the kernel frees a closed
# connection at once; on loopback, the only network a sandbox has by default, TIME_WAIT
# guards against nothing. gVisor ignores the setting (its reset copes otherwise).
NO_TIME_WAIT = {"net.ipv4.tcp_max_tw_buckets": "0"}


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
    pids_limit = config.pids
    sysctls = dict(NO_TIME_WAIT)
    ulimits = [
        Ulimit(name="nofile", soft=config.max_open_files, hard=config.max_open_files),
        Ulimit(name="fsize", soft=config.max_file_size, hard=config.max_file_size),
        Ulimit(name="core", soft=0, hard=0),
    ]
    if config.runtime.startswith("runsc"):  # also variants such as "runsc-debug"
        pids_limit = RUNSC_HOST_PIDS_BASE + config.pids * RUNSC_HOST_PIDS_PER_TASK
        ulimits.append(Ulimit(name="nproc", soft=config.pids, hard=config.pids))
        sysctls = {}
    workspace_opts = _tmpfs_options(
        config.workspace_size,  # type: ignore[arg-type]
        f"uid={uid},gid={gid},mode=0755",
    )
    host_config = client.api.create_host_config(
        network_mode="bridge" if config.network else "none",
        mem_limit=config.memory,
        memswap_limit=config.memory,  # equal to mem_limit: no swap
        nano_cpus=int(config.cpus * 1e9),
        pids_limit=pids_limit,
        read_only=True,
        tmpfs={
            config.workspace: workspace_opts,
            "/tmp": _tmpfs_options(config.tmp_size, "mode=1777"),  # type: ignore[arg-type]
        },
        shm_size=config.shm_size,
        ipc_mode="private",
        sysctls=sysctls or None,
        cap_drop=["ALL"],
        # vfgym's own seccomp policy, not the daemon's default (see seccomp.py); gVisor
        # gets the same denials from the runner's filter.
        security_opt=["no-new-privileges", security_option()],
        init=False,  # the runner is PID 1: it reaps zombies and cannot be killed from inside
        ulimits=ulimits,
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
