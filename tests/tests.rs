//! Integration tests, one binary for all areas (see `util` for the helpers).

mod util;

mod cli;
mod envs;
mod eval;
mod gpu;
mod runtime;
mod safety;
mod tensorboard;
mod train;
