"""A stand-in for gym 0.17, just enough to run rl_a3c_pytorch's main.py unmodified,
and ikostrikov/pytorch-a3c's main.py, written against gym 0.9, as well.

The reference was written against gym 0.17 with atari-py. Neither installs on a current
Python, and ale-py 0.12 (through gymnasium) no longer registers the v4 ids the way gym
did. This package, placed first on PYTHONPATH, gives the reference what it calls:
`gym.make`, `gym.Wrapper`, `gym.ObservationWrapper`, `gym.spaces.box.Box`, and
environments with the old `reset() -> obs`, `step(a) -> (obs, reward, done, info)`
and `seed(s)`, backed by ale-py 0.12's emulator.

The ids are registered as gym 0.17 registered them (gym/envs/__init__.py there):

    <Game>-v4                frames per step random in 2..4, 100,000-step limit
    <Game>Deterministic-v4   4 frames per step (3 for SpaceInvaders), 100,000 steps
    <Game>NoFrameskip-v4     1 frame per step, limit 100,000 x the Deterministic skip

all with no sticky actions (repeat_action_probability 0), the minimal action set, RGB
screens and no frame cap inside the emulator (ale-py's own v4 registration adds one of
108,000 frames, which gym 0.17 did not have).

What gym 0.9 did differently and ikostrikov/pytorch-a3c relies on: an observation
wrapper's hook was `_observation`, and `step` took the [1, 1] numpy array of a sampled
action as it came.

Counting agent steps for benchmarks: when A3G_STEP_COUNTER_DIR is set, every process
that steps an environment keeps its count of agent steps in
`<dir>/<role>-<pid>.steps`, a little-endian u64 updated in place through mmap (no
system call per step), where the role comes from the process title the reference sets
("Train Agent: 3" -> train, "Test Agent" -> test, anything else -> main) or, where no
title is set (ikostrikov/pytorch-a3c), from the function a multiprocessing process was
started on (`train` -> train, `test` -> test). Steps taken
inside a reset (FIRE at the start of a game, no-ops, the step after a lost life) are
not agent steps, as in a3g: they happen while one of this package's wrappers is
resetting, which is how they are told apart. On NoFrameskip ids the reference's own
max-and-skip wrapper steps the environment --skip-rate times per agent step, so there
the count is of emulator frames.
"""

import mmap
import multiprocessing
import os
import re
import struct

import numpy as np
from ale_py import roms
from ale_py.env import AtariEnv as _AleEnv
from ale_py.registration import rom_id_to_name

from . import spaces

__version__ = "0.17.3-stand-in"

# How deep inside reset() calls of this package's wrappers the current process is.
_resetting = 0


class _StepCounter:
    """This process's agent steps, in a file a benchmark can read at any moment."""

    def __init__(self, directory):
        # Made at the process's first step rather than at import: the reference forks
        # its workers after importing gym, and titles them only then.
        role = _process_role()
        path = os.path.join(directory, f"{role}-{os.getpid()}.steps")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(fd, 8)
        self._mmap = mmap.mmap(fd, 8)
        os.close(fd)
        self._steps = 0

    def add_one(self):
        self._steps += 1
        struct.pack_into("<Q", self._mmap, 0, self._steps)


def _process_role():
    try:
        from setproctitle import getproctitle

        title = getproctitle()
    except ImportError:
        title = ""
    if title.startswith("Train"):
        return "train"
    if title.startswith("Test"):
        return "test"
    target = getattr(multiprocessing.current_process(), "_target", None)
    return {"train": "train", "test": "test"}.get(getattr(target, "__name__", ""), "main")


_counter_dir = os.environ.get("A3G_STEP_COUNTER_DIR")
_counter, _counter_pid = None, None


def _count_agent_step():
    global _counter, _counter_pid
    if not _counter_dir or _resetting:
        return
    if _counter_pid != os.getpid():  # each process, forked or not, keeps its own count
        _counter, _counter_pid = _StepCounter(_counter_dir), os.getpid()
    _counter.add_one()


class EnvSpec:
    """An id and its episode limit, as gym.envs.registration.EnvSpec held them."""

    def __init__(self, id, max_episode_steps):
        self.id = id
        self.max_episode_steps = max_episode_steps


class Env:
    """gym 0.17's Env: the attributes wrappers copy, and `unwrapped`."""

    metadata = {"render.modes": []}
    reward_range = (-float("inf"), float("inf"))
    spec = None
    action_space = None
    observation_space = None

    @property
    def unwrapped(self):
        return self

    def close(self):
        pass


class AtariEnv(Env):
    """gym 0.17's atari AtariEnv (old API) over ale-py 0.12's emulator."""

    def __init__(self, game, frameskip, spec):
        self._ale_env = _AleEnv(
            game=game,
            obs_type="rgb",
            frameskip=frameskip,
            repeat_action_probability=0.0,
            full_action_space=False,
            max_num_frames_per_episode=None,
        )
        self.ale = self._ale_env.ale
        self.spec = spec
        self.action_space = self._ale_env.action_space
        self.observation_space = self._ale_env.observation_space
        self.np_random = np.random.RandomState()
        self._pending_seed = None

    def seed(self, seed=None):
        # gym 0.17 reseeded and reloaded the ROM at once; ale-py does both at the next
        # reset given a seed, so the seed waits for it.
        self.np_random = np.random.RandomState(seed)
        self._pending_seed = seed
        return [seed]

    def reset(self):
        observation, _ = self._ale_env.reset(seed=self._pending_seed)
        self._pending_seed = None
        return observation

    def step(self, action):
        _count_agent_step()
        action = np.asarray(action).item()  # a plain int, or a [1, 1] array under gym 0.9
        observation, reward, terminal, _truncated, info = self._ale_env.step(int(action))
        return observation, reward, terminal, {"ale.lives": info["lives"]}

    def get_action_meanings(self):
        return self._ale_env.get_action_meanings()

    def close(self):
        self._ale_env.close()


class Wrapper(Env):
    """gym 0.17's Wrapper: forwards everything, attributes included, to `env`."""

    def __init__(self, env):
        self.env = env
        self.action_space = env.action_space
        self.observation_space = env.observation_space
        self.reward_range = env.reward_range
        self.metadata = env.metadata

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"attempted to get missing private attribute '{name}'")
        return getattr(self.env, name)

    @property
    def spec(self):
        return self.env.spec

    @property
    def unwrapped(self):
        return self.env.unwrapped

    def step(self, action):
        return self.env.step(action)

    def reset(self, **kwargs):
        return _reset(self.env, kwargs)

    def seed(self, seed=None):
        return self.env.seed(seed)

    def close(self):
        return self.env.close()


class ObservationWrapper(Wrapper):
    """gym 0.17's ObservationWrapper: `observation` applied after step and reset."""

    def reset(self, **kwargs):
        return self.observation(_reset(self.env, kwargs))

    def step(self, action):
        observation, reward, done, info = self.env.step(action)
        return self.observation(observation), reward, done, info

    def observation(self, observation):
        hook = getattr(type(self), "_observation", None)  # gym 0.9's name for it
        if hook is None:
            raise NotImplementedError
        return hook(self, observation)


def _reset(env, kwargs):
    """Resets `env`, marking the steps taken meanwhile as not agent steps."""
    global _resetting
    _resetting += 1
    try:
        return env.reset(**kwargs)
    finally:
        _resetting -= 1


class TimeLimit(Wrapper):
    """gym 0.17's TimeLimit; the reference sets `_max_episode_steps` itself."""

    def __init__(self, env, max_episode_steps):
        super().__init__(env)
        self._max_episode_steps = max_episode_steps
        self._elapsed_steps = None

    def step(self, action):
        assert self._elapsed_steps is not None, "Cannot call env.step() before calling reset()"
        observation, reward, done, info = self.env.step(action)
        self._elapsed_steps += 1
        if self._elapsed_steps >= self._max_episode_steps:
            info["TimeLimit.truncated"] = not done
            done = True
        return observation, reward, done, info

    def reset(self, **kwargs):
        self._elapsed_steps = 0
        return super().reset(**kwargs)


_ID = re.compile(r"^(?P<name>[A-Za-z]+?)(?P<kind>Deterministic|NoFrameskip)?-v4$")
_ROMS = {rom_id_to_name(rom): rom for rom in roms.get_all_rom_ids()}


def make(id):
    """The environment registered under `id`, wrapped in its TimeLimit."""
    match = _ID.match(id)
    if match is None or match["name"] not in _ROMS:
        raise ValueError(
            f"this gym stand-in registers only <Game>[Deterministic|NoFrameskip]-v4 ids, not {id!r}"
        )
    game, kind = _ROMS[match["name"]], match["kind"]
    skip = 3 if game == "space_invaders" else 4
    if kind == "Deterministic":
        frameskip, limit = skip, 100_000
    elif kind == "NoFrameskip":
        frameskip, limit = 1, skip * 100_000
    else:
        frameskip, limit = (2, 5), 100_000
    spec = EnvSpec(id, limit)
    return TimeLimit(AtariEnv(game, frameskip, spec), limit)
