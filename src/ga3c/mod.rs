//! The batched trainer, after NVlabs' GA3C (Babaeizadeh et al., arXiv:1611.06256):
//! agents play their environments and ask predictors for actions; predictors answer
//! many agents with one forward pass; trainers learn from the agents' segments.
//!
//! - [`segment`]: a stretch of one agent's experience, and the loss over a batch of
//!   them (no threads).
//! - [`predictor`]: batched acting, and the agents' LSTM states.
//! - [`agent`]: an agent's loop: predict, sample, step, send segments.

pub mod agent;
pub mod predictor;
pub mod segment;
