"""Building the default sandbox image, with or without a container registry.

Where a registry is reachable the Dockerfile builds on a public Python image.
Where none is, a Debian root filesystem made by `build-rootfs.sh` (mmdebstrap)
is imported as the base. The image is tagged with a hash of its build context,
so a changed runner gets a new image and an unchanged one is never rebuilt. A
rebuild frees only the images this checkout made and no other checkout uses
(see image_claims.py): a daemon may be shared.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import docker
from docker.errors import APIError, DockerException, ImageNotFound

from vfgym.errors import SandboxImageError
from vfgym.sandbox.image_claims import (
    CHECKOUT_LABEL,
    CHECKOUT_PATH_LABEL,
    CONTEXT_LABEL,
    checkout_id,
    checkout_location,
    claim_image,
    remove_stale_images,
)

IMAGE_REPOSITORY = "vfgym-sandbox-python"
BASE_REPOSITORY = "vfgym-sandbox-base"
PUBLIC_BASE = "python:3.11-slim"
DEBIAN_SUITE = "bookworm"
CONTEXT_NAME = "python"
ROOTFS_SCRIPT = "build-rootfs.sh"


def context_files() -> dict[str, bytes]:
    """Name to content of every file of the image's build context."""
    root = resources.files("vfgym.sandboxes") / CONTEXT_NAME
    files: dict[str, bytes] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda item: item.name):
            name = f"{prefix}{child.name}"
            if child.name == "__pycache__" or child.name.endswith(".pyc"):
                continue
            if child.is_dir():
                walk(child, name + "/")
            else:
                files[name] = child.read_bytes()

    walk(root, "")
    if "Dockerfile" not in files:
        raise SandboxImageError(f"the sandbox build context has no Dockerfile: {root}")
    return files


def context_hash(files: dict[str, bytes] | None = None) -> str:
    files = context_files() if files is None else files
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return digest.hexdigest()


def default_image() -> str:
    """The tag of the image that matches this version's runner."""
    return f"{IMAGE_REPOSITORY}:{context_hash()[:12]}"


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    """Whether `tag` is a local image; a malformed reference is an error that says so,
    not a Docker traceback."""
    try:
        client.api.inspect_image(tag)
    except ImageNotFound:
        return False
    except APIError as exc:
        if exc.status_code == 400:
            raise SandboxImageError(
                f"{tag!r} is not a valid image reference ({exc.explanation}); name an image "
                "such as 'repository:tag' in lower case"
            ) from exc
        raise
    return True


@dataclass(frozen=True)
class BuildReport:
    image: str
    base: str
    cached: bool
    seconds: float


def _try_pull(
    client: docker.DockerClient,
    reference: str,
    log: Callable[[str], None],
    fallback: str = "",
) -> bool:
    """Pull `reference`; on failure log why, and `fallback` (what happens instead) if any."""
    try:
        client.api.pull(reference)
    except (APIError, DockerException, OSError) as exc:
        then = f"; {fallback}" if fallback else ""
        log(f"cannot pull {reference} ({str(exc).splitlines()[0][:160]}){then}")
        return False
    return True


def _debian_base(
    client: docker.DockerClient, files: dict[str, bytes], log: Callable[[str], None]
) -> str:
    """Import a root filesystem built from Debian packages, once per script version."""
    script_hash = hashlib.sha256(files[ROOTFS_SCRIPT]).hexdigest()[:12]
    tag = f"{DEBIAN_SUITE}-{script_hash}"
    reference = f"{BASE_REPOSITORY}:{tag}"
    if image_exists(client, reference):
        log(f"base image {reference} exists")
        return reference
    if shutil.which("mmdebstrap") is None:
        raise SandboxImageError(
            "no registry is reachable and mmdebstrap is missing, so the Debian base cannot be "
            "built; install it with `sudo apt-get install -y mmdebstrap`"
        )
    if os.geteuid() != 0:
        raise SandboxImageError(
            "building the Debian base image needs root (mmdebstrap); run "
            "`sudo python -m vfgym.sandbox build` once"
        )
    with tempfile.TemporaryDirectory(prefix="vfgym-rootfs-") as tmp:
        script = Path(tmp) / ROOTFS_SCRIPT
        script.write_bytes(files[ROOTFS_SCRIPT])
        tarball = Path(tmp) / "rootfs.tar"
        log(f"building a Debian {DEBIAN_SUITE} root filesystem with mmdebstrap")
        started = time.monotonic()
        proc = subprocess.run(
            ["bash", str(script), str(tarball), DEBIAN_SUITE],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SandboxImageError(
                f"build-rootfs.sh failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
            )
        log(f"root filesystem built in {time.monotonic() - started:.1f}s; importing")
        client.api.import_image_from_file(str(tarball), repository=BASE_REPOSITORY, tag=tag)
    return reference


def _settle_images(
    client: docker.DockerClient, tag: str, digest: str, log: Callable[[str], None]
) -> None:
    """Claim `tag` as this checkout's image, then free what this checkout no longer needs."""
    checkout = checkout_id()
    claim_image(client, tag, IMAGE_REPOSITORY, checkout)
    remove_stale_images(client, IMAGE_REPOSITORY, digest, checkout, log)


def _write_context(files: dict[str, bytes], directory: Path) -> None:
    for name, content in files.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def build_image(
    client: docker.DockerClient,
    base: str = "auto",
    force: bool = False,
    log: Callable[[str], None] = print,
) -> BuildReport:
    """Build the default sandbox image unless an image of this build context exists.

    `base` is "auto" (a public Python image if one can be pulled, else Debian),
    "debian" (always the mmdebstrap base), or any image reference to build on.
    """
    started = time.monotonic()
    files = context_files()
    digest = context_hash(files)
    tag = f"{IMAGE_REPOSITORY}:{digest[:12]}"
    if not force and image_exists(client, tag):
        labels = client.api.inspect_image(tag).get("Config", {}).get("Labels") or {}
        if labels.get(CONTEXT_LABEL) == digest:
            log(f"{tag} is up to date")
            _settle_images(client, tag, digest, log)
            return BuildReport(tag, labels.get("vfgym.sandbox.base", "?"), True, 0.0)

    if base == "auto":
        if image_exists(client, PUBLIC_BASE) or _try_pull(
            client, PUBLIC_BASE, log, "using a Debian base"
        ):
            base_ref = PUBLIC_BASE
        else:
            base_ref = _debian_base(client, files, log)
    elif base == "debian":
        base_ref = _debian_base(client, files, log)
    else:
        if not image_exists(client, base) and not _try_pull(client, base, log):
            raise SandboxImageError(
                f"base image {base!r} is neither local nor pullable; pull or build it first, "
                "or use `--base auto` or `--base debian`"
            )
        base_ref = base

    log(f"building {tag} on {base_ref}")
    with tempfile.TemporaryDirectory(prefix="vfgym-context-") as tmp:
        _write_context(files, Path(tmp))
        try:
            stream = client.api.build(
                path=tmp,
                tag=tag,
                buildargs={"BASE": base_ref},
                labels={
                    CONTEXT_LABEL: digest,
                    "vfgym.sandbox.base": base_ref,
                    CHECKOUT_LABEL: checkout_id(),
                    CHECKOUT_PATH_LABEL: checkout_location(),
                },
                rm=True,
                forcerm=True,
                pull=False,
                # The Debian base already holds numpy and sympy, so its build needs no
                # network (and does not depend on the daemon's bridge); pip on a
                # public Python image does.
                network_mode="none" if base_ref.startswith(f"{BASE_REPOSITORY}:") else None,
                decode=True,
            )
            for chunk in stream:
                if "error" in chunk:
                    raise SandboxImageError(f"docker build failed: {chunk['error'].strip()}")
                text = chunk.get("stream", "").strip()
                if text.startswith("Step "):
                    log(text)
        except APIError as exc:
            raise SandboxImageError(f"docker build failed: {exc}") from exc
    client.api.tag(tag, IMAGE_REPOSITORY, "latest")
    _settle_images(client, tag, digest, log)
    seconds = time.monotonic() - started
    log(f"built {tag} in {seconds:.1f}s")
    return BuildReport(tag, base_ref, False, seconds)
