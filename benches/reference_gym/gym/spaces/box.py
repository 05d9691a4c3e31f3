"""gym.spaces.box, where the reference imports Box from."""

from gymnasium.spaces import Box

__all__ = ["Box"]
