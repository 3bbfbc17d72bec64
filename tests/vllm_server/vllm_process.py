"""Start a real CPU vLLM OpenAI server for the tests, and end it with every process it made.

vLLM's API server spawns its engine (and a multiprocessing resource tracker) as child
processes whose command lines do not say "vllm"; when the API server is killed they
live on, holding memory and cores. So the server is started in a session of its own,
its process tree is recorded by PID (with each process's start time, so a PID the
kernel hands to someone else later is never signalled), and stopping it ends the API
server first, then whatever recorded process is still there. Nothing is ever killed
by name.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import tiny_model

ROOT = Path(__file__).resolve().parents[2]
SETUP_SCRIPT = ROOT / ".ci" / "setup-vllm"
READY_MARKER = ".vfgym-vllm-ready"
SERVED_MODEL = "tiny-qwen2"
MAX_MODEL_LEN = 2048
START_TIMEOUT = 900.0  # seconds; a cold start on a busy two-core machine can take minutes


class VLLMUnavailable(Exception):
    """The vLLM venv is not installed: the tests skip (or fail under VFGYM_REQUIRE_VLLM=1)."""


def cache_root() -> Path:
    """The cache folder `.ci/setup-vllm` uses (same environment variables, same default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("VFGYM_VLLM_CACHE") or Path(base) / "vfgym-ci")


def venv_dir() -> Path:
    """The vLLM venv `.ci/setup-vllm` makes, named after the versions it pins."""
    override = os.environ.get("VFGYM_VLLM_VENV")
    if override:
        return Path(override)
    script = SETUP_SCRIPT.read_text()
    pins = {}
    for name in ("vllm_version", "transformers_version", "tokenizers_version"):
        found = re.search(rf"^{name}=(\S+)$", script, re.MULTILINE)
        if found is None:
            raise RuntimeError(f"{SETUP_SCRIPT} no longer sets {name}=...; update {__file__}")
        pins[name] = found.group(1)
    key = (
        f"vllm-cpu-{pins['vllm_version']}-tf-{pins['transformers_version']}"
        f"-tok-{pins['tokenizers_version']}"
    )
    return cache_root() / key


def vllm_python() -> Path:
    """The vLLM venv's Python, or `VLLMUnavailable` saying how to install it."""
    venv = venv_dir()
    python = venv / "bin" / "python"
    if not (venv / READY_MARKER).is_file() or not python.exists():
        raise VLLMUnavailable(
            f"no vLLM venv at {venv}: run `bash .ci/setup-vllm` once (about 8 minutes) "
            "to install the CPU vLLM these tests serve a tiny model with"
        )
    return python


def ensure_tiny_model(python: Path) -> Path:
    """The tiny model's folder, made with the vLLM venv's Python when not cached yet.

    It is made in a scratch folder and renamed into place, so a run interrupted while
    making it, or two runs making it at once, never leave a half-made model.
    """
    target = tiny_model.model_dir(cache_root(), toolchain=python.parent.parent.name)
    if (target / "model.safetensors").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_name(f"{target.name}.making.{os.getpid()}")
    try:
        subprocess.run(
            [str(python), str(Path(tiny_model.__file__)), str(scratch)],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        try:
            scratch.rename(target)
        except OSError:
            if not (target / "model.safetensors").is_file():
                raise  # not another run's finished model: a real failure
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"making the tiny model failed:\n{exc.stderr[-4000:]}") from exc
    finally:
        if scratch.exists():
            subprocess.run(["rm", "-rf", str(scratch)], check=False)
    return target


def free_port() -> int:
    """A loopback port nothing listens on now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def _children(pid: int) -> list[int]:
    """The PIDs whose parent is `pid`, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def process_tree(root: int) -> dict[int, int]:
    """Every live descendant of `root` (not `root` itself), as PID -> start time."""
    tree: dict[int, int] = {}
    pending = [root]
    while pending:
        for child in _children(pending.pop()):
            started = _start_time(child)
            if started is not None and child not in tree:
                tree[child] = started
                pending.append(child)
    return tree


def _alive(pid: int, started: int) -> bool:
    """True while `pid` is still the very process recorded (not a reused PID, not a zombie)."""
    if _start_time(pid) != started:
        return False
    with suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text()
        return state[state.rindex(")") + 2] != "Z"
    return False


def _signal_if_same(pid: int, started: int, sig: signal.Signals) -> None:
    if _alive(pid, started):
        with suppress(ProcessLookupError):
            os.kill(pid, sig)


def _wait_gone(processes: dict[int, int], timeout: float) -> dict[int, int]:
    """Wait up to `timeout` s for the processes to end; return those still alive."""
    deadline = time.monotonic() + timeout
    while True:
        left = {pid: t for pid, t in processes.items() if _alive(pid, t)}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


@dataclass
class VLLMServer:
    """A running vLLM server: its URL, its log and the PIDs of its process tree."""

    process: subprocess.Popen[bytes]
    port: int
    model_dir: Path
    log_path: Path
    start_seconds: float = 0.0
    tree: dict[int, int] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return SERVED_MODEL

    def log(self) -> str:
        """The server's output so far (its request log included)."""
        return self.log_path.read_text(errors="replace")

    def record_tree(self) -> None:
        """Add the server's current descendants to the processes to end at stop."""
        self.tree.update(process_tree(self.process.pid))

    def stop(self) -> None:
        """End the API server, then every recorded process of its tree still alive."""
        self.record_tree()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        left = _wait_gone(self.tree, timeout=10)
        for pid, started in left.items():
            _signal_if_same(pid, started, signal.SIGTERM)
        for pid, started in _wait_gone(left, timeout=10).items():
            _signal_if_same(pid, started, signal.SIGKILL)
        still = _wait_gone(left, timeout=10)
        if still:
            raise RuntimeError(f"vLLM processes {sorted(still)} survived SIGKILL")


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _server_command(python: Path, model: Path, port: int) -> list[str]:
    # `vllm serve` from this wheel fails at start; the module entry point works.
    return [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        SERVED_MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(MAX_MODEL_LEN),
        "--dtype",
        "float32",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--enable-log-requests",
        "--max-log-len",
        "0",
        "--seed",
        "0",
        # No torch.compile warm-up: compiling takes minutes on two shared cores and buys
        # nothing for a model this small.
        "--enforce-eager",
    ]


def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB: the tiny model needs far less than the default
            "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # the machine's cores are shared
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",  # the model is local; nothing may come from a hub
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    return env


@contextmanager
def running_vllm(log_dir: Path) -> Iterator[VLLMServer]:
    """Start vLLM on a free loopback port with the tiny model; stop it and its tree after."""
    python = vllm_python()
    model = ensure_tiny_model(python)
    port = free_port()
    log_path = log_dir / "vllm-server.log"
    started_at = time.monotonic()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            _server_command(python, model, port),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_server_env(),
            start_new_session=True,  # a Ctrl-C meant for pytest is not the server's
        )
    server = VLLMServer(process=process, port=port, model_dir=model, log_path=log_path)
    try:
        deadline = started_at + START_TIMEOUT
        while not _healthy(port):
            server.record_tree()
            if process.poll() is not None:
                raise RuntimeError(
                    f"vLLM exited with status {process.returncode} before answering /health; "
                    f"its log ({log_path}) ends:\n{server.log()[-4000:]}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"vLLM did not answer /health within {START_TIMEOUT:.0f} s; its log "
                    f"({log_path}) ends:\n{server.log()[-4000:]}"
                )
            time.sleep(1)
        server.start_seconds = time.monotonic() - started_at
        server.record_tree()
        print(f"vLLM answered /health after {server.start_seconds:.0f} s", file=sys.stderr)
        yield server
    finally:
        server.stop()
