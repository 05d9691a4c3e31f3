//! Predictors, GA3C's batched acting (Babaeizadeh et al., arXiv:1611.06256): threads
//! that take the agents' prediction requests from one queue, run them through a local
//! copy of the shared model as one batch, and send each agent its row back. The
//! agents' LSTM states live here, in a [`SlotTable`], so a request carries only an
//! observation and the state never crosses a channel.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use tch::{nn, Device, Kind, Tensor};

use crate::counters::TrainingCounters;
use crate::device;
use crate::ga3c::segment::StartState;
use crate::model::{ActorCritic, LstmState, ModelSpec, Policy};
use crate::precision::Precision;
use crate::shared::SharedModel;
use crate::stop::Stop;

/// How often a predictor waiting for work looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// One agent's request for the policy and value of its current observation.
pub struct Request {
    /// The agent asking: its row in the [`SlotTable`].
    pub agent: usize,
    /// The observation, flattened.
    pub observation: Vec<f32>,
    /// The observation starts an episode: the agent's LSTM state is zeroed before the
    /// forward pass.
    pub reset_state: bool,
    /// The observation starts a segment: the reply carries the LSTM state the forward
    /// pass starts from, which the segment's loss will replay from.
    pub want_start_state: bool,
    /// Where the reply goes.
    pub reply: Sender<Reply>,
}

/// The policy for one observation, on the host.
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyRow {
    /// The probability of each discrete action.
    Probabilities(Vec<f32>),
    /// The Gaussian's mean and standard deviation, per action dimension.
    Gaussian { mean: Vec<f32>, std: Vec<f32> },
}

/// A predictor's answer to one [`Request`].
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub policy: PolicyRow,
    /// The critic's value of the observation.
    pub value: f64,
    /// The shared update count whose weights answered (see [`run_predictor`]).
    pub policy_version: u64,
    /// The LSTM state before this forward pass, when the request asked for it.
    pub start_state: Option<StartState>,
}

/// Every agent's LSTM state (hidden and cell, `[agents, hidden]` each), on the
/// predictors' device, shared by all predictors.
///
/// An agent has at most one request in flight, so two predictors never touch the same
/// rows, and a batch's rows are read and written back by the one predictor serving
/// them. The lock is not what keeps agents apart, then: it keeps two threads from
/// running in-place updates on the same tensor objects at once, which libtorch does
/// not promise to be safe (the version counter, the storage's bookkeeping). It is
/// taken twice per batch and held only while kernels are queued, so it is cheap.
pub struct SlotTable {
    states: Mutex<LstmState>,
    agents: usize,
}

impl SlotTable {
    /// Zero states for agents `0..agents` of `spec`'s model, on `device`: as many
    /// agents as may ever play at once, since the table does not grow. A model without
    /// an LSTM gets empty rows.
    pub fn new(agents: usize, spec: &ModelSpec, device: Device) -> Self {
        let width = if spec.has_lstm() { spec.hidden_size } else { 0 };
        let zeros = || Tensor::zeros([agents as i64, width], (Kind::Float, device));
        SlotTable { states: Mutex::new(LstmState { hidden: zeros(), cell: zeros() }), agents }
    }

    /// Agents the table holds a state for.
    pub fn agents(&self) -> usize {
        self.agents
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LstmState> {
        // A predictor that panicked mid-batch leaves only its own agents' rows behind.
        self.states.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The states of `rows` (int64 `[batch]`), each multiplied by its `keep` (`[batch,
    /// 1]`, 0 to start an episode from zeros, 1 to go on).
    fn gather(&self, rows: &Tensor, keep: &Tensor) -> LstmState {
        let states = self.lock();
        LstmState {
            hidden: states.hidden.index_select(0, rows) * keep,
            cell: states.cell.index_select(0, rows) * keep,
        }
    }

    /// Writes `state` back to `rows`.
    fn store(&self, rows: &Tensor, state: &LstmState) {
        let mut states = self.lock();
        let _ = states.hidden.index_copy_(0, rows, &state.hidden);
        let _ = states.cell.index_copy_(0, rows, &state.cell);
    }
}

/// How a predictor gathers requests into a batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Batching {
    /// Enough requests to go at once; fewer wait for more until `timeout`.
    pub min_batch: usize,
    /// The largest batch.
    pub max_batch: usize,
    /// The longest a batch waits for `min_batch` requests, from its first request on:
    /// with fewer agents than `min_batch` every batch waits this long, but none waits
    /// forever.
    pub timeout: Duration,
}

/// A predictor's work, summed over predictors: the monitor reads them (the mean
/// batch is `predictions / batches`; the request queue's depth is its channel's
/// `len()`).
#[derive(Debug, Default)]
pub struct PredictorCounters {
    /// Requests answered.
    pub predictions: AtomicU64,
    /// Forward passes run.
    pub batches: AtomicU64,
}

/// What a predictor is made from.
pub struct PredictorSetup {
    /// The model the local copy is built as, that of the shared parameters.
    pub spec: ModelSpec,
    /// The shape of one observation.
    pub observation_shape: Vec<i64>,
    /// Where the local model, and the slot table, live.
    pub device: Device,
    /// The shared model, pulled whenever its update count has moved.
    pub shared: SharedModel,
    /// The run's counters: their `updates` is the policy version of a pull.
    pub training: Arc<TrainingCounters>,
    pub slots: Arc<SlotTable>,
    /// The agents' requests, one queue for all predictors.
    pub requests: Receiver<Request>,
    pub batching: Batching,
    pub counters: Arc<PredictorCounters>,
    /// Set by whoever tunes the number of predictors, to remove this one after its
    /// current batch.
    pub retire: Arc<AtomicBool>,
    /// The precision of large batches' body pass (--precision; small ones stay fp32).
    pub precision: Precision,
}

/// Runs one predictor until a stop is requested or every request sender is gone.
/// Before each batch it pulls the shared weights into its local model if the update
/// count has moved since its last pull, and answers the batch with that count as the
/// policy version. Trainers keep stepping while it copies, so the weights may hold a
/// few more updates than the version says (the Hogwild race A3C accepts), never fewer.
pub fn run_predictor(setup: PredictorSetup, stop: &Stop) {
    // Flags are validated before any thread starts; these are broken invariants.
    let Batching { min_batch, max_batch, .. } = setup.batching;
    assert!(max_batch >= 1 && min_batch <= max_batch, "bad batching {:?}", setup.batching);
    // OpenMP's thread count is per thread: without this a predictor's matrix products
    // ran on a team of one thread per core, whose idle members spin at a barrier
    // between products and took a core from the agents, trainers and test agent.
    tch::set_num_threads(1);
    let store = nn::VarStore::new(setup.device);
    let model = ActorCritic::new(&store, &setup.spec);
    let local: Vec<Tensor> =
        model.parameters().iter().map(|(_, parameter)| parameter.shallow_clone()).collect();
    let mut pulled = None;
    while !setup.retire.load(Ordering::Relaxed) {
        let Some(batch) = collect_batch(&setup.requests, &setup.batching, stop) else { break };
        let version = setup.training.updates.load(Ordering::Acquire);
        if pulled != Some(version) {
            setup.shared.pull(&local);
            pulled = Some(version);
        }
        let size = batch.len() as u64;
        predict(&model, &setup, batch, version);
        setup.counters.predictions.fetch_add(size, Ordering::Relaxed);
        setup.counters.batches.fetch_add(1, Ordering::Relaxed);
    }
}

/// Waits for a first request, then takes whatever is already queued, up to
/// `max_batch`; with fewer than `min_batch` in hand it waits for more until `timeout`
/// after the first. `None` once a stop is requested or every sender is gone.
fn collect_batch(
    requests: &Receiver<Request>,
    batching: &Batching,
    stop: &Stop,
) -> Option<Vec<Request>> {
    let first = loop {
        if stop.requested() {
            return None;
        }
        match requests.recv_timeout(STOP_POLL) {
            Ok(request) => break request,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return None,
        }
    };
    let deadline = Instant::now() + batching.timeout;
    let mut batch = vec![first];
    while batch.len() < batching.max_batch {
        match requests.try_recv() {
            Ok(request) => {
                batch.push(request);
                continue;
            }
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {}
        }
        if batch.len() >= batching.min_batch {
            break;
        }
        match requests.recv_deadline(deadline) {
            Ok(request) => batch.push(request),
            // Out of time, or no agent left to ask: answer those in hand.
            Err(_) => break,
        }
    }
    Some(batch)
}

/// One forward pass over `batch`, one host read for every row's policy, value and
/// asked-for start state, the new states written back, and each agent answered.
fn predict(model: &ActorCritic, setup: &PredictorSetup, batch: Vec<Request>, version: u64) {
    let device = setup.device;
    let size = batch.len() as i64;
    let observation_len: i64 = setup.observation_shape.iter().product();
    let agents = setup.slots.agents();
    let mut observations = Vec::with_capacity((size * observation_len) as usize);
    for request in &batch {
        // Agents check their environment's observations and are numbered within the
        // table: a request that breaks either is a bug, and fails the whole batch.
        assert_eq!(
            request.observation.len() as i64,
            observation_len,
            "agent {}'s observation",
            request.agent
        );
        assert!(request.agent < agents, "agent {} has no slot among {agents}", request.agent);
        observations.extend_from_slice(&request.observation);
    }
    // Row numbers are exact in f32 up to 2^24 agents.
    let rows: Vec<f32> = batch.iter().map(|request| request.agent as f32).collect();
    let keep: Vec<f32> =
        batch.iter().map(|request| if request.reset_state { 0.0 } else { 1.0 }).collect();
    let wanted: Vec<f32> =
        (0..batch.len()).filter(|&row| batch[row].want_start_state).map(|row| row as f32).collect();
    let shape = [&[size][..], &setup.observation_shape].concat();
    let (host, layout) = tch::no_grad(|| {
        let rows = device::upload(&rows, &[size], device).to_kind(Kind::Int64);
        let state = setup.slots.gather(&rows, &device::upload(&keep, &[size, 1], device));
        let observations = device::upload(&observations, &shape, device);
        let output = model.forward_in(setup.precision.for_rows(batch.len()), &observations, &state);
        setup.slots.store(&rows, &output.state);
        let mut parts = match &output.policy {
            Policy::Logits(logits) => vec![logits.softmax(1, Kind::Float)],
            Policy::Gaussian { mean, std } => vec![mean.shallow_clone(), std.shallow_clone()],
        };
        let layout = ReadLayout {
            gaussian: parts.len() == 2,
            policy_width: parts[0].size()[1] as usize,
            state_width: state.hidden.size()[1] as usize,
        };
        parts.push(output.value);
        if !wanted.is_empty() {
            let wanted = device::upload(&wanted, &[-1], device).to_kind(Kind::Int64);
            parts.push(state.hidden.index_select(0, &wanted));
            parts.push(state.cell.index_select(0, &wanted));
        }
        let flat: Vec<Tensor> = parts.iter().map(|part| part.reshape([-1])).collect();
        (device::read(&Tensor::cat(&flat, 0)), layout)
    });
    answer(batch, &host, &layout, version);
}

/// How a batch's host read is laid out: the policy rows (probabilities, or means then
/// standard deviations), the values, then the asked-for start states' hidden rows and
/// their cell rows.
struct ReadLayout {
    gaussian: bool,
    policy_width: usize,
    state_width: usize,
}

/// Sends each agent of `batch` its part of `host`. An agent that has stopped or
/// retired no longer listens; its reply is dropped.
fn answer(batch: Vec<Request>, host: &[f64], layout: &ReadLayout, version: u64) {
    let size = batch.len();
    let ReadLayout { gaussian, policy_width, state_width } = *layout;
    let floats = |values: &[f64]| values.iter().map(|&value| value as f32).collect::<Vec<f32>>();
    let policy_blocks = if gaussian { 2 } else { 1 };
    let (policies, rest) = host.split_at(policy_blocks * size * policy_width);
    let (values, states) = rest.split_at(size);
    let (hidden_rows, cell_rows) = states.split_at(states.len() / 2);
    let policy_row = |block: usize, index: usize| {
        floats(&policies[(block * size + index) * policy_width..][..policy_width])
    };
    let mut next_state = 0;
    for (index, request) in batch.into_iter().enumerate() {
        let policy = if gaussian {
            PolicyRow::Gaussian { mean: policy_row(0, index), std: policy_row(1, index) }
        } else {
            PolicyRow::Probabilities(policy_row(0, index))
        };
        let start_state = request.want_start_state.then(|| {
            let at = next_state * state_width;
            next_state += 1;
            StartState {
                hidden: floats(&hidden_rows[at..][..state_width]),
                cell: floats(&cell_rows[at..][..state_width]),
            }
        });
        let reply = Reply { policy, value: values[index], policy_version: version, start_state };
        let _ = request.reply.send(reply);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Body, Head, DEFAULT_MIN_STD};
    use crate::shared_optim::{LearningRate, OptimizerKind};
    use std::thread::JoinHandle;

    fn spec(lstm: bool, head: Head) -> ModelSpec {
        ModelSpec { body: Body::Mlp { inputs: 4, lstm, input_norm: None }, hidden_size: 8, head }
    }

    /// Predictors over `shared`'s parameters for `agents` agents, running until stopped
    /// or until `requests` and its clones are dropped.
    struct Predictors {
        requests: Sender<Request>,
        training: Arc<TrainingCounters>,
        counters: Arc<PredictorCounters>,
        stop: Stop,
        threads: Vec<JoinHandle<()>>,
    }

    fn start(
        shared: &ActorCritic,
        agents: usize,
        predictors: usize,
        batching: Batching,
    ) -> Predictors {
        let (requests, receiver) = crossbeam::channel::unbounded();
        let training = Arc::new(TrainingCounters::default());
        let counters = Arc::new(PredictorCounters::default());
        let slots = Arc::new(SlotTable::new(agents, shared.spec(), Device::Cpu));
        let stop = Stop::default();
        let threads = (0..predictors)
            .map(|_| {
                let setup = PredictorSetup {
                    spec: shared.spec().clone(),
                    observation_shape: vec![4],
                    device: Device::Cpu,
                    shared: SharedModel::over(
                        shared,
                        OptimizerKind::RmsProp,
                        LearningRate::constant(1e-3),
                    ),
                    training: training.clone(),
                    slots: slots.clone(),
                    requests: receiver.clone(),
                    batching,
                    counters: counters.clone(),
                    retire: Arc::default(),
                    precision: Precision::Fp32,
                };
                let stop = stop.clone();
                std::thread::spawn(move || run_predictor(setup, &stop))
            })
            .collect();
        Predictors { requests, training, counters, stop, threads }
    }

    fn ask(
        requests: &Sender<Request>,
        agent: usize,
        observation: &[f32],
        reset: bool,
        want: bool,
    ) -> Reply {
        let (reply, replies) = crossbeam::channel::bounded(1);
        let request = Request {
            agent,
            observation: observation.to_vec(),
            reset_state: reset,
            want_start_state: want,
            reply,
        };
        requests.send(request).expect("a predictor listens");
        replies.recv_timeout(Duration::from_secs(10)).expect("answered")
    }

    /// Waits up to 5 s for `thread` to end by itself.
    fn ends(thread: JoinHandle<()>) -> bool {
        let since = Instant::now();
        while !thread.is_finished() && since.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        thread.is_finished() && thread.join().is_ok()
    }

    fn host(tensor: &Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(tensor.reshape([-1])).unwrap()
    }

    fn assert_close(actual: &[f32], expected: &[f32], what: &str) {
        assert_eq!(actual.len(), expected.len(), "{what}");
        for (a, e) in actual.iter().zip(expected) {
            assert!((a - e).abs() <= 1e-5 * e.abs().max(1.0), "{what}: {actual:?} != {expected:?}");
        }
    }

    /// Agent `agent`'s observation at step `t`.
    fn observation(agent: usize, t: usize) -> Vec<f32> {
        (0..4).map(|i| ((agent * 100 + t * 4 + i) as f32 * 0.37).sin()).collect()
    }

    /// Two agents step concurrently through one predictor (batching up to 4) and then
    /// through two sharing the slot table: each agent's replies, and the start states
    /// it asked for, equal those of stepping it alone at batch 1 from the same
    /// observations, with its state zeroed where it starts an episode. So states are
    /// carried per agent, the start-state copy is the state before the forward pass,
    /// and rows of a batch do not mix.
    #[test]
    fn states_are_carried_per_agent() {
        tch::manual_seed(3);
        let shared = ActorCritic::new(
            &nn::VarStore::new(Device::Cpu),
            &spec(true, Head::Discrete { actions: 3 }),
        );
        let resets = [[0, 17], [0, 9]];
        let steps = 30;
        for (predictors, min_batch) in [(1, 2), (2, 1)] {
            let batching = Batching { min_batch, max_batch: 4, timeout: Duration::from_millis(20) };
            let running = start(&shared, 2, predictors, batching);
            let agents: Vec<JoinHandle<Vec<Reply>>> = (0..2)
                .map(|agent| {
                    let requests = running.requests.clone();
                    std::thread::spawn(move || {
                        (0..steps)
                            .map(|t| {
                                let reset = resets[agent].contains(&t);
                                ask(
                                    &requests,
                                    agent,
                                    &observation(agent, t),
                                    reset,
                                    reset || t % 3 == 1,
                                )
                            })
                            .collect()
                    })
                })
                .collect();
            for (agent, thread) in agents.into_iter().enumerate() {
                let replies = thread.join().expect("the agent thread ran");
                let zeros = || Tensor::zeros([1, 8], (Kind::Float, Device::Cpu));
                let mut state = LstmState { hidden: zeros(), cell: zeros() };
                for (t, reply) in replies.iter().enumerate() {
                    let what = |part: &str| {
                        format!("{predictors} predictor(s), agent {agent} step {t}: {part}")
                    };
                    if resets[agent].contains(&t) {
                        state = LstmState { hidden: zeros(), cell: zeros() };
                    }
                    match &reply.start_state {
                        Some(start) => {
                            assert_close(
                                &start.hidden,
                                &host(&state.hidden),
                                &what("start hidden"),
                            );
                            assert_close(&start.cell, &host(&state.cell), &what("start cell"));
                        }
                        None => assert!(
                            !(resets[agent].contains(&t) || t % 3 == 1),
                            "{}",
                            what("start state")
                        ),
                    }
                    let input = Tensor::from_slice(&observation(agent, t)).view([1, 4]);
                    let output = tch::no_grad(|| shared.forward(&input, &state));
                    let Policy::Logits(logits) = &output.policy else { unreachable!() };
                    let PolicyRow::Probabilities(probabilities) = &reply.policy else {
                        panic!("{}", what("policy"))
                    };
                    assert_close(
                        probabilities,
                        &host(&logits.softmax(1, Kind::Float)),
                        &what("probabilities"),
                    );
                    assert_close(&[reply.value as f32], &host(&output.value), &what("value"));
                    assert_eq!(reply.policy_version, 0);
                    state = output.state;
                }
            }
            let predictions = running.counters.predictions.load(Ordering::Relaxed);
            let batches = running.counters.batches.load(Ordering::Relaxed);
            assert_eq!(predictions, 2 * steps as u64);
            if predictors == 1 {
                assert!(batches < predictions, "no batch held both agents ({batches} batches)");
            }
            running.stop.request(crate::stop::StopReason::StepBudget);
            assert!(running.threads.into_iter().all(ends), "predictors end on stop");
        }
    }

    /// With fewer agents than `min_batch`, a lone request is answered once the batch
    /// timeout has passed, not never; a predictor ends by itself once every request
    /// sender is gone.
    #[test]
    fn a_lone_request_is_answered_after_the_timeout() {
        let shared = ActorCritic::new(
            &nn::VarStore::new(Device::Cpu),
            &spec(true, Head::Discrete { actions: 2 }),
        );
        let timeout = Duration::from_millis(30);
        let running = start(&shared, 1, 1, Batching { min_batch: 4, max_batch: 8, timeout });
        for t in 0..3 {
            let since = Instant::now();
            ask(&running.requests, 0, &observation(0, t), t == 0, false);
            let waited = since.elapsed();
            assert!(
                waited >= timeout && waited < Duration::from_secs(2),
                "answered after {waited:?}"
            );
        }
        let Predictors { requests, threads, .. } = running;
        drop(requests);
        assert!(threads.into_iter().all(ends), "predictors end once no agent can ask");
    }

    /// A predictor answers with the shared weights of the update count it last saw:
    /// weights changed without a new count are not pulled, a new count pulls them and
    /// is the replies' policy version. Checked on a Gaussian head without an LSTM,
    /// whose start states are empty.
    #[test]
    fn weights_are_pulled_when_the_update_count_moves() {
        tch::manual_seed(4);
        let head = Head::Gaussian { low: vec![-2.0], high: vec![2.0], min_std: DEFAULT_MIN_STD };
        let shared = ActorCritic::new(&nn::VarStore::new(Device::Cpu), &spec(false, head));
        let batching = Batching { min_batch: 1, max_batch: 4, timeout: Duration::from_millis(1) };
        let running = start(&shared, 3, 1, batching);
        let input = observation(2, 0);
        let expected = || {
            let output = tch::no_grad(|| {
                let empty = || Tensor::zeros([1, 0], (Kind::Float, Device::Cpu));
                shared.forward(
                    &Tensor::from_slice(&input).view([1, 4]),
                    &LstmState { hidden: empty(), cell: empty() },
                )
            });
            let Policy::Gaussian { mean, std } = &output.policy else { unreachable!() };
            (host(mean), host(std), host(&output.value)[0])
        };
        let check =
            |reply: &Reply, (mean, std, value): &(Vec<f32>, Vec<f32>, f32), version: u64| {
                let PolicyRow::Gaussian { mean: got_mean, std: got_std } = &reply.policy else {
                    panic!("Gaussian")
                };
                assert_close(got_mean, mean, "mean");
                assert_close(got_std, std, "std");
                assert_close(&[reply.value as f32], &[*value], "value");
                assert_eq!(reply.policy_version, version);
                let start = reply.start_state.as_ref().expect("asked for");
                assert!(start.hidden.is_empty() && start.cell.is_empty());
            };
        let before = expected();
        check(&ask(&running.requests, 2, &input, true, true), &before, 0);
        tch::no_grad(|| {
            for (_, parameter) in shared.parameters() {
                let _ = parameter.shallow_clone().g_add_scalar_(0.05);
            }
        });
        let after = expected();
        assert_ne!(before.0, after.0, "the weights moved");
        check(&ask(&running.requests, 2, &input, false, true), &before, 0);
        running.training.updates.store(3, Ordering::Release);
        check(&ask(&running.requests, 2, &input, false, true), &after, 3);
        running.stop.request(crate::stop::StopReason::StepBudget);
        assert!(running.threads.into_iter().all(ends));
    }
}
