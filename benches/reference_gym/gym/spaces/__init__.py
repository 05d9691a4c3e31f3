"""gym.spaces for the stand-in: gymnasium's Box and Discrete, which the reference only
reads `.shape` and `.n` from."""

from gymnasium.spaces import Box, Discrete

__all__ = ["Box", "Discrete"]
