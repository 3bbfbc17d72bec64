#!/usr/bin/env bash
# Install and start a Docker Engine for vfgym's sandboxes when none is running.
#
# Idempotent: when `docker info` already answers, it does nothing. Otherwise it
# installs Debian's docker.io, runsc (gVisor) and mmdebstrap, registers runsc as
# a runtime with networking disabled, starts dockerd in the background and waits
# until it answers. Meant for CI and fresh development machines; run as root:
#
#     sudo bash sandboxes/setup-docker.sh
#
# Environment:
#   VFGYM_DOCKER_LOG      dockerd log file      (default /var/log/vfgym-dockerd.log)
#   VFGYM_DOCKER_PIDFILE  dockerd pid file      (default /var/run/vfgym-dockerd.pid)
#   VFGYM_DOCKER_WAIT     seconds to wait for the daemon (default 60)
#   VFGYM_DOCKER_STORAGE  force a storage driver instead of trying overlay2 then vfs
set -euo pipefail

LOG_FILE="${VFGYM_DOCKER_LOG:-/var/log/vfgym-dockerd.log}"
PID_FILE="${VFGYM_DOCKER_PIDFILE:-/var/run/vfgym-dockerd.pid}"
WAIT_SECONDS="${VFGYM_DOCKER_WAIT:-60}"
DAEMON_JSON=/etc/docker/daemon.json

say() { printf 'setup-docker: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if docker info >/dev/null 2>&1; then
    say "Docker already answers; nothing to do."
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    cat >&2 <<'EOF'
setup-docker: Docker is not reachable and this script needs root to install and start it.
Run it as root:

    sudo bash sandboxes/setup-docker.sh

or start your own Docker Engine and make sure `docker info` works for this user
(e.g. add yourself to the `docker` group, or set DOCKER_HOST to a reachable daemon).
EOF
    exit 1
fi

need_install=0
for tool in dockerd docker runsc mmdebstrap; do
    command -v "$tool" >/dev/null 2>&1 || need_install=1
done
if [ "$need_install" -eq 1 ]; then
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install docker.io, runsc and mmdebstrap with your package manager."
    say "installing docker.io runsc mmdebstrap with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q docker.io runsc mmdebstrap
fi

# Register runsc (gVisor) with networking off, merging with any existing daemon.json.
RUNSC_PATH="$(command -v runsc || true)"
mkdir -p /etc/docker
python3 - "$DAEMON_JSON" "$RUNSC_PATH" <<'EOF'
import json
import os
import sys

path, runsc = sys.argv[1], sys.argv[2]
config = {}
if os.path.exists(path) and os.path.getsize(path) > 0:
    with open(path) as handle:
        config = json.load(handle)
if runsc:
    runtimes = config.setdefault("runtimes", {})
    runtimes["runsc"] = {"path": runsc, "runtimeArgs": ["--network=none"]}
tmp = path + ".tmp"
with open(tmp, "w") as handle:
    json.dump(config, handle, indent=2)
    handle.write("\n")
os.replace(tmp, path)
EOF
say "wrote $DAEMON_JSON"

# cgroup v1 hierarchies may be mounted but not populated on minimal VMs.
if [ ! -e /sys/fs/cgroup/cgroup.controllers ] && [ ! -d /sys/fs/cgroup/memory ]; then
    say "warning: no memory cgroup found under /sys/fs/cgroup; memory limits may not apply."
fi

storage_from_config() {
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("storage-driver", ""))' \
        "$DAEMON_JSON" 2>/dev/null || true
}

wait_for_daemon() {
    local pid=$1 deadline=$((SECONDS + WAIT_SECONDS))
    while [ "$SECONDS" -lt "$deadline" ]; do
        if docker info >/dev/null 2>&1; then
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            return 1
        fi
        sleep 0.5
    done
    return 1
}

start_daemon() {
    local driver=$1
    local args=()
    # A storage driver given in daemon.json must not be repeated on the command line.
    if [ -n "$driver" ] && [ -z "$(storage_from_config)" ]; then
        args+=("--storage-driver=$driver")
    fi
    say "starting dockerd ${args[*]:-} (log: $LOG_FILE)"
    nohup dockerd "${args[@]}" >>"$LOG_FILE" 2>&1 &
    local pid=$!
    echo "$pid" >"$PID_FILE"
    if wait_for_daemon "$pid"; then
        say "dockerd (pid $pid) is up with storage driver $(docker info --format '{{.Driver}}')"
        return 0
    fi
    say "dockerd did not answer with storage driver '${driver:-default}'; last log lines:"
    tail -n 15 "$LOG_FILE" >&2 || true
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    rm -f "$PID_FILE"
    return 1
}

if [ -n "${VFGYM_DOCKER_STORAGE:-}" ]; then
    start_daemon "$VFGYM_DOCKER_STORAGE" || die "dockerd failed with storage driver $VFGYM_DOCKER_STORAGE; see $LOG_FILE"
elif [ -n "$(storage_from_config)" ]; then
    start_daemon "" || die "dockerd failed to start; see $LOG_FILE"
else
    start_daemon overlay2 || start_daemon vfs \
        || die "dockerd failed with overlay2 and with vfs; see $LOG_FILE"
fi

if [ -n "$RUNSC_PATH" ] && ! docker info --format '{{json .Runtimes}}' | grep -q runsc; then
    say "warning: runsc is installed but the daemon did not register it; check $DAEMON_JSON"
fi
