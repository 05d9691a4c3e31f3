//! Integration tests, one binary for all areas (see `util` for the helpers).

mod util;

mod cli;
// Training across machines: two ranks on 127.0.0.1.
mod distributed;
mod envs;
mod eval;
mod ga3c;
mod gpu;
// Environments from outside a3g, in Python processes it owns.
mod gym;
// Never lose a model: scenarios a hostile user found, round two.
mod keeping;
// `a3g plot`: learning curves from written logs, read back as PNGs.
mod plot;
mod runtime;
mod safety;
mod tensorboard;
mod train;
