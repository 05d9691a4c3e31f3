//! Segments, the unit of GA3C's experience (Babaeizadeh et al., arXiv:1611.06256): up
//! to `num_steps` agent steps of one agent, acted by the predictors' copy of the
//! model, and the A3C loss (arXiv:1602.01783) with GAE (arXiv:1506.02438) over a
//! batch of them, recomputed by the trainer's model.
//!
//! The loss replays every segment through the LSTM from the state its first step was
//! predicted from, all segments at once: a batch of segments costs as many forward
//! passes as its longest segment has steps, each over the segments still running,
//! instead of one per step of every segment.

use tch::{Device, Kind, Tensor};

use crate::device;
use crate::env::Action;
use crate::model::{ActorCritic, LstmState, LstmTape};
use crate::policy;
use crate::precision::Precision;
use crate::rollout::{compute_targets, Loss, LossConfig};

/// An LSTM state on the host, as a predictor saw it before a forward pass: how a
/// segment remembers where its first step started from. Both are empty for a model
/// without an LSTM.
#[derive(Clone, Debug, PartialEq)]
pub struct StartState {
    pub hidden: Vec<f32>,
    pub cell: Vec<f32>,
}

/// One agent's stretch of at most `num_steps` agent steps, on its way from the agent
/// to a trainer.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// The agent that played it.
    pub agent: usize,
    /// The LSTM state before the first step; zeros when the segment starts an episode.
    pub start_state: StartState,
    /// Each step's observation, flattened and laid end to end (steps x observation size).
    pub observations: Vec<f32>,
    /// Each step's action. A continuous action is the Gaussian's sample before it was
    /// clipped into the bounds for the environment: what its log-density is of.
    pub actions: Vec<Action>,
    /// log pi(action) under the policy that acted (summed over dimensions for
    /// continuous actions): the loss weighs each step by the trainer's policy's
    /// probability of the action against it, capped at 1.
    pub behaviour_log_probs: Vec<f32>,
    /// Rewards after shaping.
    pub rewards: Vec<f64>,
    /// Whether the episode ended at the last step by its own rules (Gymnasium's
    /// `terminated`), so the return stops there. An episode cut by a time limit is
    /// not done: its segment bootstraps from the value, and the next starts afresh.
    pub done: bool,
    /// The acting policy's value of the observation after the last step; 0 when done.
    pub bootstrap: f64,
    /// The shared model's update count when the first step was predicted: how far
    /// behind the trainer's model the acting policy was.
    pub policy_version: u64,
}

impl Segment {
    /// Agent steps in the segment.
    pub fn len(&self) -> usize {
        self.actions.len()
    }

    /// Whether the segment holds no step.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

/// The loss of a batch of segments.
pub struct SegmentLoss {
    /// The loss terms, each summed over every step of every segment, as
    /// `Rollout::loss` sums them over one rollout.
    pub loss: Loss,
    /// Agent steps the loss covers.
    pub agent_steps: usize,
    /// The re-unrolled LSTM steps: after the backward pass, their
    /// [`LstmTape::add_weight_gradients`] completes the gradients.
    pub lstm_tape: LstmTape,
}

/// Where each step of a batch sits once the segments are packed time-major, longest
/// first: step `t` of the segment ranked `r` is row `offsets[t] + r`, and the rows of
/// step `t` are the first `batch_sizes[t]` segments, those longer than `t`. Packing
/// (as PyTorch's packed sequences do) rather than padding means that no row past a
/// segment's end is computed at all, so none can leak into a state or a gradient.
struct Packing {
    /// Segment indices, longest first (ties in their given order).
    order: Vec<usize>,
    batch_sizes: Vec<usize>,
    offsets: Vec<usize>,
}

impl Packing {
    fn new(segments: &[Segment]) -> Self {
        let mut order: Vec<usize> = (0..segments.len()).collect();
        order.sort_by_key(|&index| std::cmp::Reverse(segments[index].len()));
        let longest = order.first().map_or(0, |&index| segments[index].len());
        let batch_sizes: Vec<usize> = (0..longest)
            .map(|t| segments.iter().filter(|segment| segment.len() > t).count())
            .collect();
        let offsets = batch_sizes
            .iter()
            .scan(0, |next, &size| {
                let offset = *next;
                *next += size;
                Some(offset)
            })
            .collect();
        Packing { order, batch_sizes, offsets }
    }

    /// The packed row of step `t` of the segment ranked `rank`.
    fn row(&self, t: usize, rank: usize) -> usize {
        self.offsets[t] + rank
    }

    /// The segments in rank order, with their ranks.
    fn ranked<'a>(&'a self, segments: &'a [Segment]) -> impl Iterator<Item = (usize, &'a Segment)> {
        self.order.iter().enumerate().map(move |(rank, &index)| (rank, &segments[index]))
    }
}

/// The A3C loss over `segments` under `model` (on `device`), whose observations have
/// `observation_shape`. Each segment is replayed from its start state; values,
/// log-probabilities and entropies come from `model`, so they are the trainer's
/// current policy's, and the returns and advantages are computed per segment from the
/// recomputed values, bootstrapped from the segment's own bootstrap value (0 when
/// done); each step's policy term is weighed by [`truncated_importance_weights`]. One
/// host sync: the read of the values.
pub fn batched_loss(
    model: &ActorCritic,
    segments: &[Segment],
    observation_shape: &[i64],
    config: &LossConfig,
    device: Device,
    precision: Precision,
) -> SegmentLoss {
    let packing = Packing::new(segments);
    let agent_steps: usize = packing.batch_sizes.iter().sum();
    assert!(agent_steps > 0, "a batch of segments holds at least one step");
    let observation_len: i64 = observation_shape.iter().product();
    let inputs = PackedInputs::new(segments, &packing, observation_len as usize);
    let observations_shape = [&[agent_steps as i64][..], observation_shape].concat();
    let observations = device::upload(&inputs.observations, &observations_shape, device);
    let actions = device::upload(&inputs.actions, &[agent_steps as i64, -1], device);
    let behaviour_log_probs = device::upload(&inputs.behaviour_log_probs, &[-1], device);
    // Explicit sizes: a model without an LSTM has empty states, which -1 cannot size.
    let state_shape = [segments.len() as i64, inputs.state_width as i64];
    let mut state = LstmState {
        hidden: device::upload(&inputs.start_hidden, &state_shape, device),
        cell: device::upload(&inputs.start_cell, &state_shape, device),
    };
    // The body runs once over every step of the batch; only the LSTM cell has to go
    // step by step, and the heads run once over all its outputs.
    let features = model.features_in(precision, &observations);
    // Split once rather than narrowed per step: each narrow's backward would write a
    // zero-filled gradient of the whole batch.
    let batch_sizes: Vec<i64> = packing.batch_sizes.iter().map(|&rows| rows as i64).collect();
    let input_gates =
        model.input_gates(&features).map(|gates| gates.split_with_sizes(&batch_sizes, 0));
    let mut lstm_tape = LstmTape::default();
    let mut heads_input = Vec::with_capacity(packing.batch_sizes.len());
    for (t, &rows) in packing.batch_sizes.iter().enumerate() {
        let (offset, rows) = (packing.offsets[t] as i64, rows as i64);
        // Segments that have ended drop out of the batch: they are the last rows.
        state = LstmState {
            hidden: state.hidden.narrow(0, 0, rows),
            cell: state.cell.narrow(0, 0, rows),
        };
        let (output, next) = match &input_gates {
            Some(gates) => model.recurrent_step_recorded(&gates[t], &state, &mut lstm_tape),
            None => model.recurrent_step(&features.narrow(0, offset, rows), &state),
        };
        heads_input.push(output);
        state = next;
    }
    let (values, policy) = model.heads(&Tensor::cat(&heads_input, 0));
    let values = values.view([-1]);
    let (log_probs, entropies) = policy::action_terms(&policy, &actions);
    let (returns, advantages) = targets(segments, &packing, &device::read(&values), config);
    let returns = device::upload(&returns, &[-1], device);
    let advantages = device::upload(&advantages, &[-1], device);
    let weights = truncated_importance_weights(&log_probs, &behaviour_log_probs);
    let policy = -(log_probs * advantages * weights).sum(Kind::Float);
    let value = ((returns - values).square() * 0.5).sum(Kind::Float);
    let entropy = entropies.sum(Kind::Float);
    let total = &policy - &entropy * config.entropy_coef + &value * config.value_coef;
    SegmentLoss { loss: Loss { policy, value, entropy, total }, agent_steps, lstm_tape }
}

/// Each step's weight in the policy loss: the ratio of the trainer's probability of
/// the action to the acting policy's, capped at 1 and outside the graph (IMPALA's
/// truncated importance weight, rho-bar = 1, arXiv:1802.01561).
///
/// A segment acted by weights some updates old holds actions the trainer's policy may
/// find far less likely than the acting one did. Unweighted, a negative advantage on
/// such an action asks the policy to make it less likely still, and a Gaussian can do
/// that without bound by narrowing around its mean: the further the action, the
/// steeper the pull. Runs on Pendulum did that and stayed there, the standard
/// deviation at its floor (docs/benchmarks.md). The weight fades such a step out and
/// leaves the loss of a step the trainer likes at least as well as A3C's.
fn truncated_importance_weights(log_probs: &Tensor, behaviour_log_probs: &Tensor) -> Tensor {
    (log_probs.detach() - behaviour_log_probs).exp().clamp_max(1.0)
}

/// A batch's inputs on the host, in packed order, ready for one upload each.
struct PackedInputs {
    /// `[steps, observation size]`.
    observations: Vec<f32>,
    /// `[steps, 1]` action indices, or `[steps, dims]` continuous actions.
    actions: Vec<f32>,
    /// `[steps]`: log pi(action) under the policy that acted.
    behaviour_log_probs: Vec<f32>,
    /// `[segments, state_width]` each, in rank order.
    start_hidden: Vec<f32>,
    start_cell: Vec<f32>,
    /// The LSTM's size, 0 without one.
    state_width: usize,
}

impl PackedInputs {
    fn new(segments: &[Segment], packing: &Packing, observation_len: usize) -> Self {
        let steps: usize = packing.batch_sizes.iter().sum();
        let mut observations = vec![0.0; steps * observation_len];
        let mut actions: Vec<Vec<f32>> = vec![Vec::new(); steps];
        let mut behaviour_log_probs = vec![0.0; steps];
        let (mut start_hidden, mut start_cell) = (Vec::new(), Vec::new());
        let state_width = segments.first().map_or(0, |segment| segment.start_state.hidden.len());
        for (rank, segment) in packing.ranked(segments) {
            let agent = segment.agent;
            assert_eq!(
                segment.observations.len(),
                segment.len() * observation_len,
                "agent {agent}'s segment holds one observation per step"
            );
            assert_eq!(segment.rewards.len(), segment.len(), "agent {agent}: a reward per step");
            assert_eq!(
                segment.behaviour_log_probs.len(),
                segment.len(),
                "agent {agent}: a behaviour log-probability per step"
            );
            for part in [&segment.start_state.hidden, &segment.start_state.cell] {
                assert_eq!(
                    part.len(),
                    state_width,
                    "agent {agent}'s start state has the LSTM's size"
                );
            }
            start_hidden.extend(&segment.start_state.hidden);
            start_cell.extend(&segment.start_state.cell);
            for (t, action) in segment.actions.iter().enumerate() {
                let row = packing.row(t, rank);
                observations[row * observation_len..][..observation_len].copy_from_slice(
                    &segment.observations[t * observation_len..][..observation_len],
                );
                behaviour_log_probs[row] = segment.behaviour_log_probs[t];
                // Indices are exact in f32 up to 2^24, far beyond any action count.
                actions[row] = match action {
                    Action::Discrete(index) => vec![*index as f32],
                    Action::Continuous(values) => values.clone(),
                };
            }
        }
        PackedInputs {
            observations,
            actions: actions.concat(),
            behaviour_log_probs,
            start_hidden,
            start_cell,
            state_width,
        }
    }
}

/// Returns and advantages of every step, in packed order, from the values the trainer
/// recomputed (`values`, packed) and each segment's rewards and bootstrap.
fn targets(
    segments: &[Segment],
    packing: &Packing,
    values: &[f64],
    config: &LossConfig,
) -> (Vec<f32>, Vec<f32>) {
    let mut returns = vec![0.0; values.len()];
    let mut advantages = vec![0.0; values.len()];
    for (rank, segment) in packing.ranked(segments) {
        let rows: Vec<usize> = (0..segment.len()).map(|t| packing.row(t, rank)).collect();
        let segment_values: Vec<f64> = rows.iter().map(|&row| values[row]).collect();
        let bootstrap = if segment.done { 0.0 } else { segment.bootstrap };
        let targets =
            compute_targets(&segment.rewards, &segment_values, bootstrap, config.gamma, config.tau);
        for (t, &row) in rows.iter().enumerate() {
            returns[row] = targets.returns[t] as f32;
            advantages[row] = targets.advantages[t] as f32;
        }
    }
    (returns, advantages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Body, Head, ModelSpec, Policy, DEFAULT_MIN_STD, UNIVERSE84_SIDE, UNIVERSE_SIDE,
    };
    use crate::rollout::Rollout;
    use tch::nn;

    fn mlp(head: Head, lstm: bool) -> ModelSpec {
        ModelSpec { body: Body::Mlp { inputs: 4, lstm, input_norm: None }, hidden_size: 8, head }
    }

    fn discrete() -> Head {
        Head::Discrete { actions: 3 }
    }

    /// Pendulum-like bounds, in two dimensions so the log-density's sum is exercised.
    fn gaussian() -> Head {
        Head::Gaussian { low: vec![-2.0, -1.0], high: vec![2.0, 1.0], min_std: DEFAULT_MIN_STD }
    }

    fn observation_shape(spec: &ModelSpec) -> Vec<i64> {
        match spec.body {
            Body::Mlp { inputs, .. } => vec![inputs],
            Body::Universe | Body::UniverseMax => vec![1, UNIVERSE_SIDE, UNIVERSE_SIDE],
            Body::Universe84 => vec![1, UNIVERSE84_SIDE, UNIVERSE84_SIDE],
            Body::AtariLstm => vec![1, 80, 80],
        }
    }

    fn random(shape: &[i64], scale: f64) -> Tensor {
        Tensor::randn(shape, (Kind::Float, Device::Cpu)) * scale
    }

    fn host(tensor: &Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(tensor.detach().reshape([-1])).unwrap()
    }

    /// `actual` equals `expected` within 1e-5, relative to `expected`'s largest
    /// magnitude where that is over 1.
    fn assert_close(actual: &Tensor, expected: &Tensor, what: &str) {
        assert_eq!(actual.size(), expected.size(), "{what}");
        let scale = expected.abs().max().double_value(&[]).max(1.0);
        let difference = (actual - expected).abs().max().double_value(&[]);
        assert!(difference <= 1e-5 * scale, "{what} differs by {difference} (scale {scale})");
    }

    fn policy_tensors(policy: &Policy) -> Vec<Tensor> {
        match policy {
            Policy::Logits(logits) => vec![logits.shallow_clone()],
            Policy::Gaussian { mean, std } => vec![mean.shallow_clone(), std.shallow_clone()],
        }
    }

    /// Rows of a batch are independent: one forward pass over B agents' observations
    /// and LSTM states gives each agent the value, policy and new state that a forward
    /// pass over it alone gives, for each body and head, so batching agents (the
    /// predictors) or segments (the loss) changes nothing but speed.
    #[test]
    fn batched_forward_equals_single_forwards() {
        tch::manual_seed(1);
        let universe = ModelSpec {
            body: Body::Universe,
            hidden_size: 16,
            head: Head::Discrete { actions: 4 },
        };
        let atari = ModelSpec {
            body: Body::AtariLstm,
            hidden_size: 16,
            head: Head::Discrete { actions: 6 },
        };
        let cases =
            [(mlp(discrete(), true), 5), (mlp(gaussian(), true), 4), (universe, 3), (atari, 3)];
        for (spec, batch) in cases {
            let model = ActorCritic::new(&nn::VarStore::new(Device::Cpu), &spec);
            let shape = [&[batch][..], &observation_shape(&spec)].concat();
            let observations = random(&shape, 1.0);
            let hidden = random(&[batch, spec.hidden_size], 0.5);
            let cell = random(&[batch, spec.hidden_size], 0.5);
            let state = LstmState { hidden: hidden.shallow_clone(), cell: cell.shallow_clone() };
            let batched = tch::no_grad(|| model.forward(&observations, &state));
            for row in 0..batch {
                let state =
                    LstmState { hidden: hidden.narrow(0, row, 1), cell: cell.narrow(0, row, 1) };
                let single =
                    tch::no_grad(|| model.forward(&observations.narrow(0, row, 1), &state));
                let what = |part: &str| format!("{:?} row {row}: {part}", spec.body);
                assert_close(&batched.value.narrow(0, row, 1), &single.value, &what("value"));
                for (batched, single) in
                    policy_tensors(&batched.policy).iter().zip(policy_tensors(&single.policy))
                {
                    assert_close(&batched.narrow(0, row, 1), &single, &what("policy"));
                }
                assert_close(
                    &batched.state.hidden.narrow(0, row, 1),
                    &single.state.hidden,
                    &what("hidden"),
                );
                assert_close(
                    &batched.state.cell.narrow(0, row, 1),
                    &single.state.cell,
                    &what("cell"),
                );
            }
        }
    }

    /// A segment of `len` steps with random observations and rewards; actions cycle
    /// through the discrete ones, or are Gaussian samples some of which lie outside the
    /// bounds (they were taken before clipping).
    fn segment(spec: &ModelSpec, agent: usize, len: usize, done: bool, bootstrap: f64) -> Segment {
        let width = if spec.has_lstm() { spec.hidden_size } else { 0 };
        // A segment that starts an episode starts from zeros, one mid-episode from
        // wherever its LSTM was.
        let start = |scale| host(&random(&[width], if agent == 0 { 0.0 } else { scale }));
        let observation_len: i64 = observation_shape(spec).iter().product();
        let actions = (0..len)
            .map(|t| match &spec.head {
                Head::Discrete { actions } => Action::Discrete((agent + t) % *actions as usize),
                Head::Gaussian { low, .. } => {
                    Action::Continuous(host(&random(&[low.len() as i64], 2.0)))
                }
            })
            .collect();
        Segment {
            agent,
            start_state: StartState { hidden: start(0.3), cell: start(0.6) },
            observations: host(&random(&[len as i64, observation_len], 1.0)),
            actions,
            // An acting policy that found every action less likely than any trainer's
            // does: every importance weight is 1, and the loss is A3C's.
            behaviour_log_probs: vec![-1e4; len],
            rewards: (0..len).map(|t| ((agent * 7 + t) as f64).sin()).collect(),
            done,
            bootstrap,
            policy_version: 0,
        }
    }

    /// One segment replayed one step at a time at batch 1 from its start state, its
    /// log-probabilities and entropies written out by hand, into a `Rollout`.
    fn replay(model: &ActorCritic, segment: &Segment) -> Rollout {
        let width = segment.start_state.hidden.len() as i64;
        let mut state = LstmState {
            hidden: Tensor::from_slice(&segment.start_state.hidden).view([1, width]),
            cell: Tensor::from_slice(&segment.start_state.cell).view([1, width]),
        };
        let shape = [&[1][..], &observation_shape(model.spec())].concat();
        let observation_len = segment.observations.len() / segment.len();
        let mut rollout = Rollout::default();
        for (t, action) in segment.actions.iter().enumerate() {
            let observation = &segment.observations[t * observation_len..][..observation_len];
            let output =
                model.forward(&Tensor::from_slice(observation).view(shape.as_slice()), &state);
            let (log_prob, entropy) = match (&output.policy, action) {
                (Policy::Logits(logits), Action::Discrete(index)) => {
                    let probabilities = logits.softmax(1, Kind::Float);
                    let entropy = -(&probabilities * probabilities.log()).sum(Kind::Float);
                    (probabilities.select(1, *index as i64).log(), entropy)
                }
                (Policy::Gaussian { mean, std }, Action::Continuous(values)) => {
                    let x = Tensor::from_slice(values).view([1, -1]);
                    let root_two_pi = (2.0 * std::f64::consts::PI).sqrt();
                    let z = (x - mean) / std;
                    let log_density = -(&z * &z) * 0.5 - (std * root_two_pi).log();
                    (
                        log_density.sum(Kind::Float),
                        ((std * root_two_pi).log() + 0.5).sum(Kind::Float),
                    )
                }
                _ => panic!("the action matches the head"),
            };
            rollout.value_estimates.push(output.value.double_value(&[0, 0]));
            rollout.values.push(output.value);
            rollout.log_probs.push(log_prob.view([1]));
            rollout.entropies.push(entropy.view([1]));
            rollout.rewards.push(segment.rewards[t]);
            state = output.state;
        }
        rollout
    }

    /// The reference A3C loss of one segment: its replay's own loss.
    fn replayed_loss(model: &ActorCritic, segment: &Segment, config: &LossConfig) -> Loss {
        replay(model, segment).loss(if segment.done { 0.0 } else { segment.bootstrap }, config)
    }

    /// `model`'s log-probability of each of `segment`'s actions, from its replay.
    fn own_log_probs(model: &ActorCritic, segment: &Segment) -> Vec<f32> {
        replay(model, segment)
            .log_probs
            .iter()
            .map(|log_prob| log_prob.double_value(&[0]) as f32)
            .collect()
    }

    fn gradients(model: &ActorCritic) -> Vec<Tensor> {
        model.parameters().iter().map(|(_, parameter)| parameter.grad().copy()).collect()
    }

    fn zero_gradients(model: &ActorCritic) {
        for (_, parameter) in model.parameters() {
            parameter.shallow_clone().zero_grad();
        }
    }

    /// The loss over a batch of segments of different lengths (one ended its episode,
    /// one was cut with a nonzero bootstrap value, one starts an episode from zeros)
    /// has, term by term and in every parameter's gradient, the sum of what each
    /// segment replayed alone at batch 1 through `Rollout::loss` has: packing neither
    /// drops a step nor lets one segment's rows touch another's. Checked for discrete
    /// and Gaussian heads with an LSTM and for an MLP without one; the loss reads the
    /// host once.
    #[test]
    fn batched_loss_gradients_equal_the_sum_of_single_replays() {
        tch::manual_seed(2);
        let config = LossConfig { gamma: 0.9, tau: 0.95, entropy_coef: 0.01, value_coef: 0.5 };
        for spec in [mlp(discrete(), true), mlp(gaussian(), true), mlp(discrete(), false)] {
            let model = ActorCritic::new(&nn::VarStore::new(Device::Cpu), &spec);
            let segments = [
                segment(&spec, 0, 2, false, -0.4),
                segment(&spec, 1, 5, false, 0.7),
                segment(&spec, 2, 3, true, 0.0),
                segment(&spec, 3, 1, false, 1.5),
                segment(&spec, 4, 5, true, 0.0),
            ];
            let shape = observation_shape(&spec);
            zero_gradients(&model);
            let syncs = device::host_syncs();
            let batched =
                batched_loss(&model, &segments, &shape, &config, Device::Cpu, Precision::Fp32);
            assert_eq!(device::host_syncs() - syncs, 1, "one read of the values");
            assert_eq!(batched.agent_steps, 16);
            batched.loss.total.backward();
            batched.lstm_tape.add_weight_gradients(&model);
            let batched_gradients = gradients(&model);
            zero_gradients(&model);
            let mut terms = [0.0; 4];
            for segment in &segments {
                let loss = replayed_loss(&model, segment, &config);
                loss.total.backward();
                for (sum, term) in
                    terms.iter_mut().zip([&loss.policy, &loss.value, &loss.entropy, &loss.total])
                {
                    *sum += term.double_value(&[]);
                }
            }
            let batched_terms = [
                &batched.loss.policy,
                &batched.loss.value,
                &batched.loss.entropy,
                &batched.loss.total,
            ];
            for ((term, expected), name) in
                batched_terms.iter().zip(terms).zip(["policy", "value", "entropy", "total"])
            {
                let actual = term.double_value(&[]);
                assert!(
                    (actual - expected).abs() <= 1e-5 * expected.abs().max(1.0),
                    "{name}: {actual} != {expected}"
                );
            }
            for (((name, _), batched), replayed) in
                model.parameters().iter().zip(&batched_gradients).zip(gradients(&model))
            {
                assert!(replayed.abs().max().double_value(&[]) > 0.0, "{name} has a gradient");
                assert_close(batched, &replayed, &format!("{:?} gradient of {name}", spec.head));
            }
        }
    }

    /// A bf16 trainer pass (the universe body under autocast, as --precision bf16 runs
    /// it) gives every parameter's gradient within 5% of the fp32 pass's on the same
    /// batch, by the norm of their difference: bf16 keeps 8 bits of mantissa, and
    /// these sums of thousands of products lose about 1% of their norm to it. The
    /// weights and their gradients stay fp32.
    #[test]
    fn a_bf16_pass_gives_the_fp32_gradients_to_a_stated_tolerance() {
        tch::manual_seed(4);
        let config = LossConfig { gamma: 0.99, tau: 1.0, entropy_coef: 0.01, value_coef: 0.5 };
        let spec = ModelSpec { body: Body::Universe, hidden_size: 32, head: discrete() };
        let model = ActorCritic::new(&nn::VarStore::new(Device::Cpu), &spec);
        let segments: Vec<Segment> =
            (0..4).map(|agent| segment(&spec, agent, 5, agent == 2, 0.5)).collect();
        let shape = observation_shape(&spec);
        let pass = |precision| {
            zero_gradients(&model);
            let loss = batched_loss(&model, &segments, &shape, &config, Device::Cpu, precision);
            loss.loss.total.backward();
            loss.lstm_tape.add_weight_gradients(&model);
            gradients(&model)
        };
        let (exact, mixed) = (pass(Precision::Fp32), pass(Precision::Bf16));
        for (((name, parameter), exact), mixed) in model.parameters().iter().zip(&exact).zip(&mixed)
        {
            assert_eq!((parameter.kind(), mixed.kind()), (Kind::Float, Kind::Float), "{name}");
            let norm = exact.norm().double_value(&[]);
            let error = (mixed - exact).norm().double_value(&[]);
            assert!(norm > 0.0, "{name} has a gradient");
            assert!(error <= 0.05 * norm, "{name}: {error} off a norm of {norm}");
        }
    }

    /// A step whose action the trainer's policy finds less likely than the acting
    /// policy did counts in the policy loss at the ratio of the two probabilities (a
    /// quarter, here), in its value and gradient; the value and entropy terms are not
    /// weighed, and a step the trainer likes better counts fully.
    #[test]
    fn stale_steps_are_weighed_by_their_probability_ratio() {
        tch::manual_seed(4);
        let config = LossConfig { gamma: 0.9, tau: 0.95, entropy_coef: 0.01, value_coef: 0.5 };
        for spec in [mlp(discrete(), true), mlp(gaussian(), true)] {
            let model = ActorCritic::new(&nn::VarStore::new(Device::Cpu), &spec);
            let shape = observation_shape(&spec);
            let loss_of = |segment: &Segment| {
                zero_gradients(&model);
                let loss = batched_loss(
                    &model,
                    std::slice::from_ref(segment),
                    &shape,
                    &config,
                    Device::Cpu,
                    Precision::Fp32,
                );
                // The value term, at weight 0, only gives the critic a (zero) gradient.
                (&loss.loss.policy + &loss.loss.value * 0.0).backward();
                loss.lstm_tape.add_weight_gradients(&model);
                let terms = [&loss.loss.policy, &loss.loss.value, &loss.loss.entropy]
                    .map(|term| term.double_value(&[]));
                (terms, gradients(&model))
            };
            let mut segment = segment(&spec, 1, 4, false, 0.3);
            let (unweighted, unweighted_gradients) = loss_of(&segment);
            let own = own_log_probs(&model, &segment);
            segment.behaviour_log_probs = own.iter().map(|&p| p + 4f32.ln()).collect();
            let (quartered, quartered_gradients) = loss_of(&segment);
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-5 * b.abs().max(1.0);
            assert!(close(quartered[0], unweighted[0] / 4.0), "{quartered:?} {unweighted:?}");
            assert!(close(quartered[1], unweighted[1]) && close(quartered[2], unweighted[2]));
            for (quartered, unweighted) in quartered_gradients.iter().zip(&unweighted_gradients) {
                assert_close(quartered, &(unweighted / 4.0), "quartered gradient");
            }
            segment.behaviour_log_probs = own.iter().map(|&p| p - 4f32.ln()).collect();
            let (favoured, _) = loss_of(&segment);
            assert!(close(favoured[0], unweighted[0]), "{favoured:?} {unweighted:?}");
        }
    }

    /// Segments of 2, 3 and 1 steps pack longest first: step 0 of all three (rows
    /// 0-2), step 1 of the two longer (rows 3-4), step 2 of the longest (row 5).
    #[test]
    fn packing_puts_steps_time_major_longest_first() {
        let spec = mlp(discrete(), true);
        let segments =
            [1, 2, 3].map(|agent| segment(&spec, agent, [2, 3, 1][agent - 1], true, 0.0));
        let packing = Packing::new(&segments);
        assert_eq!(packing.order, [1, 0, 2]);
        assert_eq!(packing.batch_sizes, [3, 2, 1]);
        assert_eq!(packing.offsets, [0, 3, 5]);
        assert_eq!(packing.row(2, 0), 5);
        assert_eq!(packing.row(1, 1), 4);
    }
}
