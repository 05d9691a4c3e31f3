//! Environments the trainer runs: Atari games through the ALE emulator.

pub mod atari;
