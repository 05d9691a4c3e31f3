//! GA3C agents (Babaeizadeh et al., arXiv:1611.06256): each plays its own environment,
//! asks the predictors for its policy at every step, samples the action itself from
//! its own seeded stream, and hands its experience to the trainers in segments.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam::channel::{RecvTimeoutError, SendTimeoutError, Sender};

use crate::counters::TrainingCounters;
use crate::env::rng::Rng;
use crate::env::{Action, Env};
use crate::error::{Error, Result};
use crate::ga3c::predictor::{PolicyRow, Reply, Request};
use crate::ga3c::segment::Segment;
use crate::policy;
use crate::rollout::RewardShaping;
use crate::stop::Stop;

/// How often an agent waiting for its reply looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Mixed into an agent's seed for its action stream, which would otherwise be the
/// environment's own when both are seeded alike.
const ACTION_STREAM: u64 = 0x6167_656e_7473;

/// What an agent is made from.
pub struct AgentSetup {
    /// The agent's number: its row in the predictors' slot table.
    pub index: usize,
    pub env: Box<dyn Env>,
    /// Seeds the agent's action stream.
    pub seed: u64,
    pub rewards: RewardShaping,
    /// Agent steps per segment, at most.
    pub num_steps: u32,
    /// Agent steps after which an episode is cut.
    pub max_episode_length: u32,
    /// The predictors' queue.
    pub requests: Sender<Request>,
    /// The trainers' queue.
    pub segments: Sender<Segment>,
    /// The run's counters, which each step adds to.
    pub counters: Arc<TrainingCounters>,
    /// Set by whoever tunes the number of agents, to remove this one: it finishes the
    /// segment it is playing, sends it, and ends. Read once per agent step.
    pub retire: Arc<AtomicBool>,
}

/// A sampled action: what the segment records and what the environment is given.
#[derive(Clone, Debug, PartialEq)]
struct Sampled {
    /// The action as drawn: for a Gaussian, before clipping.
    drawn: Action,
    /// The action the environment gets: for a Gaussian, clipped into its bounds.
    played: Action,
    /// log pi(drawn) under the replying policy.
    log_prob: f32,
}

/// Plays until a stop is requested, the agent is retired, or a queue it needs has
/// closed (no predictor or no trainer left). A stop drops the segment in play; retiring
/// finishes it first. Fails if the environment gives an observation of the wrong size,
/// which the predictor serving many agents must not be handed.
pub fn run_agent(setup: AgentSetup, stop: &Stop) -> Result<()> {
    let AgentSetup { index, mut env, seed, rewards, num_steps, max_episode_length, .. } = setup;
    let action_space = env.action_space().clone();
    let observation_len = env.observation_shape().iter().product::<i64>() as usize;
    let env_id = env.id().to_string();
    let check = |observation: Vec<f32>| -> Result<Vec<f32>> {
        if observation.len() == observation_len {
            Ok(observation)
        } else {
            let found = observation.len();
            Err(Error::Training(format!(
                "agent {index}: {env_id} gave an observation of {found} values, \
                 not the {observation_len} of its shape"
            )))
        }
    };
    let mut rng = Rng::new(seed ^ ACTION_STREAM);
    let mut observation = check(env.reset(None)?)?;
    let mut frames_seen = env.env_frames();
    let mut episode_length = 0;
    let mut episode_starts = true;
    let mut playing: Option<Segment> = None;
    // A full segment, sent once the next reply brings the value it bootstraps from.
    let mut awaiting_bootstrap: Option<Segment> = None;
    // The episode was cut by a time limit: the next reply, the value of its last
    // observation, bootstraps its segment, and the game is reset after it.
    let mut truncated = false;
    loop {
        let wants_start = playing.is_none() && !truncated;
        let Some(reply) =
            predict(&setup.requests, index, &observation, episode_starts, wants_start, stop)
        else {
            return Ok(());
        };
        if let Some(mut full) = awaiting_bootstrap.take() {
            full.bootstrap = reply.value;
            if !send(&setup.segments, full, stop) {
                return Ok(());
            }
        }
        if truncated {
            truncated = false;
            observation = check(env.reset(None)?)?;
            episode_starts = true;
            continue;
        }
        if playing.is_none() && setup.retire.load(Ordering::Relaxed) {
            return Ok(());
        }
        let segment = playing.get_or_insert_with(|| start_segment(index, &reply));
        let sampled = sample(&reply.policy, &mut rng, action_space.bounds());
        let step = env.step(&sampled.played)?;
        episode_length += 1;
        segment.observations.extend_from_slice(&observation);
        segment.actions.push(sampled.drawn);
        segment.behaviour_log_probs.push(sampled.log_prob);
        // Shaped for learning only; scores stay raw.
        segment.rewards.push(rewards.apply(step.reward));
        let frames = env.env_frames();
        setup.counters.count_agent_step(frames - frames_seen, stop);
        frames_seen = frames;
        let done = step.done() || episode_length >= max_episode_length;
        observation = check(step.observation)?;
        if done && !step.terminated {
            // Gymnasium's truncation: the return goes on past the cut, as the value of
            // the last observation estimates it.
            episode_length = 0;
            truncated = true;
            awaiting_bootstrap = playing.take();
        } else if done {
            observation = check(env.reset(None)?)?;
            episode_length = 0;
            segment.done = true;
            let ended = playing.take().expect("a segment is in play");
            if !send(&setup.segments, ended, stop) {
                return Ok(());
            }
        } else if segment.len() >= num_steps as usize {
            awaiting_bootstrap = playing.take();
        }
        episode_starts = done && !truncated;
    }
}

/// An empty segment starting from the state and policy version of `reply`.
fn start_segment(agent: usize, reply: &Reply) -> Segment {
    Segment {
        agent,
        start_state: reply
            .start_state
            .clone()
            .expect("a segment's first request asks for its state"),
        observations: Vec::new(),
        actions: Vec::new(),
        behaviour_log_probs: Vec::new(),
        rewards: Vec::new(),
        done: false,
        bootstrap: 0.0,
        policy_version: reply.policy_version,
    }
}

/// Asks the predictors about `observation` and waits for the reply; `None` if a stop
/// comes first or no predictor is left to answer. Each request brings its own reply
/// channel, so a predictor that ends with the request unanswered closes it, and the
/// agent sees that at once rather than at the next stop poll.
fn predict(
    requests: &Sender<Request>,
    agent: usize,
    observation: &[f32],
    reset_state: bool,
    want_start_state: bool,
    stop: &Stop,
) -> Option<Reply> {
    let (reply, replies) = crossbeam::channel::bounded(1);
    let request =
        Request { agent, observation: observation.to_vec(), reset_state, want_start_state, reply };
    if !send(requests, request, stop) {
        return None;
    }
    loop {
        if stop.requested() {
            return None;
        }
        match replies.recv_timeout(STOP_POLL) {
            Ok(reply) => return Some(reply),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return None,
        }
    }
}

/// Sends `item`, waiting while the queue is full (queues may be bounded, to hold
/// agents back when the trainers fall behind); false if a stop comes first or no one
/// is left to receive.
fn send<T>(queue: &Sender<T>, mut item: T, stop: &Stop) -> bool {
    loop {
        match queue.send_timeout(item, STOP_POLL) {
            Ok(()) => return true,
            Err(SendTimeoutError::Timeout(unsent)) if !stop.requested() => item = unsent,
            Err(_) => return false,
        }
    }
}

/// Draws an action from a predictor's policy row with the agent's own stream: a
/// discrete action by its probability, a continuous one as mean + std * N(0, 1) per
/// dimension, clipped into `bounds` for the environment as the A3C workers clip theirs, its
/// log-density that of the unclipped draw.
fn sample(policy: &PolicyRow, rng: &mut Rng, bounds: Option<(&[f32], &[f32])>) -> Sampled {
    match policy {
        PolicyRow::Probabilities(probabilities) => {
            let index = rng.categorical(probabilities);
            let log_prob = f64::from(probabilities[index]).ln() as f32;
            Sampled { drawn: Action::Discrete(index), played: Action::Discrete(index), log_prob }
        }
        PolicyRow::Gaussian { mean, std } => {
            let mut log_prob = 0.0;
            let drawn: Vec<f32> = mean
                .iter()
                .zip(std)
                .map(|(&mean, &std)| {
                    let (mean, std) = (f64::from(mean), f64::from(std));
                    let noise = rng.normal();
                    log_prob += -0.5 * noise * noise - std.ln() - 0.5 * std::f64::consts::TAU.ln();
                    (mean + std * noise) as f32
                })
                .collect();
            let played = policy::clip(drawn.clone(), bounds);
            Sampled {
                drawn: Action::Continuous(drawn),
                played: Action::Continuous(played),
                log_prob: log_prob as f32,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{self, EnvOptions};
    use crate::ga3c::predictor::{
        run_predictor, Batching, PredictorCounters, PredictorSetup, SlotTable,
    };
    use crate::model::{ActorCritic, ModelSpec};
    use crate::precision::Precision;
    use crate::shared::SharedModel;
    use crate::shared_optim::{LearningRate, OptimizerKind};
    use crate::stop::StopReason;
    use crossbeam::channel::{unbounded, Receiver};
    use std::thread::JoinHandle;
    use std::time::Instant;
    use tch::{nn, Device};

    /// A discrete draw's log-probability is that of its index; a Gaussian draw is
    /// recorded as drawn, played clipped into the bounds, and its log-density is the
    /// closed form at the unclipped draw.
    #[test]
    fn samples_follow_the_policy_row() {
        let mut rng = Rng::new(9);
        let probabilities = [0.2f32, 0.5, 0.3];
        for _ in 0..20 {
            let sampled = sample(&PolicyRow::Probabilities(probabilities.to_vec()), &mut rng, None);
            let Action::Discrete(index) = sampled.drawn else { panic!("discrete expected") };
            assert_eq!(sampled.played, sampled.drawn);
            let expected = f64::from(probabilities[index]).ln();
            assert!((f64::from(sampled.log_prob) - expected).abs() < 1e-6);
        }
        let (mean, std) = ([0.5f32, -1.0], [2.0f32, 0.1]);
        let (low, high) = ([-0.2f32, -2.0], [0.2f32, 2.0]);
        let policy = PolicyRow::Gaussian { mean: mean.to_vec(), std: std.to_vec() };
        let mut clipped = 0;
        for _ in 0..20 {
            let sampled = sample(&policy, &mut rng, Some((&low, &high)));
            let (Action::Continuous(drawn), Action::Continuous(played)) =
                (&sampled.drawn, &sampled.played)
            else {
                panic!("continuous expected")
            };
            let mut expected = 0.0;
            for d in 0..2 {
                let (x, m, s) = (f64::from(drawn[d]), f64::from(mean[d]), f64::from(std[d]));
                expected +=
                    -(x - m).powi(2) / (2.0 * s * s) - (s * std::f64::consts::TAU.sqrt()).ln();
                assert_eq!(played[d], drawn[d].clamp(low[d], high[d]));
            }
            assert!((f64::from(sampled.log_prob) - expected).abs() < 1e-4, "{sampled:?}");
            clipped += usize::from(played != drawn);
        }
        assert!(clipped > 0, "some draws left the bounds");
    }

    /// CartPole agents (seeded 1, 2, ...) and one predictor over a small LSTM model.
    struct Rig {
        requests: Sender<Request>,
        segments: Receiver<Segment>,
        counters: Arc<TrainingCounters>,
        retire: Vec<Arc<AtomicBool>>,
        agents: Vec<JoinHandle<Result<()>>>,
        predictor: JoinHandle<()>,
        stop: Stop,
    }

    const NUM_STEPS: u32 = 5;
    const MAX_EPISODE_LENGTH: u32 = 40;

    fn rig(agents: usize) -> Rig {
        tch::manual_seed(5);
        let env_for = |agent: usize| {
            env::make(
                "CartPole-v1",
                &EnvOptions { seed: agent as u64 + 1, ..EnvOptions::default() },
            )
            .expect("CartPole-v1 exists")
        };
        let probe = env_for(0);
        let spec = ModelSpec::for_env(probe.as_ref(), 16, true);
        let shared = ActorCritic::new(&nn::VarStore::new(Device::Cpu), &spec);
        let (requests, request_queue) = unbounded();
        let (segment_sender, segments) = unbounded();
        let counters = Arc::new(TrainingCounters::default());
        let stop = Stop::default();
        let setup = PredictorSetup {
            spec: spec.clone(),
            observation_shape: vec![4],
            device: Device::Cpu,
            shared: SharedModel::over(
                &shared,
                OptimizerKind::RmsProp,
                LearningRate::constant(1e-3),
            ),
            training: counters.clone(),
            slots: Arc::new(SlotTable::new(agents, &spec, Device::Cpu)),
            requests: request_queue,
            batching: Batching { min_batch: 1, max_batch: 4, timeout: Duration::from_millis(1) },
            counters: Arc::new(PredictorCounters::default()),
            retire: Arc::default(),
            precision: Precision::Fp32,
        };
        let predictor = {
            let stop = stop.clone();
            std::thread::spawn(move || run_predictor(setup, &stop))
        };
        let retire: Vec<Arc<AtomicBool>> = (0..agents).map(|_| Arc::default()).collect();
        let agents = (0..agents)
            .map(|index| {
                let setup = AgentSetup {
                    index,
                    env: env_for(index),
                    seed: index as u64 + 1,
                    rewards: RewardShaping { scale: 1.0, clip: Some(1.0) },
                    num_steps: NUM_STEPS,
                    max_episode_length: MAX_EPISODE_LENGTH,
                    requests: requests.clone(),
                    segments: segment_sender.clone(),
                    counters: counters.clone(),
                    retire: retire[index].clone(),
                };
                let stop = stop.clone();
                std::thread::spawn(move || run_agent(setup, &stop))
            })
            .collect();
        Rig { requests, segments, counters, retire, agents, predictor, stop }
    }

    /// Waits up to 60 s for the agents to have taken `steps` steps in all.
    fn wait_for_steps(counters: &TrainingCounters, steps: u64) {
        let since = Instant::now();
        while counters.agent_steps.load(Ordering::Relaxed) < steps {
            assert!(since.elapsed() < Duration::from_secs(60), "the agents stalled");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Drains `segments` into `sent` until every one of `agents` agents has sent what
    /// `enough` asks for, for up to 60 s. Waiting per agent rather than for a total keeps
    /// a starved thread on a loaded two-core machine from failing the test.
    fn drain_until(
        segments: &Receiver<Segment>,
        sent: &mut Vec<Segment>,
        agents: usize,
        enough: impl Fn(&[&Segment]) -> bool,
    ) {
        let since = Instant::now();
        loop {
            let satisfied = (0..agents).all(|agent| {
                let mine: Vec<&Segment> =
                    sent.iter().filter(|segment| segment.agent == agent).collect();
                enough(&mine)
            });
            if satisfied {
                return;
            }
            assert!(since.elapsed() < Duration::from_secs(60), "the agents stalled");
            if let Ok(segment) = segments.recv_timeout(Duration::from_millis(50)) {
                sent.push(segment);
            }
        }
    }

    /// Three CartPole agents each play six episodes or more through one predictor, go
    /// on until each has sent a segment of the next policy version, and are then
    /// retired. Every segment is well formed: 1 to num_steps steps, one observation,
    /// action, log-probability and reward per step, full unless its episode ended,
    /// bootstrap 0 when it ended by its own rules and the value when a time limit cut it,
    /// episodes no longer than max_episode_length; an agent's first segment and every
    /// segment after an ended one start from a zero LSTM state,
    /// the others from a carried one; policy versions never go back. Retiring finishes
    /// the segment in play, so the steps counted are exactly the steps sent; the
    /// predictor ends by itself once the agents are gone.
    #[test]
    fn cartpole_agents_send_well_formed_segments() {
        let Rig { requests, segments, counters, retire, agents, predictor, .. } = rig(3);
        drop(requests);
        let mut sent = Vec::new();
        drain_until(&segments, &mut sent, 3, |mine| {
            mine.iter().filter(|segment| segment.done).count() > 5
        });
        counters.updates.store(1, Ordering::Release);
        drain_until(&segments, &mut sent, 3, |mine| {
            mine.iter().any(|segment| segment.policy_version == 1)
        });
        retire.iter().for_each(|flag| flag.store(true, Ordering::Relaxed));
        for agent in agents {
            agent.join().expect("the agent ran").expect("the agent ended cleanly");
        }
        sent.extend(segments.try_iter());
        let mut by_agent: Vec<Vec<&Segment>> = vec![Vec::new(); 3];
        sent.iter().for_each(|segment| by_agent[segment.agent].push(segment));
        let steps: usize = sent.iter().map(Segment::len).sum();
        assert_eq!(counters.agent_steps.load(Ordering::Relaxed), steps as u64);
        assert_eq!(
            counters.env_frames.load(Ordering::Relaxed),
            steps as u64,
            "one physics step each"
        );
        for (agent, segments) in by_agent.iter().enumerate() {
            let mut episode_length = 0;
            let mut previous: Option<&Segment> = None;
            let mut previous_ended = false;
            for (index, segment) in segments.iter().enumerate() {
                let what = format!("agent {agent} segment {index}: {segment:?}");
                let len = segment.len();
                assert!((1..=NUM_STEPS as usize).contains(&len), "{what}");
                assert_eq!(segment.observations.len(), 4 * len, "{what}");
                assert_eq!(segment.rewards, vec![1.0; len], "{what}");
                assert_eq!(segment.behaviour_log_probs.len(), len, "{what}");
                assert!(
                    segment.behaviour_log_probs.iter().all(|&p| p <= 0.0 && p > -10.0),
                    "{what}"
                );
                episode_length += len;
                assert!(episode_length <= MAX_EPISODE_LENGTH as usize, "{what}");
                // Cut by the time limit: not terminal, so it bootstraps from the value.
                let cut = !segment.done && episode_length == MAX_EPISODE_LENGTH as usize;
                if segment.done {
                    assert_eq!(segment.bootstrap, 0.0, "{what}");
                } else {
                    assert!(len == NUM_STEPS as usize || cut, "{what}");
                    assert!(segment.bootstrap.is_finite() && segment.bootstrap != 0.0, "{what}");
                }
                let zero_start = segment
                    .start_state
                    .hidden
                    .iter()
                    .chain(&segment.start_state.cell)
                    .all(|&x| x == 0.0);
                let starts_episode = previous.is_none_or(|_| previous_ended);
                assert_eq!(zero_start, starts_episode, "{what}");
                previous_ended = segment.done || cut;
                if previous_ended {
                    episode_length = 0;
                }
                assert_eq!(segment.start_state.hidden.len(), 16, "{what}");
                if let Some(previous) = previous {
                    assert!(previous.policy_version <= segment.policy_version, "{what}");
                }
                previous = Some(segment);
            }
            assert!(segments.iter().filter(|segment| segment.done).count() > 5, "agent {agent}");
            assert_eq!(
                segments.last().map(|segment| segment.policy_version),
                Some(1),
                "agent {agent}"
            );
        }
        let since = Instant::now();
        while !predictor.is_finished() {
            assert!(since.elapsed() < Duration::from_secs(5), "the predictor outlived its agents");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A stop ends agents and predictor within a poll; an agent whose trainers are all
    /// gone (the segment queue closed) ends cleanly by itself.
    #[test]
    fn agents_end_on_stop_and_when_the_trainers_are_gone() {
        let first = rig(2);
        wait_for_steps(&first.counters, 200);
        drop(first.segments);
        let since = Instant::now();
        while !first.agents.iter().all(JoinHandle::is_finished) {
            assert!(since.elapsed() < Duration::from_secs(5), "agents outlived the segment queue");
            std::thread::sleep(Duration::from_millis(5));
        }
        for agent in first.agents {
            agent.join().expect("the agent ran").expect("the agent ended cleanly");
        }
        first.stop.request(StopReason::StepBudget);
        let second = rig(2);
        wait_for_steps(&second.counters, 200);
        let since = Instant::now();
        second.stop.request(StopReason::StepBudget);
        for agent in second.agents {
            agent.join().expect("the agent ran").expect("the agent ended cleanly");
        }
        second.predictor.join().expect("the predictor ran");
        assert!(since.elapsed() < Duration::from_secs(2), "stopping took {:?}", since.elapsed());
    }
}
