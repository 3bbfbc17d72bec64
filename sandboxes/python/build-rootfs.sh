#!/usr/bin/env bash
# Make a minimal Debian root filesystem tarball for the sandbox base image.
#
# Used where no container registry is reachable: the tarball is turned into a
# base image with `docker import`, and the Dockerfile next to this script is
# built on top of it. Everything comes from Debian packages through apt.
#
#     bash build-rootfs.sh OUTPUT.tar [SUITE]
#
# Mirrors: on a Debian host of the same release, the host's own apt sources are
# used (so a local mirror or snapshot configured there applies); elsewhere
# mmdebstrap's default mirror is used. Set VFGYM_APT_SOURCES to a
# space-separated list of mmdebstrap MIRROR arguments (URIs, "deb ..." lines or
# sources files) to choose them yourself.
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 OUTPUT.tar [SUITE]" >&2
    exit 2
fi
OUTPUT=$1
SUITE=${2:-bookworm}
PACKAGES=python3,python3-numpy,python3-sympy,procps,bash

command -v mmdebstrap >/dev/null 2>&1 || {
    echo "build-rootfs: mmdebstrap is not installed; run: sudo apt-get install -y mmdebstrap" >&2
    exit 1
}

mirrors=()
if [ -n "${VFGYM_APT_SOURCES:-}" ]; then
    read -r -a mirrors <<<"$VFGYM_APT_SOURCES"
else
    host_codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
    if [ "$host_codename" = "$SUITE" ]; then
        for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
            /etc/apt/sources.list.d/*.sources; do
            [ -f "$file" ] || continue
            # Only enabled entries for this suite; comments and blank lines don't count.
            if grep -v '^[[:space:]]*#' "$file" | grep -qw "$SUITE"; then
                mirrors+=("$file")
            fi
        done
    fi
fi

echo "build-rootfs: mmdebstrap $SUITE with $PACKAGES (sources: ${mirrors[*]:-mmdebstrap default})" >&2
mmdebstrap --variant=minbase --include="$PACKAGES" \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --aptopt='APT::Install-Recommends "false"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
    "$SUITE" "$OUTPUT" "${mirrors[@]}"
