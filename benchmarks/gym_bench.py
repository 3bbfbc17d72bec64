"""Steps per second through `gym.step`: vfgym's Gym adapter beside GEM and TextArena.

    .venv/bin/python benchmarks/gym_bench.py [--seconds 2] [--repeat 3] [--skip-peers]

For guess-the-number, tic-tac-toe and wordle it measures one env, 8 envs in a
sync vector env and 8 in an async vector env — each framework's own vector envs —
with a seeded random player, resets included (as in training). GEM (PyPI gem-llm)
and TextArena (PyPI textarena, the "-raw" variants) are installed by this script into
their own virtual environments under a cache directory (`$VFGYM_BENCH_CACHE`, default
~/.cache/vfgym-bench) — never into the project's — and measured there by
`_gym_bench_peers.py` in the same invocation. It also measures what the adapter adds
per step over calling the game's `env_response` directly (target: under 20 µs).

The modes (the script prints this legend with its table):

- single: one env (`gym.make(id)`, `gem.make(id)`, `ta.make(id)`).
- sync8: 8 envs stepped one after another in the caller's thread: vfgym's
  `GymVectorEnv` (`gym.make_vec(id, num_envs=8)`, mode "sync"), GEM's
  `make_vec(..., async_mode=False)`.
- async8: 8 envs stepped concurrently: vfgym's `GymVectorEnv` in mode "async" — one
  asyncio event loop, where sub-envs that never wait (every game here) step inline,
  exactly as in sync8 — and GEM's `make_vec(..., async_mode=True)`, a thread pool in
  one process.
- gymnasium-sync8 / gymnasium-async8 (vfgym only, for comparison): the same envs in
  Gymnasium's `SyncVectorEnv` and `AsyncVectorEnv` (`vectorization_mode="sync"` /
  `"async"`); the async one runs one process per env, with a pipe round trip per step,
  so the script also prints that floor: 8 do-nothing envs in AsyncVectorEnv.

Notes on fairness: each framework registers its own version of a game, and the
range and turn limit set how long an episode lasts, and so how often a reset is paid.
vfgym is therefore also measured with each peer's settings (`PEER_SETTINGS`: GEM's
hard guess-the-number is 1-50 in 7 turns, TextArena's 1-20 in 10, vfgym's own 1-100
in 11), and every ratio compares vfgym playing the peer's version. GEM's hard Wordle
allows 25 guesses and vfgym's at most 20, so that ratio understates vfgym's speed a
little; TextArena's Wordle (6 guesses) is vfgym's own. GEM ships no tic-tac-toe;
TextArena's tic-tac-toe is two-player (each step is one player's move, with no
built-in opponent to compute) and it has no vector envs; GEM's vector envs reset an
ended episode within the same step (SAME_STEP), vfgym's and Gymnasium's on the next
step (NEXT_STEP, Gymnasium's default), a step that then takes no move. Figures are
wall-clock, each the best of ten rounds (the one least disturbed by whatever else the
machine is doing); every framework runs `--repeat` times (default 3), each time in a
fresh process and taking turns with the others, and each figure is its best run.
Compare ratios within one invocation.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

import vfgym.gym as vgym
from vfgym.engine.state import new_state
from vfgym.envs.registry import load_environment
from vfgym.types import State

sys.path.insert(0, str(Path(__file__).resolve().parent))
# One timing rule for every framework: the peers' script (stdlib only, as it runs in
# the peers' own venvs) defines it.
from _gym_bench_peers import timed

GAMES = {
    "guess-the-number": "vfgym/GuessTheNumber-v0",
    "tictactoe": "vfgym/TicTacToe-v0",
    "wordle": "vfgym/Wordle-v0",
}
MODES = ("single", "sync8", "async8")
VECTOR_ENVS = 8
#: How vfgym's vector modes are made: `gym.make_vec(id, num_envs=8, **kwargs)`. The
#: last two, Gymnasium's own vector envs, are extra rows (the peers have no such mode).
VFGYM_VECTOR = {
    "sync8": {"mode": "sync"},
    "async8": {"mode": "async"},
    "sync8-read": {"mode": "sync"},
    "gymnasium-sync8": {"vectorization_mode": "sync"},
    "gymnasium-async8": {"vectorization_mode": "async"},
}
EXTRA_MODES = ("sync8-read", "gymnasium-sync8", "gymnasium-async8")
#: The peer's mode an extra vfgym mode is compared with.
PEER_MODE_OF = {"sync8-read": "sync8"}
LEGEND = """modes (steps per second counts every sub-env's step):
  single            one env: gym.make(id), gem.make(id), ta.make(id)
  sync8             8 envs stepped one after another in the caller's thread: vfgym
                    GymVectorEnv (gym.make_vec(id, num_envs=8)); GEM make_vec(async_mode=False).
                    vfgym's batched infos are built as they are read (BatchedInfo), and this
                    loop reads none of them; GEM deep-copies every sub-env's info each step
  sync8-read        vfgym's sync8 with every value of every step's infos read (all arrays
                    and masks built, as Gymnasium's SyncVectorEnv builds them), compared
                    with GEM's sync8
  async8            8 envs stepped concurrently: vfgym GymVectorEnv(mode="async") runs them
                    on one asyncio event loop (envs that never wait, every game here, step
                    inline, as in sync8); GEM make_vec(async_mode=True) on a thread pool
  gymnasium-sync8   vfgym's envs in Gymnasium's SyncVectorEnv (vectorization_mode="sync")
  gymnasium-async8  vfgym's envs in Gymnasium's AsyncVectorEnv (vectorization_mode="async"):
                    one process per env, a pipe round trip per step
autoreset: vfgym and Gymnasium NEXT_STEP (the step after an episode's end resets it);
GEM SAME_STEP (the ending step also resets), and so vfgym too when it plays GEM's
version (vf@gem), so that every step counted there plays a move"""
PEERS = {"gem": "gem-llm", "textarena": "textarena"}
#: Each peer's version of a game, as settings of vfgym's loader (its range and turn
#: limit): vfgym plays that version too, in the modes the peer has, and the ratios
#: compare the two. Games not listed are the same version in both.
PEER_SETTINGS: dict[str, dict[str, dict[str, int]]] = {
    "gem": {
        "guess-the-number": {"low": 1, "high": 50, "max_turns": 7},
        "wordle": {"max_guesses": 20, "max_turns": 20},  # GEM's allows 25; vfgym's, 20
    },
    "textarena": {"guess-the-number": {"low": 1, "high": 20, "max_turns": 10}},
}
#: The modes each peer has (and vfgym's extra modes compared with one of them).
PEER_MODES = {"gem": (*MODES, "sync8-read"), "textarena": ("single",)}
#: How a peer's vector envs reset an ended episode, for vfgym's to do the same when it
#: plays that peer's version: GEM resets within the ending step (SAME_STEP), so each
#: step it counts plays a move, while vfgym's default (NEXT_STEP, Gymnasium's) spends
#: the next step on the reset alone, a step that plays no move but counts.
PEER_AUTORESET = {"gem": "SameStep"}
SHORT = {"gem": "GEM", "textarena": "TA"}
HERE = Path(__file__).resolve().parent
WORDS = HERE.parent / "games" / "data" / "wordle_words.txt"


def word_list() -> list[str]:
    lines = WORDS.read_text(encoding="utf-8").splitlines()
    return [w.split()[0] for w in lines if w and not w.startswith("#") and w.split()[0].isalpha()]


def move_maker(game: str, words: list[str], rng: random.Random) -> Callable[[], str]:
    if game == "guess-the-number":
        return lambda: f"<move>{rng.randint(1, 10)}</move>"
    if game == "tictactoe":
        return lambda: f"<move>{'ABC'[rng.randrange(3)]}{rng.randrange(1, 4)}</move>"
    return lambda: f"<move>{rng.choice(words)}</move>"


# ---------------------------------------------------------------------- vfgym


def bench_vfgym(seconds: float, words: list[str]) -> dict[str, float | None]:
    """Every game in every mode with vfgym's own settings ("<game>/<mode>"), and with
    each peer's settings in the peer's modes ("<game>/<mode>@<peer>")."""
    results: dict[str, float | None] = {}
    for game, gym_id in GAMES.items():
        versions = [("", {}, (*MODES, *EXTRA_MODES), None)] + [
            (f"@{peer}", games[game], PEER_MODES[peer], PEER_AUTORESET.get(peer))
            for peer, games in PEER_SETTINGS.items()
            if game in games
        ]
        for suffix, settings, modes, autoreset in versions:
            if game not in vgym.REGISTERED_IDS:
                results.update({f"{game}/{mode}{suffix}": None for mode in modes})
                continue
            for mode in modes:
                rate = bench_vfgym_mode(gym_id, mode, settings, game, words, seconds, autoreset)
                results[f"{game}/{mode}{suffix}"] = rate
        if game not in vgym.REGISTERED_IDS:
            print(f"vfgym {game}: not available ({vgym.SKIPPED.get(game)})", file=sys.stderr)
    return results


def bench_vfgym_mode(
    gym_id: str,
    mode: str,
    settings: dict[str, int],
    game: str,
    words: list[str],
    seconds: float,
    autoreset: str | None = None,
) -> float:
    """Steps per second of game `gym_id` made with `settings`, in `mode` (a vfgym vector
    mode with `autoreset` as its `autoreset_mode` when given)."""
    move = move_maker(game, words, random.Random(0))
    if mode == "single":
        env = gym.make(gym_id, **settings)
        try:
            env.reset(seed=0)

            def single() -> int:
                _, _, terminated, truncated, _ = env.step(move())
                if terminated or truncated:
                    env.reset()
                return 1

            return timed(single, seconds)
        finally:
            env.close()
    options = dict(VFGYM_VECTOR[mode])
    if autoreset is not None and "mode" in options:  # vfgym's own vector env
        options["autoreset_mode"] = autoreset
    vec = gym.make_vec(gym_id, num_envs=VECTOR_ENVS, **options, **settings)
    read = mode.endswith("-read")
    try:
        vec.reset(seed=0)

        def vector() -> int:
            infos = vec.step(tuple(move() for _ in range(VECTOR_ENVS)))[4]  # autoreset: NEXT_STEP
            if read:
                read_every_value(infos)
            return VECTOR_ENVS

        return timed(vector, seconds)
    finally:
        vec.close()


def read_every_value(infos: dict[str, Any]) -> None:
    """Read every value of a batched info, nested batches too: all its arrays built."""
    for value in infos.values():
        if isinstance(value, dict):
            read_every_value(value)


def adapter_overhead(seconds: float, words: list[str]) -> dict[str, dict[str, float]]:
    """µs per step: `GymEnv.step`, the engine's turn pieces alone, `env_response` alone."""
    return {
        game: _overhead_of(game, seconds, words) for game in GAMES if game in vgym.REGISTERED_IDS
    }


def _overhead_of(game: str, seconds: float, words: list[str]) -> dict[str, float]:
    env = load_environment(game)
    rows = env.get_eval_dataset()
    move = move_maker(game, words, random.Random(1))
    moves = [move() for _ in range(4096)]
    turn = iter(moves * 10_000)
    picker = random.Random(2)
    gym_env = vgym.GymEnv(env)
    gym_env.reset(seed=0)
    episodes: dict[str, State] = {}

    def through_gym() -> int:
        _, _, terminated, truncated, _ = gym_env.step(next(turn))
        if terminated or truncated:
            gym_env.reset()
        return 1

    def new_episode(loop: str) -> None:
        row = rows[picker.randrange(len(rows))]
        state = new_state(list(row["prompt"]), [], row["answer"], "default", dict(row["info"]), 0)
        episodes[loop] = env.setup_state(state)

    def engine() -> int:
        """The engine's pieces as the adapter calls them, without the adapter."""
        state = episodes["engine"]
        _, stop = env.text_turn_sync(state, next(turn))  # what step() calls for text
        if stop is not None:
            env.finish(state, stop)
            new_episode("engine")
        return 1

    def direct() -> int:
        """The game's own env_response, is_completed and turn limit, nothing else."""
        state = episodes["direct"]
        state["completion"].append({"role": "assistant", "content": next(turn)})
        state["turn"] += 1
        replies, _ = env.env_response(state["prompt"] + state["completion"], state)
        state["completion"].extend(replies)
        if env.is_completed(None, state) or state["turn"] >= env.max_turns:
            new_episode("direct")
        return 1

    new_episode("engine")
    new_episode("direct")
    rates = timed_together({"gym": through_gym, "engine": engine, "direct": direct}, seconds)
    gym_env.close()
    gym_us, engine_us, direct_us = (1e6 / rates[k] for k in ("gym", "engine", "direct"))
    return {
        "gym_us": gym_us,
        "engine_us": engine_us,
        "direct_us": direct_us,
        "overhead_us": gym_us - direct_us,
        "adapter_only_us": gym_us - engine_us,
    }


def timed_together(
    variants: dict[str, Callable[[], int]], seconds: float, rounds: int = 10
) -> dict[str, float]:
    """`timed` for several variants, their rounds interleaved so that each sees the same
    machine load and the same warm caches (the games memoise pure functions)."""
    for step in variants.values():
        for _ in range(20):
            step()
    best = dict.fromkeys(variants, 0.0)
    for _ in range(rounds):
        for name, step in variants.items():
            steps = 0
            start = time.perf_counter()
            deadline = start + seconds / rounds / len(variants)
            while True:
                for _ in range(25):
                    steps += step()
                now = time.perf_counter()
                if now >= deadline:
                    break
            best[name] = max(best[name], steps / (now - start))
    return best


class _Idle(gym.Env[int, int]):
    """An env that does nothing: what Gymnasium's AsyncVectorEnv costs on its own."""

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.turn = 0
        return 0, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        self.turn += 1
        return 0, 0.0, self.turn >= 10, False, {}


def async_floor(seconds: float) -> float:
    """Steps per second of 8 idle envs in Gymnasium's AsyncVectorEnv: the ceiling of any
    env in that vector env on this machine (one process per env, a pipe round trip a
    step)."""
    vec = gym.vector.AsyncVectorEnv([_Idle for _ in range(VECTOR_ENVS)])
    try:
        vec.reset(seed=0)
        actions = [0] * VECTOR_ENVS

        def vector() -> int:
            vec.step(actions)
            return VECTOR_ENVS

        return timed(vector, seconds)
    finally:
        vec.close()


# ---------------------------------------------------------------------- peers


def peer_python(peer: str, cache: Path) -> Path:
    """The interpreter of the peer's own venv, created and installed on first use."""
    venv = cache / peer
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if not marker.exists():
        print(f"installing {PEERS[peer]} into {venv} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", PEERS[peer]],
            check=True,
            stderr=subprocess.DEVNULL,
        )
        marker.write_text(PEERS[peer])
    return python


def nltk_words_corpus(root: Path, words: list[str]) -> Path:
    """An NLTK data directory whose "words" corpus is vfgym's Wordle list."""
    corpus = root / "corpora" / "words"
    corpus.mkdir(parents=True, exist_ok=True)
    text = "\n".join(words) + "\n"
    for name in ("en", "en-basic"):
        (corpus / name).write_text(text, encoding="utf-8")
    (corpus / "README").write_text("Five-letter words from vfgym's Wordle list.\n")
    return root


def bench_peer(peer: str, seconds: float, words: list[str], cache: Path) -> dict[str, Any]:
    try:
        python = peer_python(peer, cache)
    except subprocess.CalledProcessError as exc:
        print(f"{peer}: install failed ({exc}); its column stays empty", file=sys.stderr)
        return {}
    with tempfile.TemporaryDirectory(prefix="vfgym-bench-") as tmp:
        words_file = Path(tmp) / "words.txt"
        words_file.write_text("\n".join(words) + "\n", encoding="utf-8")
        env = {**os.environ, "NLTK_DATA": str(nltk_words_corpus(Path(tmp) / "nltk", words))}
        done = subprocess.run(
            [str(python), str(HERE / "_gym_bench_peers.py"), peer, str(seconds), str(words_file)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    for line in done.stdout.splitlines():
        if line.startswith("RESULTS "):
            return json.loads(line.removeprefix("RESULTS "))
    print(f"{peer} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
    return {}


# ---------------------------------------------------------------------- report


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def report(columns: dict[str, dict[str, Any]]) -> None:
    """The table: vfgym with its own settings, then each peer beside vfgym playing the
    peer's version of the game ("vf@gem"), and the ratios of those two."""
    peers = [name for name in columns if name != "vfgym"]
    vfgym = columns["vfgym"]
    header = f"{'game / mode':36}{'vfgym':>12}"
    header += "".join(f"{'vf@' + peer:>14}{peer:>12}" for peer in peers)
    header += "".join(f"{'vf/' + SHORT[peer]:>9}" for peer in peers)
    print("\nsteps per second through step() (higher is better)")
    print(header)
    print("-" * len(header))
    for game in GAMES:
        for mode in (*MODES, *EXTRA_MODES):
            key = f"{game}/{mode}"
            line = f"{key:36}{fmt(vfgym.get(key)):>12}"
            ratios = ""
            for peer in peers:
                matched = game in PEER_SETTINGS.get(peer, {})
                ours = vfgym.get(f"{key}@{peer}") if matched else vfgym.get(key)
                theirs = columns[peer].get(f"{game}/{PEER_MODE_OF.get(mode, mode)}")
                if matched:
                    shown = fmt(ours)
                else:  # the peer plays vfgym's version, or does not have the game
                    shown = "=" if ours and theirs else "n/a"
                line += f"{shown:>14}{fmt(theirs):>12}"
                ratios += f"{f'{ours / theirs:.2f}x' if ours and theirs else 'n/a':>9}"
            print(line + ratios)
    print(
        "\nvf@<peer>: vfgym playing the peer's version of the game (PEER_SETTINGS), which "
        "the ratio\nvf/<peer> compares with the peer; '=' where that is vfgym's own."
    )
    print(f"\n{LEGEND}")


def bench_vfgym_fresh(seconds: float) -> dict[str, Any]:
    """`bench_vfgym` in a fresh interpreter, as the peers are measured (no warm caches)."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--seconds", str(seconds), "--only-vfgym"],
        capture_output=True,
        text=True,
        check=False,
    )
    for line in done.stdout.splitlines():
        if line.startswith("RESULTS "):
            return json.loads(line.removeprefix("RESULTS "))
    print(f"vfgym failed:\n{done.stderr[-2000:]}", file=sys.stderr)
    return {}


def best_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure, the best of several runs (None where no run has one)."""
    keys = {key for run in runs for key in run}
    return {
        key: max((r[key] for r in runs if r.get(key) is not None), default=None) for key in keys
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="measure every framework this many times, in turn, and keep each figure's best",
    )
    parser.add_argument("--skip-peers", action="store_true", help="measure vfgym only")
    parser.add_argument("--only-vfgym", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("VFGYM_BENCH_CACHE", Path.home() / ".cache" / "vfgym-bench")),
        help="where the peers' virtual environments live",
    )
    args = parser.parse_args()
    words = word_list()
    if args.only_vfgym:  # one run, in the fresh process bench_vfgym_fresh started
        print("RESULTS " + json.dumps(bench_vfgym(args.seconds, words)))
        return
    names = ["vfgym"] if args.skip_peers else ["vfgym", *PEERS]
    if not args.skip_peers:
        args.cache.mkdir(parents=True, exist_ok=True)
    # Frameworks take turns, each run in a fresh process, so a burst of other work on the
    # machine lands on all of them rather than on whichever was being measured.
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for _ in range(max(1, args.repeat)):
        for name in names:
            if name == "vfgym":
                runs[name].append(bench_vfgym_fresh(args.seconds))
            else:
                runs[name].append(bench_peer(name, args.seconds, words, args.cache))
    report({name: best_of(results) for name, results in runs.items()})
    print(
        "\nµs per step: GymEnv.step / the engine's turn loop (text_turn_sync) / "
        "env_response called directly"
    )
    for game, f in adapter_overhead(args.seconds, words).items():
        print(
            f"  {game:18} gym {f['gym_us']:6.1f}  engine {f['engine_us']:6.1f}  direct "
            f"{f['direct_us']:6.1f}  -> over direct {f['overhead_us']:5.1f}, "
            f"adapter's own code {f['adapter_only_us']:5.1f}"
        )
    print(
        f"Gymnasium's AsyncVectorEnv with {VECTOR_ENVS} envs that do nothing: "
        f"{async_floor(args.seconds):,.0f} steps/s (the ceiling of any gymnasium-async8 "
        "figure here; vfgym's and GEM's async modes stay in one process)"
    )
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
