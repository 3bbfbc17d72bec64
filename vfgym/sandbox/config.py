"""The limits and knobs of a sandbox, safe by default."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
KNOWN_RUNTIMES = ("runc", "runsc")
#: Docker refuses fewer CPUs than this; below it the container never starts.
MIN_CPUS = 0.01
#: The runner does not start in less memory (Docker's own floor is 6 MiB).
MIN_MEMORY = 16 * 1024**2
#: The kernel's largest pid_max: a higher pids limit makes the container start fail.
MAX_PIDS = 4_194_304
_USER = re.compile(r"\d+(:\d+)?")


def parse_size(value: int | str, what: str) -> int:
    """Bytes from an int or a Docker-style size such as "512m" or "1g"."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a size such as 536870912 or '512m', not {value!r}")
    if isinstance(value, int):
        number = value
    elif not isinstance(value, str):
        raise ValueError(
            f"{what}={value!r}: give bytes as an int, or a string with a unit such as '512m' "
            "or '1.5g'"
        )
    else:
        match = _SIZE.match(str(value))
        if not match:
            raise ValueError(
                f"{what}={value!r} is not a size; use bytes (an int) or a number with k, m or g "
                "such as '512m'"
            )
        number = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if number <= 0:
        raise ValueError(f"{what} must be positive, got {value!r}")
    return number


@dataclass(frozen=True)
class SandboxConfig:
    """Everything that decides what a sandbox may do; every limit is on by default.

    Sizes accept bytes or Docker-style strings ("512m"). `image=None` means the
    default image built by `python -m vfgym.sandbox build` for this version of
    vfgym. `docker_host` picks the Docker endpoint (e.g. "unix:///var/run/docker.sock"
    or "tcp://10.0.0.5:2375"); None means the usual `DOCKER_HOST` environment variable.
    `docker_hosts` names several endpoints for one pool (then `docker_host` stays None):
    each new sandbox goes to the reachable host with the most free capacity, at most
    `host_limit` per host when set. A pool made without either reads the
    comma-separated `VFGYM_DOCKER_HOSTS`.
    """

    image: str | None = None
    runtime: str = "runc"
    memory: int | str = "512m"
    cpus: float = 1.0
    pids: int = 128
    timeout: float = 10.0
    workspace_size: int | str = "128m"
    tmp_size: int | str = "64m"
    shm_size: int | str = "64m"
    max_file_size: int | str = "64m"
    max_open_files: int = 1024
    output_limit: int = 64 * 1024
    max_read_bytes: int | str = "16m"
    network: bool = False
    user: str = "10001:10001"
    workspace: str = "/workspace"
    docker_host: str | None = None
    docker_hosts: tuple[str, ...] = ()
    host_limit: int | None = None
    start_timeout: float = 60.0
    max_uses: int = 500
    labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in (
            "memory",
            "workspace_size",
            "tmp_size",
            "shm_size",
            "max_file_size",
            "max_read_bytes",
        ):
            object.__setattr__(self, name, parse_size(getattr(self, name), name))
        cpus = self.cpus
        if not isinstance(cpus, int | float) or isinstance(cpus, bool) or not 0 < cpus < math.inf:
            raise ValueError(f"cpus must be a positive number of CPUs, got {cpus!r}")
        if cpus < MIN_CPUS:
            raise ValueError(f"cpus={cpus!r} is below Docker's minimum of {MIN_CPUS}; use more")
        if self.memory < MIN_MEMORY:  # type: ignore[operator]
            raise ValueError(
                f"memory={self.memory} bytes is too little for the sandbox runner to start; "
                "use at least '16m' ('256m' or more to import numpy)"
            )
        for name in ("pids", "max_open_files", "output_limit", "max_uses"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.pids < 8:
            raise ValueError(f"pids={self.pids} is too low for the runner and a shell; use >= 8")
        if self.pids > MAX_PIDS:
            raise ValueError(
                f"pids={self.pids} is above the kernel's largest pid_max ({MAX_PIDS}), which "
                "Docker refuses when the sandbox starts; use a smaller limit"
            )
        for name in ("timeout", "start_timeout"):
            value = getattr(self, name)
            if (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not 0 < value < math.inf  # NaN too; inf would turn the limit off
            ):
                raise ValueError(
                    f"{name} must be a positive number of seconds, and finite; got {value!r}"
                )
        if not self.runtime or not isinstance(self.runtime, str):
            raise ValueError("runtime must be a Docker runtime name such as 'runc' or 'runsc'")
        self._check_types()
        if not self.workspace.startswith("/") or self.workspace.rstrip("/") in ("", "/"):
            raise ValueError(
                f"workspace must be an absolute directory path, got {self.workspace!r}"
            )
        for key in self.labels:
            if key.startswith("vfgym."):
                raise ValueError(f"label {key!r} uses the reserved 'vfgym.' prefix; rename it")
        object.__setattr__(self, "labels", dict(self.labels))

    def _check_types(self) -> None:
        """Refuse values of the wrong type here, with what to write instead: later they
        fail deep inside Docker, or (a truthy string as `network`) silently do harm."""
        if not isinstance(self.network, bool):
            raise ValueError(f"network must be True or False, got {self.network!r}")
        if not isinstance(self.workspace, str):
            raise ValueError(
                f"workspace must be an absolute directory path, got {self.workspace!r}"
            )
        if not isinstance(self.user, str) or not _USER.fullmatch(self.user):
            # The ids also go into the workspace tmpfs's uid=/gid= options, where a
            # name makes the container fail to start.
            raise ValueError(
                f"user must be numeric ids 'uid' or 'uid:gid' such as '10001:10001', "
                f"got {self.user!r}"
            )
        if self.image is not None and not isinstance(self.image, str):
            raise ValueError(
                f"image must be an image name such as 'repo:tag' or None, got {self.image!r}"
            )
        if self.docker_host is not None and not isinstance(self.docker_host, str):
            raise ValueError(
                "docker_host must be an endpoint such as 'unix:///var/run/docker.sock' or None, "
                f"got {self.docker_host!r}"
            )
        self._check_hosts()
        if not isinstance(self.labels, Mapping):
            raise ValueError(f"labels must be a dict of str to str, got {self.labels!r}")
        for key, value in self.labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ValueError(
                    f"labels must map str to str (Docker labels are text), got {key!r}: {value!r}"
                )

    def _check_hosts(self) -> None:
        """Several endpoints as a tuple of strings, and a per-host limit that is a count."""
        hosts = self.docker_hosts
        if isinstance(hosts, str) or not isinstance(hosts, tuple | list):
            raise ValueError(
                "docker_hosts must be a list of endpoints such as "
                "['unix:///var/run/docker.sock', 'tcp://10.0.0.5:2375'], "
                f"got {hosts!r}"
            )
        if not all(isinstance(host, str) and host for host in hosts):
            raise ValueError(f"docker_hosts must hold endpoint strings, got {hosts!r}")
        if len(set(hosts)) != len(hosts):
            raise ValueError(f"docker_hosts names a host twice: {hosts!r}; list each once")
        if hosts and self.docker_host is not None:
            raise ValueError(
                "give either docker_host (one endpoint) or docker_hosts (several), not both"
            )
        object.__setattr__(self, "docker_hosts", tuple(hosts))
        limit = self.host_limit
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0
        ):
            raise ValueError(
                f"host_limit must be a positive number of sandboxes per host or None, got {limit!r}"
            )

    def replace(self, **changes: Any) -> SandboxConfig:
        """A copy with some fields changed (unknown names raise TypeError)."""
        return dataclasses.replace(self, **changes)
