//! The actor-critic networks (A3C, arXiv:1602.01783): the reference's A3Clstm for
//! Atari screens and a small MLP for classic control, each with a value head and a
//! policy head (softmax over discrete actions, or a Gaussian over continuous ones).
//!
//! Parameter names equal the reference's `state_dict` keys (`conv1.weight`,
//! `lstm.weight_ih`, `critic_linear.bias`, ...): they are the checkpoint format, so
//! they never change.

use tch::nn::{self, Init, Module};
use tch::{Device, Kind, Tensor};

use crate::env::{ActionSpace, Env, Screen};
use crate::error::{Error, Result};
use crate::input_norm::InputNorm;
use crate::precision::Precision;

mod a3clstm;
pub mod elu;
mod lstm;
mod mlp;
mod universe;

use a3clstm::{atari_convs, ATARI_CONVS, ATARI_FEATURES};
use lstm::{lstm_cell, LstmCell};
pub use lstm::{LstmState, LstmTape};
use mlp::mlp;
use universe::{universe_convs, universe_lstm_cell, UNIVERSE_CONVS, UNIVERSE_FEATURES};
pub use universe::{UNIVERSE84_FEATURES, UNIVERSE84_SIDE, UNIVERSE_SIDE};

/// Which network, and how big.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelSpec {
    /// The body that turns observations into features.
    pub body: Body,
    /// Units of the LSTM (and of the MLP's layers).
    pub hidden_size: i64,
    /// What the policy head outputs.
    pub head: Head,
}

/// The part of the network before the heads.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Body {
    /// The reference's A3Clstm: four conv + max-pool layers over a 1x80x80 screen
    /// (1024 features), then an LSTM cell.
    AtariLstm,
    /// ikostrikov/pytorch-a3c's network (from openai/universe-starter-agent): four
    /// 3x3 stride-2 convolutions of 32 filters with ELU over a 1x42x42 screen (288
    /// features), then an LSTM cell; about a tenth of AtariLstm's cost per step.
    Universe,
    /// The universe network over 1x84x84 screens (`--model universe84`, 1152
    /// features): four times the pixels, for a ball that is one pixel at 42x42.
    Universe84,
    /// The universe network over 1x42x42 screens of block maxima (`--model
    /// universe-max`): the same weights and cost, a one-pixel ball kept bright.
    UniverseMax,
    /// Two fully connected ReLU layers over a flat observation, optionally followed by
    /// an LSTM cell.
    Mlp {
        /// Length of the observation vector.
        inputs: i64,
        /// Whether an LSTM cell follows the two layers.
        lstm: bool,
        /// Scaling of each observation element before the first layer (`--normalize-obs`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_norm: Option<InputNorm>,
    },
}

/// The policy head.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Head {
    /// Logits over this many actions.
    Discrete { actions: i64 },
    /// A Gaussian per action dimension, its mean squashed into the bounds, its
    /// standard deviation never below `min_std` (`--min-std`).
    Gaussian {
        low: Vec<f32>,
        high: Vec<f32>,
        #[serde(default = "default_min_std")]
        min_std: f64,
    },
}

/// The floor of a Gaussian policy's standard deviation unless `--min-std` sets one:
/// low enough not to shape learning, high enough to keep the log-density finite.
pub const DEFAULT_MIN_STD: f64 = 1e-3;

/// The floors `--min-std` and a sidecar may set: from the default up to 10, beyond
/// which the floor would drown any action range.
pub const MIN_STD_RANGE: std::ops::RangeInclusive<f64> = DEFAULT_MIN_STD..=10.0;

fn default_min_std() -> f64 {
    DEFAULT_MIN_STD
}

/// The model a run's flags ask for, before any environment or checkpoint is seen: a
/// fresh run builds it for the environment, a resumed one checks it against the
/// checkpoint's, where every size left out is the checkpoint's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelRequest {
    /// The Atari network `--model` names (`AtariLstm`, `Universe`, `Universe84` or
    /// `UniverseMax`); `None` when it is left out. The environment is made on its
    /// screens, and those pick the network.
    pub network: Option<Body>,
    /// `--hidden-size`, when given.
    pub hidden_size: Option<i64>,
    /// The hidden size of a fresh model when `--hidden-size` is left out.
    pub default_hidden_size: i64,
    /// `--lstm`: an LSTM cell after the MLP.
    pub lstm: bool,
    /// `--min-std`, checked to lie in [`MIN_STD_RANGE`].
    pub min_std: Option<f64>,
    /// `--normalize-obs`: inputs scaled by statistics measured when the run starts.
    pub normalize_obs: bool,
}

impl ModelRequest {
    /// Refuses what `env`'s spaces cannot take, whether the model is fresh or resumed:
    /// a Gaussian's floor for discrete actions, input scaling for screens, a screen
    /// network for observations that are not screens.
    pub fn check_fits(&self, env: &dyn Env) -> Result<()> {
        if self.min_std.is_some() && env.action_space().bounds().is_none() {
            return Err(Error::BadArguments(format!(
                "--min-std floors the Gaussian of continuous actions; {}'s actions are discrete: \
                 leave it out",
                env.id()
            )));
        }
        if self.normalize_obs && env.observation_shape().len() != 1 {
            return Err(Error::BadArguments(format!(
                "--normalize-obs scales the observations of classic-control and Box2D tasks; {}'s \
                 screens are scaled already: leave it out",
                env.id()
            )));
        }
        if self.lstm && !matches!(Body::for_env(env, true), Body::Mlp { .. }) {
            return Err(Error::BadArguments(format!(
                "--lstm gives the MLP of classic-control and Box2D tasks an LSTM cell, and {}'s screen \
                 networks have one already: leave it out",
                env.id()
            )));
        }
        if let Some(asked) = &self.network {
            let picked = Body::for_env(env, self.lstm);
            if let Body::Mlp { inputs, .. } = picked {
                return Err(Error::BadArguments(format!(
                    "--model picks a network for screens, but {} gives observations of {inputs} \
                     values, which the MLP reads: leave out --model (--hidden-size and --lstm \
                     shape the MLP)",
                    env.id()
                )));
            }
            if picked != *asked {
                return Err(Error::BadArguments(format!(
                    "--model {} reads screens of its own, but {} gives observations of shape \
                     {:?} that the {} network reads; leave out --model, or have the \
                     environment make the screens EnvOptions::screen asks for and report them \
                     with Env::screen",
                    asked.network_name(),
                    env.id(),
                    env.observation_shape(),
                    picked.network_name()
                )));
            }
        }
        Ok(())
    }

    /// A fresh model for `env`, as asked (its input scaling, with `--normalize-obs`,
    /// measured where the run starts).
    pub fn fresh_spec(&self, env: &dyn Env) -> ModelSpec {
        let hidden_size = self.hidden_size.unwrap_or(self.default_hidden_size);
        let mut spec = ModelSpec::for_env(env, hidden_size, self.lstm);
        if let (Some(floor), Head::Gaussian { min_std, .. }) = (self.min_std, &mut spec.head) {
            *min_std = floor;
        }
        spec
    }
}

impl Body {
    /// The network's name: `--model`'s for the Atari networks, `mlp` for the others.
    pub fn network_name(&self) -> &'static str {
        match self {
            Body::AtariLstm => "a3clstm",
            Body::Universe => "universe",
            Body::Universe84 => "universe84",
            Body::UniverseMax => "universe-max",
            Body::Mlp { .. } => "mlp",
        }
    }

    /// The screen an Atari network reads; `None` for the MLP.
    pub fn screen(&self) -> Option<Screen> {
        match self {
            Body::AtariLstm => Some(Screen::Gray80),
            Body::Universe => Some(Screen::Mean42),
            Body::Universe84 => Some(Screen::Mean84),
            Body::UniverseMax => Some(Screen::Max42),
            Body::Mlp { .. } => None,
        }
    }

    /// The network that reads `env`'s screens, where it says how it makes them, else
    /// the one its observations' shape implies.
    fn for_env(env: &dyn Env, lstm: bool) -> Body {
        match env.screen() {
            Some(screen) => Body::reading(screen),
            None => Body::for_observations(env.observation_shape(), lstm),
        }
    }

    /// The network for observations of `shape` from an environment that does not say
    /// how its screens are prepared (one of a program's own): the Atari network whose
    /// screens have that shape, else the MLP.
    fn for_observations(shape: &[i64], lstm: bool) -> Body {
        if shape == [1, UNIVERSE_SIDE, UNIVERSE_SIDE] {
            Body::Universe
        } else if shape == [1, UNIVERSE84_SIDE, UNIVERSE84_SIDE] {
            Body::Universe84
        } else if shape.len() == 3 {
            Body::AtariLstm
        } else {
            Body::Mlp { inputs: shape.iter().product(), lstm, input_norm: None }
        }
    }

    /// The Atari network that reads `screen`.
    pub fn reading(screen: Screen) -> Body {
        match screen {
            Screen::Gray80 => Body::AtariLstm,
            Screen::Mean42 => Body::Universe,
            Screen::Mean84 => Body::Universe84,
            Screen::Max42 => Body::UniverseMax,
        }
    }
}

impl ModelSpec {
    /// The model the reference would build for `env`: the network that reads its
    /// screens, where they are screens.
    pub fn for_env(env: &dyn Env, hidden_size: i64, lstm: bool) -> Self {
        ModelSpec::with_body(Body::for_env(env, lstm), env.action_space(), hidden_size)
    }

    /// The model with `body` and a head for `action_space`.
    pub fn with_body(body: Body, action_space: &ActionSpace, hidden_size: i64) -> Self {
        let head = match action_space {
            ActionSpace::Discrete { n } => Head::Discrete { actions: *n as i64 },
            ActionSpace::Continuous { low, high } => {
                Head::Gaussian { low: low.clone(), high: high.clone(), min_std: DEFAULT_MIN_STD }
            }
        };
        ModelSpec { body, hidden_size, head }
    }

    /// How many parameters the network has, computed without building it (as a float,
    /// so that absurd sizes cannot overflow): what memory checks go by.
    pub fn parameter_count(&self) -> f64 {
        let elements = |shape: &[i64]| shape.iter().map(|&size| size as f64).product::<f64>();
        parameter_shapes(self).iter().map(|(_, shape)| elements(shape)).sum()
    }

    /// Whether the network carries an LSTM state between steps.
    pub fn has_lstm(&self) -> bool {
        match self.body {
            Body::AtariLstm | Body::Universe | Body::Universe84 | Body::UniverseMax => true,
            Body::Mlp { lstm, .. } => lstm,
        }
    }
}

/// What the policy head says about one batch of observations.
pub enum Policy {
    /// Unnormalised log-probabilities, `[batch, actions]`.
    Logits(Tensor),
    /// Mean and standard deviation, each `[batch, dims]`.
    Gaussian { mean: Tensor, std: Tensor },
}

/// One forward pass.
pub struct Output {
    /// The critic's estimate, `[batch, 1]`.
    pub value: Tensor,
    pub policy: Policy,
    pub state: LstmState,
}

/// What a Gaussian policy adds to the actor's mean layer: a layer for the deviation,
/// and the bounds' center and half-range (`[1, dims]`, on the model's device) that map
/// tanh's [-1, 1] onto them, made once rather than on every step.
struct GaussianHead {
    std: nn::Linear,
    min_std: f64,
    center: Tensor,
    half_range: Tensor,
}

/// The actor-critic network: body, optional LSTM cell, value and policy heads.
pub struct ActorCritic {
    spec: ModelSpec,
    body: nn::Sequential,
    lstm: Option<LstmCell>,
    critic: nn::Linear,
    actor: nn::Linear,
    gaussian: Option<GaussianHead>,
    /// Every parameter with its checkpoint name, in the reference's state_dict order.
    parameters: Vec<(String, Tensor)>,
}

impl ActorCritic {
    /// Builds the network under `vs`'s root (on `vs`'s device), initialised as the
    /// reference initialises it, drawing from libtorch's global generator.
    pub fn new(vs: &nn::VarStore, spec: &ModelSpec) -> Self {
        let root = vs.root();
        let hidden = spec.hidden_size;
        let (body, features) = match spec.body {
            Body::AtariLstm => (atari_convs(&root), ATARI_FEATURES),
            Body::Universe | Body::UniverseMax => (universe_convs(&root), UNIVERSE_FEATURES),
            Body::Universe84 => (universe_convs(&root), UNIVERSE84_FEATURES),
            Body::Mlp { inputs, ref input_norm, .. } => {
                (mlp(&root, inputs, hidden, input_norm.as_ref()), hidden)
            }
        };
        let lstm = spec.has_lstm().then(|| match spec.body {
            Body::Universe | Body::Universe84 | Body::UniverseMax => {
                universe_lstm_cell(&(&root / "lstm"), features, hidden)
            }
            Body::AtariLstm | Body::Mlp { .. } => lstm_cell(&(&root / "lstm"), features, hidden),
        });
        let head_inputs = if lstm.is_some() { hidden } else { features };
        let critic = normalized_linear(&(&root / "critic_linear"), head_inputs, 1, 1.0);
        let (actor, gaussian) = match &spec.head {
            Head::Discrete { actions } => {
                (normalized_linear(&(&root / "actor_linear"), head_inputs, *actions, 0.01), None)
            }
            Head::Gaussian { low, high, min_std } => {
                let dims = low.len() as i64;
                let mean = normalized_linear(&(&root / "actor_linear"), head_inputs, dims, 0.01);
                let std = normalized_linear(&(&root / "actor_std_linear"), head_inputs, dims, 0.01);
                let per_dim = |f: fn(f32, f32) -> f32| {
                    let values: Vec<f32> = low.iter().zip(high).map(|(&l, &h)| f(l, h)).collect();
                    Tensor::from_slice(&values).view([1, dims]).to(vs.device())
                };
                let center = per_dim(|low, high| (low + high) / 2.0);
                let half_range = per_dim(|low, high| (high - low) / 2.0);
                (mean, Some(GaussianHead { std, min_std: *min_std, center, half_range }))
            }
        };
        let variables = vs.variables();
        let parameters: Vec<(String, Tensor)> = parameter_names(spec)
            .into_iter()
            .map(|name| {
                let tensor = variables
                    .get(&name)
                    .unwrap_or_else(|| panic!("model built no {name}"))
                    .shallow_clone();
                (name, tensor)
            })
            .collect();
        if vs.device() == Device::Cpu {
            for (_, parameter) in &parameters {
                if parameter.dim() == 4 {
                    store_channels_last(parameter);
                }
            }
        }
        ActorCritic { spec: spec.clone(), body, lstm, critic, actor, gaussian, parameters }
    }

    /// The spec it was built from.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// Every parameter with its checkpoint name, in the reference's order.
    pub fn parameters(&self) -> &[(String, Tensor)] {
        &self.parameters
    }

    /// Runs `observations` (`[batch, ...observation shape]`) from `state`.
    pub fn forward(&self, observations: &Tensor, state: &LstmState) -> Output {
        self.forward_in(Precision::Fp32, observations, state)
    }

    /// [`ActorCritic::forward`] with the body in `precision` (the LSTM cell and the
    /// heads stay fp32).
    pub fn forward_in(
        &self,
        precision: Precision,
        observations: &Tensor,
        state: &LstmState,
    ) -> Output {
        let (features, state) =
            self.recurrent_step(&self.features_in(precision, observations), state);
        let (value, policy) = self.heads(&features);
        Output { value, policy, state }
    }

    /// The body's features of `observations`, `[batch, features]`: the part of a step
    /// that does not depend on the LSTM state, so that a recomputed rollout can run
    /// it over all its observations in one batch.
    pub fn features(&self, observations: &Tensor) -> Tensor {
        self.body.forward(observations).flatten(1, -1)
    }

    /// [`ActorCritic::features`] computed in `precision`, given as fp32.
    pub fn features_in(&self, precision: Precision, observations: &Tensor) -> Tensor {
        precision.run(observations.device(), || self.features(observations))
    }

    /// The LSTM cell over `features` from `state`: the heads' input and the next
    /// state. Without an LSTM the features pass through and the state is kept.
    pub fn recurrent_step(&self, features: &Tensor, state: &LstmState) -> (Tensor, LstmState) {
        match &self.lstm {
            Some(cell) => {
                let (hidden, cell_state) = features.lstm_cell(
                    &[&state.hidden, &state.cell],
                    &cell.weight_ih,
                    &cell.weight_hh,
                    Some(&cell.bias_ih),
                    Some(&cell.bias_hh),
                );
                (hidden.shallow_clone(), LstmState { hidden, cell: cell_state })
            }
            None => (
                features.shallow_clone(),
                LstmState {
                    hidden: state.hidden.shallow_clone(),
                    cell: state.cell.shallow_clone(),
                },
            ),
        }
    }

    /// [`ActorCritic::forward`] for a training rollout: the LSTM step is recorded on
    /// `tape`, which makes the LSTM's weight gradients after the backward pass.
    pub fn forward_recorded(
        &self,
        observations: &Tensor,
        state: &LstmState,
        tape: &mut LstmTape,
    ) -> Output {
        let features = self.features(observations);
        let (features, state) = match &self.lstm {
            Some(cell) => {
                let input_gates = features.matmul(&cell.weight_ih.detach().tr()) + &cell.bias_ih;
                tape.inputs.push(features.detach());
                cell.recorded_step(input_gates, state, tape)
            }
            None => self.recurrent_step(&features, state),
        };
        let (value, policy) = self.heads(&features);
        Output { value, policy, state }
    }

    /// The LSTM's input gates for a batch of `features` rows, `[rows, 4 hidden]`, in
    /// one matrix product whose weight gradient is one product too; `None` without
    /// an LSTM. For a recomputed rollout, whose features are all known up front.
    pub fn input_gates(&self, features: &Tensor) -> Option<Tensor> {
        let cell = self.lstm.as_ref()?;
        Some(features.matmul(&cell.weight_ih.tr()) + &cell.bias_ih)
    }

    /// One LSTM step from rows of [`ActorCritic::input_gates`], recorded on `tape`:
    /// the heads' input and the next state.
    pub fn recurrent_step_recorded(
        &self,
        input_gates: &Tensor,
        state: &LstmState,
        tape: &mut LstmTape,
    ) -> (Tensor, LstmState) {
        let cell = self.lstm.as_ref().expect("input gates come from a model with an LSTM");
        cell.recorded_step(input_gates.shallow_clone(), state, tape)
    }

    /// The critic's value (`[batch, 1]`) and the policy for the heads' input
    /// `[batch, hidden]`.
    pub fn heads(&self, features: &Tensor) -> (Tensor, Policy) {
        let value = self.critic.forward(features);
        let policy = match &self.gaussian {
            Some(head) => {
                let mean = self.actor.forward(features).tanh() * &head.half_range + &head.center;
                let std = head.std.forward(features).softplus() + head.min_std;
                Policy::Gaussian { mean, std }
            }
            None => Policy::Logits(self.actor.forward(features)),
        };
        (value, policy)
    }
}

/// Stores a conv weight `[out, in, height, width]` channels-last (the `in` index
/// varying fastest), values unchanged. Given such a weight, oneDNN's CPU convolutions
/// run in that order and hand it on to the activations that follow: the reference
/// model's forward pass takes about a third less time per agent step, batched or not
/// (docs/benchmarks.md). A weight with one input channel gets the stride of 1 on
/// `in` too, or libtorch would take it for an ordinary one. Not done on a GPU, where
/// it is unmeasured.
fn store_channels_last(weight: &Tensor) {
    let size = weight.size();
    let (inputs, height, width) = (size[1], size[2], size[3]);
    let strides = [inputs * height * width, 1, width * inputs, inputs];
    tch::no_grad(|| {
        let mut reordered = Tensor::empty_strided(&size, strides, (weight.kind(), weight.device()));
        reordered.copy_(weight);
        weight.shallow_clone().set_data(&reordered);
    });
}

/// Checkpoint names of every parameter of `spec`'s network, in the reference's order.
pub fn parameter_names(spec: &ModelSpec) -> Vec<String> {
    parameter_shapes(spec).into_iter().map(|(name, _)| name).collect()
}

/// Checkpoint names and shapes of every parameter of `spec`'s network, in the
/// reference's order, known without building it: a checkpoint's shapes are checked
/// against them before a model of the size they imply takes any memory. Sizes
/// saturate rather than overflow, so an absurd hidden size gives absurd shapes.
pub fn parameter_shapes(spec: &ModelSpec) -> Vec<(String, Vec<i64>)> {
    let hidden = spec.hidden_size;
    let mut shapes = Vec::new();
    let mut layer = |name: &str, weight: Vec<i64>| {
        let outputs = weight[0];
        shapes.push((format!("{name}.weight"), weight));
        shapes.push((format!("{name}.bias"), vec![outputs]));
    };
    let features = match spec.body {
        Body::AtariLstm => {
            for (name, inputs, outputs, kernel, _) in ATARI_CONVS {
                layer(name, vec![outputs, inputs, kernel, kernel]);
            }
            ATARI_FEATURES
        }
        Body::Universe | Body::UniverseMax => {
            UNIVERSE_CONVS.iter().for_each(|&(name, inputs)| layer(name, vec![32, inputs, 3, 3]));
            UNIVERSE_FEATURES
        }
        Body::Universe84 => {
            UNIVERSE_CONVS.iter().for_each(|&(name, inputs)| layer(name, vec![32, inputs, 3, 3]));
            UNIVERSE84_FEATURES
        }
        Body::Mlp { inputs, .. } => {
            layer("fc1", vec![hidden, inputs]);
            layer("fc2", vec![hidden, hidden]);
            hidden
        }
    };
    let head_inputs = if spec.has_lstm() {
        let gates = hidden.saturating_mul(4);
        shapes.extend([
            ("lstm.weight_ih".to_string(), vec![gates, features]),
            ("lstm.weight_hh".to_string(), vec![gates, hidden]),
            ("lstm.bias_ih".to_string(), vec![gates]),
            ("lstm.bias_hh".to_string(), vec![gates]),
        ]);
        hidden
    } else {
        features
    };
    let mut layer = |name: &str, outputs: i64| {
        shapes.push((format!("{name}.weight"), vec![outputs, head_inputs]));
        shapes.push((format!("{name}.bias"), vec![outputs]));
    };
    layer("critic_linear", 1);
    match &spec.head {
        Head::Discrete { actions } => layer("actor_linear", *actions),
        Head::Gaussian { low, .. } => {
            layer("actor_linear", low.len() as i64);
            layer("actor_std_linear", low.len() as i64);
        }
    }
    shapes
}

/// A linear layer whose weight rows are Gaussian, rescaled to norm `std` (the
/// reference's norm_col_init), with a zero bias.
fn normalized_linear(path: &nn::Path, inputs: i64, outputs: i64, std: f64) -> nn::Linear {
    let config = nn::LinearConfig {
        ws_init: Init::Randn { mean: 0.0, stdev: 1.0 },
        bs_init: Some(Init::Const(0.0)),
        bias: true,
    };
    let linear = nn::linear(path, inputs, outputs, config);
    tch::no_grad(|| {
        let norms = linear.ws.square().sum_dim_intlist(1, true, Kind::Float).sqrt();
        let mut weight = linear.ws.shallow_clone();
        let _ = weight.g_mul_(&(std / norms));
    });
    linear
}

#[cfg(test)]
mod tests {
    use super::*;

    fn atari_spec(hidden_size: i64) -> ModelSpec {
        ModelSpec { body: Body::AtariLstm, hidden_size, head: Head::Discrete { actions: 6 } }
    }

    fn universe_spec(hidden_size: i64) -> ModelSpec {
        ModelSpec { body: Body::Universe, hidden_size, head: Head::Discrete { actions: 6 } }
    }

    /// Each screen picks the network that reads it, universe-max's block maxima
    /// included, which have the bilinear screen's shape; universe-max has universe's
    /// parameters, shape for shape. Observations of an environment that does not say
    /// how its screens are made pick the network by their shape.
    #[test]
    fn screens_pick_their_network() {
        for screen in [Screen::Gray80, Screen::Mean42, Screen::Mean84, Screen::Max42] {
            assert_eq!(Body::reading(screen).screen(), Some(screen));
        }
        let actions = ActionSpace::Discrete { n: 4 };
        let spec = |body| ModelSpec::with_body(body, &actions, 16);
        assert_eq!(
            parameter_shapes(&spec(Body::UniverseMax)),
            parameter_shapes(&spec(Body::Universe))
        );
        let side = UNIVERSE_SIDE;
        assert_eq!(Body::for_observations(&[1, side, side], true), Body::Universe);
        let wide = UNIVERSE84_SIDE;
        assert_eq!(Body::for_observations(&[1, wide, wide], true), Body::Universe84);
        assert_eq!(Body::for_observations(&[1, 80, 80], true), Body::AtariLstm);
        assert_eq!(
            Body::for_observations(&[3, 2], false),
            Body::Mlp { inputs: 6, lstm: false, input_norm: None }
        );
    }

    /// A program's own environment of blank 42x42 screens that does not say how it
    /// makes them.
    struct UnsaidScreens {
        actions: ActionSpace,
    }

    impl Env for UnsaidScreens {
        fn id(&self) -> &str {
            "UnsaidScreens-v0"
        }

        fn action_space(&self) -> &ActionSpace {
            &self.actions
        }

        fn observation_shape(&self) -> &[i64] {
            &[1, UNIVERSE_SIDE, UNIVERSE_SIDE]
        }

        fn reset(&mut self, _seed: Option<u64>) -> Result<Vec<f32>> {
            Ok(vec![0.0; (UNIVERSE_SIDE * UNIVERSE_SIDE) as usize])
        }

        fn step(&mut self, _action: &crate::env::Action) -> Result<crate::env::Step> {
            Ok(crate::env::Step {
                observation: self.reset(None)?,
                reward: 0.0,
                terminated: true,
                truncated: false,
                lives: 0,
                life_lost: false,
            })
        }

        fn env_frames(&self) -> u64 {
            0
        }

        fn render(&mut self) -> Result<crate::env::Frame> {
            Ok(crate::env::Frame { width: 1, height: 1, palette: vec![[0; 3]], pixels: vec![0] })
        }

        fn step_seconds(&self) -> f64 {
            0.0
        }
    }

    /// Screens that do not say how they were made go by their shape, and `--model`
    /// may not name another network for them: universe-max's screens have
    /// universe's shape, and a model labelled for them would be played on others.
    #[test]
    fn model_flag_must_match_unsaid_screens() {
        let env = UnsaidScreens { actions: ActionSpace::Discrete { n: 4 } };
        let request = |network| ModelRequest { network, ..ModelRequest::default() };
        assert_eq!(request(None).fresh_spec(&env).body, Body::Universe);
        assert!(request(Some(Body::Universe)).check_fits(&env).is_ok());
        let refused = request(Some(Body::UniverseMax)).check_fits(&env).unwrap_err().to_string();
        assert!(refused.contains("--model universe-max") && refused.contains("Env::screen"));
        assert!(request(Some(Body::AtariLstm)).check_fits(&env).is_err());
    }

    /// The Atari network has exactly the reference's state_dict keys and shapes.
    #[test]
    fn atari_parameters_match_the_reference() {
        let vs = nn::VarStore::new(Device::Cpu);
        let model = ActorCritic::new(&vs, &atari_spec(512));
        let shapes: Vec<(&str, Vec<i64>)> = model
            .parameters()
            .iter()
            .map(|(name, tensor)| (name.as_str(), tensor.size()))
            .collect();
        let expected: Vec<(&str, Vec<i64>)> = vec![
            ("conv1.weight", vec![32, 1, 5, 5]),
            ("conv1.bias", vec![32]),
            ("conv2.weight", vec![32, 32, 5, 5]),
            ("conv2.bias", vec![32]),
            ("conv3.weight", vec![64, 32, 4, 4]),
            ("conv3.bias", vec![64]),
            ("conv4.weight", vec![64, 64, 3, 3]),
            ("conv4.bias", vec![64]),
            ("lstm.weight_ih", vec![2048, 1024]),
            ("lstm.weight_hh", vec![2048, 512]),
            ("lstm.bias_ih", vec![2048]),
            ("lstm.bias_hh", vec![2048]),
            ("critic_linear.weight", vec![1, 512]),
            ("critic_linear.bias", vec![1]),
            ("actor_linear.weight", vec![6, 512]),
            ("actor_linear.bias", vec![6]),
        ];
        assert_eq!(shapes, expected);
        assert_eq!(vs.variables().len(), expected.len(), "no parameter outside the list");
    }

    /// The universe body through a3g's ELU kernel gives the features and the conv
    /// weights' and biases' gradients that libtorch's ELU gives from the same weights.
    #[test]
    fn universe_body_matches_libtorchs_elu() {
        let vs = nn::VarStore::new(Device::Cpu);
        let model = ActorCritic::new(&vs, &universe_spec(16));
        let screens =
            Tensor::randn([5, 1, UNIVERSE_SIDE, UNIVERSE_SIDE], (Kind::Float, Device::Cpu));
        let parameter = |name: String| {
            &model.parameters().iter().find(|(n, _)| *n == name).expect("a conv parameter").1
        };
        let layers = ["conv1", "conv2", "conv3", "conv4"];
        let weights: Vec<&Tensor> =
            layers.iter().map(|l| parameter(format!("{l}.weight"))).collect();
        let biases: Vec<&Tensor> = layers.iter().map(|l| parameter(format!("{l}.bias"))).collect();
        let upstream = Tensor::randn([5, UNIVERSE_FEATURES], (Kind::Float, Device::Cpu));
        let gradients = |features: Tensor| {
            let mut all = weights.clone();
            all.extend(biases.iter().copied());
            let loss = (features * &upstream).sum(Kind::Float);
            Tensor::run_backward(&[loss], &all, false, false)
        };
        let ours = gradients(model.features(&screens));
        let mut activations = screens.shallow_clone();
        for (weight, bias) in weights.iter().zip(&biases) {
            activations = activations.conv2d(weight, Some(*bias), [2, 2], [1, 1], [1, 1], 1).elu();
        }
        let libtorch_features = activations.flatten(1, -1);
        assert!(model.features(&screens).allclose(&libtorch_features, 1e-5, 1e-6, false));
        let libtorch = gradients(libtorch_features);
        // Each conv weight's gradient sums thousands of products that the two ELUs round
        // apart by a unit in the last place, so entries near zero differ relatively:
        // compare whole gradients by their norm.
        for (index, (a, b)) in ours.iter().zip(&libtorch).enumerate() {
            let relative = (a - b).norm().double_value(&[]) / b.norm().double_value(&[]);
            assert!(relative < 1e-5, "gradient {index} differs by {relative:e} of its norm");
        }
    }

    /// On the CPU every conv weight is stored channels-last, `conv1`'s single input
    /// channel included (a probe once left it with ordinary strides, which made every
    /// layer after it reorder its input), and a forward pass keeps that order to the
    /// features, in which the gradient buffer lays out the weights' gradients too.
    #[test]
    fn cpu_conv_weights_are_channels_last() {
        let universe84 = ModelSpec { body: Body::Universe84, ..universe_spec(16) };
        let specs = [
            (atari_spec(16), 80),
            (universe_spec(16), UNIVERSE_SIDE),
            (universe84, UNIVERSE84_SIDE),
        ];
        for (spec, side) in specs {
            let vs = nn::VarStore::new(Device::Cpu);
            let model = ActorCritic::new(&vs, &spec);
            let mut convs = 0;
            for (name, weight) in model.parameters().iter().filter(|(_, w)| w.dim() == 4) {
                let size = weight.size();
                let expected = [size[1] * size[2] * size[3], 1, size[3] * size[1], size[1]];
                assert_eq!(weight.stride(), expected, "{name} of {:?}", spec.body);
                convs += 1;
            }
            assert_eq!(convs, 4, "{:?}", spec.body);
            let screens = Tensor::randn([2, 1, side, side], (Kind::Float, Device::Cpu));
            let body_output = model.body.forward(&screens);
            assert_eq!(body_output.stride()[1], 1, "{:?}: channels vary fastest", spec.body);
            let features = model.features(&screens).size()[1];
            let lstm_inputs = parameter_shapes(&spec)
                .into_iter()
                .find(|(name, _)| name == "lstm.weight_ih")
                .map(|(_, shape)| shape[1]);
            assert_eq!(Some(features), lstm_inputs, "{:?}: the LSTM takes the features", spec.body);
            let parameters: Vec<Tensor> =
                model.parameters().iter().map(|(_, tensor)| tensor.shallow_clone()).collect();
            let buffer = crate::gradients::GradientBuffer::new(&parameters, Device::Cpu);
            for (parameter, gradient) in parameters.iter().zip(buffer.host_gradients()) {
                assert_eq!(gradient.stride(), parameter.stride());
                assert_eq!(parameter.grad().data_ptr(), gradient.data_ptr());
            }
        }
    }

    /// One step maps a 1x80x80 screen to a value, six logits and a new LSTM state.
    #[test]
    fn atari_forward_shapes() {
        let vs = nn::VarStore::new(Device::Cpu);
        let spec = atari_spec(64);
        let model = ActorCritic::new(&vs, &spec);
        let output = model.forward(
            &Tensor::randn([1, 1, 80, 80], (Kind::Float, Device::Cpu)),
            &LstmState::zeros(&spec, Device::Cpu),
        );
        assert_eq!(output.value.size(), [1, 1]);
        match output.policy {
            Policy::Logits(logits) => assert_eq!(logits.size(), [1, 6]),
            Policy::Gaussian { .. } => panic!("discrete head expected"),
        }
        assert_eq!(output.state.hidden.size(), [1, 64]);
        assert_eq!(output.state.cell.size(), [1, 64]);
    }

    /// A rollout recorded on an LSTM tape gives the same outputs and, once the tape
    /// adds its weight gradients, the same gradient for every parameter as autograd
    /// through libtorch's `lstm_cell` (1e-5), whether the tape's steps make their
    /// own input gates (A3C's rollout) or take them from one batched product (a
    /// recomputed rollout); a step the loss does not use counts as zero.
    #[test]
    fn recorded_rollout_has_autograd_gradients() {
        tch::manual_seed(3);
        let spec = atari_spec(32);
        let stores = [0, 1, 2].map(|_| nn::VarStore::new(Device::Cpu));
        let models = [&stores[0], &stores[1], &stores[2]].map(|vs| ActorCritic::new(vs, &spec));
        for model in &models[1..] {
            let parameters: Vec<Tensor> =
                model.parameters().iter().map(|(_, p)| p.shallow_clone()).collect();
            let reference: Vec<Tensor> =
                models[0].parameters().iter().map(|(_, p)| p.shallow_clone()).collect();
            crate::shared::copy_weights(&reference, &parameters);
        }
        let screens = Tensor::randn([6, 1, 80, 80], (Kind::Float, Device::Cpu));
        let start = || LstmState {
            hidden: Tensor::full([1, 32], 0.2, (Kind::Float, Device::Cpu)),
            cell: Tensor::full([1, 32], -0.1, (Kind::Float, Device::Cpu)),
        };
        // The last step's output is left out of the loss.
        let loss_of = |outputs: &[(Tensor, Policy)]| {
            outputs[..5]
                .iter()
                .map(|(value, policy)| {
                    let Policy::Logits(logits) = policy else { unreachable!() };
                    value.square().sum(Kind::Float)
                        - logits.log_softmax(1, Kind::Float).select(1, 2).sum(Kind::Float)
                })
                .fold(Tensor::zeros([], (Kind::Float, Device::Cpu)), |sum, term| sum + term)
        };
        let mut state = start();
        let mut autograd = Vec::new();
        for t in 0..6 {
            let output = models[0].forward(&screens.narrow(0, t, 1), &state);
            autograd.push((output.value, output.policy));
            state = output.state;
        }
        loss_of(&autograd).backward();

        let mut tape = LstmTape::default();
        let mut state = start();
        let mut stepwise = Vec::new();
        for t in 0..6 {
            let output = models[1].forward_recorded(&screens.narrow(0, t, 1), &state, &mut tape);
            stepwise.push((output.value, output.policy));
            state = output.state;
        }
        loss_of(&stepwise).backward();
        tape.add_weight_gradients(&models[1]);

        let mut tape = LstmTape::default();
        let input_gates = models[2].input_gates(&models[2].features(&screens)).unwrap();
        let mut state = start();
        let mut batched = Vec::new();
        for t in 0..6 {
            let (features, next) =
                models[2].recurrent_step_recorded(&input_gates.narrow(0, t, 1), &state, &mut tape);
            batched.push(models[2].heads(&features));
            state = next;
        }
        loss_of(&batched).backward();
        tape.add_weight_gradients(&models[2]);

        for (recorded, outputs) in [(&models[1], &stepwise), (&models[2], &batched)] {
            for ((expected, _), (value, _)) in autograd.iter().zip(outputs.iter()) {
                assert!(value.allclose(expected, 1e-5, 1e-5, false));
            }
            for ((name, expected), (_, parameter)) in
                models[0].parameters().iter().zip(recorded.parameters())
            {
                let difference = (parameter.grad() - expected.grad()).abs().max().double_value(&[]);
                assert!(difference < 1e-5, "{name}: {difference}");
                assert!(expected.grad().abs().max().double_value(&[]) > 0.0, "{name}");
            }
        }
    }

    /// A model with input scaling plays as the same weights without it would on the
    /// scaled and clipped observations: (x - mean) / std, within ±10.
    #[test]
    fn input_scaling_comes_before_the_first_layer() {
        let norm = InputNorm { mean: vec![1.0, -2.0, 0.5, 0.0], std: vec![2.0, 0.5, 0.01, 1.0] };
        let build = |input_norm: Option<InputNorm>| {
            tch::manual_seed(9);
            let spec = ModelSpec {
                body: Body::Mlp { inputs: 4, lstm: false, input_norm },
                hidden_size: 8,
                head: Head::Discrete { actions: 2 },
            };
            let vs = nn::VarStore::new(Device::Cpu);
            (ActorCritic::new(&vs, &spec), spec, vs)
        };
        let (scaled, spec, _scaled_vs) = build(Some(norm));
        let (plain, _, _plain_vs) = build(None);
        let raw = Tensor::from_slice(&[3.0f32, -2.5, 1.0, 0.25, -1.0, 0.0, 0.4, 7.0]).view([2, 4]);
        let by_hand =
            Tensor::from_slice(&[1.0f32, -1.0, 10.0, 0.25, -1.0, 4.0, -10.0, 7.0]).view([2, 4]);
        let state = LstmState::zeros(&spec, Device::Cpu);
        let value = |model: &ActorCritic, input: &Tensor| model.forward(input, &state).value;
        let gap = (value(&scaled, &raw) - value(&plain, &by_hand)).abs().max().double_value(&[]);
        assert!(gap < 1e-6, "{gap}");
        let unscaled = (value(&plain, &raw) - value(&plain, &by_hand)).abs().max();
        assert!(unscaled.double_value(&[]) > 1e-4, "the check can tell scaled from raw");
    }

    /// A tape adds its products to the LSTM weights' gradients as autograd adds to the
    /// others': two recorded rollouts without zeroing in between leave twice one
    /// rollout's gradient on every parameter.
    #[test]
    fn a_tape_adds_to_existing_gradients() {
        tch::manual_seed(5);
        let spec = ModelSpec {
            body: Body::Mlp { inputs: 4, lstm: true, input_norm: None },
            hidden_size: 8,
            head: Head::Discrete { actions: 3 },
        };
        let vs = nn::VarStore::new(Device::Cpu);
        let model = ActorCritic::new(&vs, &spec);
        let observations = Tensor::randn([5, 4], (Kind::Float, Device::Cpu));
        let rollout = || {
            let mut tape = LstmTape::default();
            let mut state = LstmState::zeros(&spec, Device::Cpu);
            let mut loss = Tensor::zeros([], (Kind::Float, Device::Cpu));
            for t in 0..5 {
                let output =
                    model.forward_recorded(&observations.narrow(0, t, 1), &state, &mut tape);
                let Policy::Logits(logits) = output.policy else { unreachable!() };
                loss = loss + output.value.sum(Kind::Float) + logits.select(1, 1).sum(Kind::Float);
                state = output.state;
            }
            loss.backward();
            tape.add_weight_gradients(&model);
        };
        rollout();
        let once: Vec<Tensor> = model.parameters().iter().map(|(_, p)| p.grad().copy()).collect();
        rollout();
        for ((name, parameter), once) in model.parameters().iter().zip(&once) {
            assert!(once.abs().max().double_value(&[]) > 0.0, "{name} has a gradient");
            let difference = (parameter.grad() - once * 2.0).abs().max().double_value(&[]);
            assert!(difference < 1e-5, "{name}: {difference}");
        }
    }

    /// Initialisation statistics: actor rows of norm 0.01 and critic rows of norm 1,
    /// zero biases but the forget gate's, an orthogonal hidden-to-hidden matrix,
    /// Xavier and ReLU-gain bounds respected.
    #[test]
    fn initialisation_follows_the_reference() {
        tch::manual_seed(0);
        let vs = nn::VarStore::new(Device::Cpu);
        let hidden = 32;
        let model = ActorCritic::new(&vs, &atari_spec(hidden));
        let get = |name: &str| {
            model.parameters().iter().find(|(n, _)| n == name).unwrap().1.shallow_clone()
        };
        let row_norms = |name: &str| {
            Vec::<f32>::try_from(get(name).square().sum_dim_intlist(1, false, Kind::Float).sqrt())
                .unwrap()
        };
        assert!(row_norms("actor_linear.weight").iter().all(|n| (n - 0.01).abs() < 1e-6));
        assert!(row_norms("critic_linear.weight").iter().all(|n| (n - 1.0).abs() < 1e-5));
        for bias in
            ["conv1.bias", "conv4.bias", "actor_linear.bias", "critic_linear.bias", "lstm.bias_hh"]
        {
            assert_eq!(get(bias).abs().max().double_value(&[]), 0.0, "{bias}");
        }
        let bias_ih = Vec::<f32>::try_from(get("lstm.bias_ih")).unwrap();
        for (index, value) in bias_ih.iter().enumerate() {
            let forget_gate = (hidden as usize..2 * hidden as usize).contains(&index);
            assert_eq!(*value, if forget_gate { 1.0 } else { 0.0 }, "bias_ih[{index}]");
        }
        let w_hh = get("lstm.weight_hh"); // [4H, H]: orthonormal columns
        let gram = w_hh.transpose(0, 1).matmul(&w_hh);
        let identity = Tensor::eye(hidden, (Kind::Float, Device::Cpu));
        assert!((gram - identity).abs().max().double_value(&[]) < 1e-4);
        let xavier = (6.0 / (1024.0 + 4.0 * hidden as f64)).sqrt();
        assert!(get("lstm.weight_ih").abs().max().double_value(&[]) <= xavier);
        let conv1_bound = 2f64.sqrt() / 25f64.sqrt();
        let conv1 = get("conv1.weight");
        assert!(conv1.abs().max().double_value(&[]) <= conv1_bound);
        // Uniform on [-b, b] has standard deviation b / sqrt(3).
        let std = conv1.std(true).double_value(&[]);
        assert!((std - conv1_bound / 3f64.sqrt()).abs() < 0.1 * conv1_bound, "conv1 std {std}");
    }

    /// The Gaussian head keeps its mean inside the action bounds and its deviation
    /// positive; the MLP without LSTM passes its state through untouched.
    #[test]
    fn gaussian_head_respects_bounds() {
        let vs = nn::VarStore::new(Device::Cpu);
        let spec = ModelSpec {
            body: Body::Mlp { inputs: 3, lstm: false, input_norm: None },
            hidden_size: 16,
            head: Head::Gaussian { low: vec![-2.0], high: vec![2.0], min_std: 0.5 },
        };
        let model = ActorCritic::new(&vs, &spec);
        let observations = Tensor::randn([64, 3], (Kind::Float, Device::Cpu)) * 100.0;
        let output = model.forward(&observations, &LstmState::zeros(&spec, Device::Cpu));
        assert_eq!(output.value.size(), [64, 1]);
        match output.policy {
            Policy::Gaussian { mean, std } => {
                assert_eq!(mean.size(), [64, 1]);
                assert!(mean.abs().max().double_value(&[]) <= 2.0);
                assert!(std.min().double_value(&[]) >= 0.5 * 0.999);
            }
            Policy::Logits(_) => panic!("Gaussian head expected"),
        }
        assert_eq!(
            model.parameters().iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>(),
            parameter_names(&spec)
        );
        assert_eq!(output.state.hidden.size(), [1, 0]);
    }

    /// The shapes and parameter count computed from the spec are the built network's,
    /// for each body and head.
    #[test]
    fn parameter_shapes_match_the_built_network() {
        let specs = [
            ModelSpec {
                body: Body::AtariLstm,
                hidden_size: 24,
                head: Head::Discrete { actions: 6 },
            },
            ModelSpec {
                body: Body::Universe,
                hidden_size: 20,
                head: Head::Discrete { actions: 4 },
            },
            ModelSpec {
                body: Body::UniverseMax,
                hidden_size: 20,
                head: Head::Discrete { actions: 4 },
            },
            ModelSpec {
                body: Body::Mlp { inputs: 4, lstm: false, input_norm: None },
                hidden_size: 16,
                head: Head::Discrete { actions: 2 },
            },
            ModelSpec {
                body: Body::Mlp { inputs: 3, lstm: true, input_norm: None },
                hidden_size: 8,
                head: Head::Gaussian { low: vec![-2.0], high: vec![2.0], min_std: 0.5 },
            },
        ];
        for spec in specs {
            let vs = nn::VarStore::new(Device::Cpu);
            let model = ActorCritic::new(&vs, &spec);
            let built: i64 =
                model.parameters().iter().map(|(_, tensor)| tensor.numel() as i64).sum();
            assert_eq!(spec.parameter_count(), built as f64, "{spec:?}");
            let shapes: Vec<(String, Vec<i64>)> = model
                .parameters()
                .iter()
                .map(|(name, tensor)| (name.clone(), tensor.size()))
                .collect();
            assert_eq!(parameter_shapes(&spec), shapes, "{spec:?}");
        }
    }
}
