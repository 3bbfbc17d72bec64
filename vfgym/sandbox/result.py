"""The outcome of one call into a sandbox."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExecResult:
    """What a `run_python` or `run_shell` call produced.

    `exit_code` is None when the call was stopped by the timeout; a negative value
    is the signal that killed the process. `oom_killed` is None when the runtime
    cannot tell. `sandbox_lost` marks a call that took the whole sandbox down
    (its runner died): that is the code's doing or an infrastructure failure, and
    either way the result does not describe a normal run. The sandbox is unusable
    after it; whoever holds it must get a new one (`SandboxEnv` does, and says so).
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    oom_killed: bool | None = False
    truncated: bool = False
    duration_s: float = 0.0
    value: str | None = None
    state_reset: bool = False
    sandbox_lost: bool = False

    @property
    def ok(self) -> bool:
        """True when the code ran to completion with exit code 0."""
        return self.exit_code == 0 and not self.timed_out and not self.sandbox_lost

    def summary(self, max_chars: int = 4000) -> str:
        """A short text for the model: the output and, when it matters, what went wrong.

        Output longer than `max_chars` keeps its head and tail, so the model sees
        both how a run started and how it ended.
        """
        notes = []
        if self.sandbox_lost:
            notes.append("the sandbox crashed; all its state is gone")
        elif self.timed_out:
            notes.append(f"timed out after {self.duration_s:.1f}s and was killed")
        if self.oom_killed:
            notes.append("killed: out of memory")
        if self.state_reset and not self.sandbox_lost:
            notes.append("the Python session was restarted; variables are gone")
        if self.exit_code not in (0, None) and not self.timed_out:
            if self.exit_code < 0:
                notes.append(f"killed by signal {-self.exit_code}")
            else:
                notes.append(f"exit code {self.exit_code}")
        if self.truncated:
            notes.append("output truncated")

        parts = []
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append(("[stderr]\n" if self.stdout else "") + self.stderr.rstrip("\n"))
        text = "\n".join(parts)
        if len(text) > max_chars:
            half = max_chars // 2
            omitted = len(text) - 2 * half
            text = f"{text[:half]}\n[... {omitted} characters omitted ...]\n{text[-half:]}"
        if notes:
            text = (text + "\n" if text else "") + "[" + "; ".join(notes) + "]"
        return text or "(no output)"
