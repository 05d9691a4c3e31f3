"""a3g's host of one environment from outside a3g: a Gymnasium id or a user's own class.

a3g starts this file as a Python process of its own for each environment it plays,
speaks to it over stdin and stdout, and owns it: the process ends when its stdin
closes. Nothing the environment does reaches a3g's own process: its exceptions come
back as messages, its prints go to stderr, and a crash or a hang ends only this
process, which a3g sees and reports.

The framing is binary and little-endian, one request answered by one reply:

    request  reset   b"r" u8(seeded) u64(seed)
             step    b"s" i64(action)             (discrete)
                     b"s" f32 * action_dims        (continuous)
             render  b"f"
    reply    ok      b"o" u32(length) payload
             error   b"e" u32(length) utf-8 traceback

A reset's payload is the observation; a step's is f64(reward) u8(terminated)
u8(truncated) then the observation; a render's is u32(height) u32(width) then
height * width * 3 bytes of RGB. An observation is float32 * observation_size, or
uint8 * observation_size for an image. The first reply, before any request, describes
the environment as JSON (or is the error that made it fail).
"""

import faulthandler
import importlib
import importlib.util
import json
import os
import struct
import sys
import traceback


def read_exactly(stream, count):
    data = b""
    while len(data) < count:
        chunk = stream.read(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data


class Replies:
    def __init__(self, stream):
        self.stream = stream

    def ok(self, payload):
        self.stream.write(b"o" + struct.pack("<I", len(payload)) + payload)
        self.stream.flush()

    def error(self, text):
        data = text.encode("utf-8", "replace")
        self.stream.write(b"e" + struct.pack("<I", len(data)) + data)
        self.stream.flush()


LOADED_FILES = {}


def load_class(target):
    """`file.py:Class` or `module:Class`."""
    where, _, name = target.rpartition(":")
    if not name:
        raise ValueError(f"{target} names no class after its colon; write file.py:Class or module:Class")
    if ":" in where and not where.endswith(".py"):
        raise ValueError(f"{target} has a colon too many; write file.py:Class or module:Class")
    if where.endswith(".py"):
        path = os.path.realpath(where)
        # A file that gives both the environment and a wrapper runs once.
        module = LOADED_FILES.get(path)
        if module is None:
            module_name = f"a3g_user_file_{len(LOADED_FILES)}"
            spec = importlib.util.spec_from_file_location(module_name, where)
            if spec is None:
                raise ImportError(f"cannot load {where} as Python")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
            LOADED_FILES[path] = module
    else:
        module = importlib.import_module(where)
    if not hasattr(module, name):
        raise AttributeError(f"{where} has no {name}")
    return getattr(module, name)


def make(request):
    import gymnasium

    for module in request["imports"]:
        importlib.import_module(module)
    kwargs = dict(request["kwargs"])
    if request["render"]:
        kwargs["render_mode"] = "rgb_array"
    if request["gym_id"] is not None:
        env = gymnasium.make(request["gym_id"], **kwargs)
    else:
        made = load_class(request["class"])
        try:
            env = made(**kwargs)
        except TypeError as error:
            if request["render"] and "render_mode" in str(error):
                raise TypeError(
                    f"{error}: eval --render makes it with render_mode='rgb_array', which its __init__ must take"
                ) from error
            raise
    for wrapper in request["wrappers"]:
        env = load_class(wrapper)(env)
    return env


def checked_reset(env, seed):
    try:
        result = env.reset(seed=seed)
    except TypeError as error:
        if "unexpected keyword argument 'seed'" in str(error):
            raise TypeError("reset() takes no seed, as in old Gym") from error
        raise
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError(f"reset() returned {type(result).__name__}, not (observation, info), as in old Gym")
    if not isinstance(result[1], dict):
        raise TypeError(f"reset() returned (observation, {type(result[1]).__name__}); its info must be a dict")
    return result[0]


def checked_step(env, action):
    result = env.step(action)
    if not (isinstance(result, tuple) and len(result) == 5):
        count = len(result) if isinstance(result, tuple) else type(result).__name__
        raise TypeError(f"step() returned {count} values, not 5, as in old Gym")
    return result


def finite_or_none(value):
    import math

    return float(value) if math.isfinite(value) else None


def describe_space(space):
    import numpy as np
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return {"kind": "discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.Box):
        return {
            "kind": "box",
            "shape": [int(size) for size in space.shape],
            "dtype": str(space.dtype),
            # JSON has no infinity: an unbounded side is null.
            # Cut before converting: a space of millions of elements would take minutes.
            "low": [finite_or_none(x) for x in np.ravel(space.low)[:4096].astype(np.float64)],
            "high": [finite_or_none(x) for x in np.ravel(space.high)[:4096].astype(np.float64)],
        }
    return {"kind": "other", "name": type(space).__name__, "text": str(space)[:200]}


class Observations:
    """Turns observations into the bytes a3g reads: float32 for vectors (a discrete
    observation one-hot), uint8 for images."""

    def __init__(self, space):
        import numpy as np

        self.np = np
        kind = space.get("kind")
        self.one_hot = space["n"] if kind == "discrete" else None
        self.start = space.get("start", 0)
        shape = space.get("shape", [])
        self.shape = tuple(shape)
        # As a3g reads images: height x width, or with 1, 3 or 4 channels.
        self.image = (
            kind == "box"
            and space["dtype"] == "uint8"
            and (len(shape) == 2 or (len(shape) == 3 and shape[2] in (1, 3, 4)))
        )

    def encode(self, observation):
        np = self.np
        if self.one_hot is not None:
            encoded = np.zeros(self.one_hot, dtype=np.float32)
            encoded[int(observation) - self.start] = 1.0
            return encoded.tobytes()
        if self.image:
            # Bytes of another type or layout would pass the length check as noise.
            image = np.asarray(observation)
            if image.dtype != np.uint8 or image.shape != self.shape:
                raise ValueError(
                    f"the observation is an array of {image.dtype} shaped {image.shape}, "
                    f"not the uint8 {self.shape} of its observation space"
                )
            return np.ascontiguousarray(image).tobytes()
        return np.ascontiguousarray(observation, dtype=np.float32).ravel().tobytes()


def serve(env, requests, replies, description):
    import numpy as np

    observations = Observations(description["observation"])
    action = description["action"]
    discrete = action["kind"] == "discrete"
    action_start = action.get("start", 0)
    action_dims = 1 if discrete else int(np.prod(action["shape"]))
    action_shape = None if discrete else tuple(action["shape"])
    while True:
        op = requests.read(1)
        if not op:
            return
        try:
            if op == b"r":
                seeded, seed = struct.unpack("<BQ", read_exactly(requests, 9))
                observation = checked_reset(env, seed if seeded else None)
                replies.ok(observations.encode(observation))
            elif op == b"s":
                if discrete:
                    (index,) = struct.unpack("<q", read_exactly(requests, 8))
                    chosen = index + action_start
                else:
                    data = read_exactly(requests, 4 * action_dims)
                    chosen = np.frombuffer(data, dtype=np.float32).reshape(action_shape)
                observation, reward, terminated, truncated, _ = checked_step(env, chosen)
                head = struct.pack("<dBB", float(reward), bool(terminated), bool(truncated))
                replies.ok(head + observations.encode(observation))
            elif op == b"f":
                frame = np.ascontiguousarray(env.render(), dtype=np.uint8)
                if frame.ndim != 3 or frame.shape[2] != 3:
                    raise ValueError(f"render() gave an array of shape {frame.shape}, not height x width x 3")
                replies.ok(struct.pack("<II", frame.shape[0], frame.shape[1]) + frame.tobytes())
            else:
                replies.error(f"a3g's host got an unknown request {op!r}")
                return
        except Exception:
            replies.error(traceback.format_exc())


def main():
    faulthandler.enable()
    requests = os.fdopen(0, "rb", buffering=0)
    # The replies keep stdout's pipe; whatever the environment prints goes to stderr.
    replies = Replies(os.fdopen(os.dup(1), "wb"))
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    request = json.loads(sys.argv[1])
    try:
        env = make(request)
        description = {
            "observation": describe_space(env.observation_space),
            "action": describe_space(env.action_space),
            "render_fps": (getattr(env, "metadata", None) or {}).get("render_fps"),
        }
    except BaseException:
        replies.error(traceback.format_exc())
        return
    replies.ok(json.dumps(description).encode())
    serve(env, requests, replies, description)


if __name__ == "__main__":
    main()
