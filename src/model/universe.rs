//! The universe network's body (ikostrikov/pytorch-a3c, from openai's
//! universe-starter-agent): four 3x3 stride-2 convolutions with ELU over a 42x42
//! screen, 288 features for the LSTM (over 84x84, `--model universe84`, 1152), through
//! a3g's own ELU kernel ([`super::elu`]).

use tch::nn::{self, Init};

use super::lstm::LstmCell;

/// Side of the universe network's square screen, and the features its conv stack
/// gives an LSTM: 32 channels of 3x3.
pub const UNIVERSE_SIDE: i64 = 42;
pub(super) const UNIVERSE_FEATURES: i64 = 288;
/// The same for `--model universe84`: 84x84 down to 32 channels of 6x6.
pub const UNIVERSE84_SIDE: i64 = 84;
pub const UNIVERSE84_FEATURES: i64 = 1152;

/// The universe network's conv layers: name and input channels (each has 32 filters
/// of 3x3).
pub(super) const UNIVERSE_CONVS: [(&str, i64); 4] =
    [("conv1", 1), ("conv2", 32), ("conv3", 32), ("conv4", 32)];

/// The universe network's conv stack: each conv (3x3, stride 2, padding 1, 32
/// filters) is followed by ELU, taking 42x42 down to 3x3 (84x84 to 6x6). Weights start uniform within
/// sqrt(6 / (fan_in + fan_out)) as in ikostrikov's `weights_init`, biases at zero.
pub(super) fn universe_convs(root: &nn::Path) -> nn::Sequential {
    let mut body = nn::seq();
    for (name, inputs) in UNIVERSE_CONVS {
        let (fan_in, fan_out) = ((inputs * 9) as f64, (32 * 9) as f64);
        let bound = (6.0 / (fan_in + fan_out)).sqrt();
        let config = nn::ConvConfig {
            stride: 2,
            padding: 1,
            ws_init: Init::Uniform { lo: -bound, up: bound },
            bs_init: Init::Const(0.0),
            ..Default::default()
        };
        body = body.add(nn::conv2d(root / name, inputs, 32, 3, config)).add_fn(super::elu::elu);
    }
    body
}

/// The universe network's LSTM cell as ikostrikov leaves it: PyTorch's default
/// LSTMCell initialisation (uniform within 1/sqrt(hidden)), biases then zeroed.
pub(super) fn universe_lstm_cell(path: &nn::Path, inputs: i64, hidden: i64) -> LstmCell {
    let bound = 1.0 / (hidden as f64).sqrt();
    let uniform = Init::Uniform { lo: -bound, up: bound };
    LstmCell {
        weight_ih: path.var("weight_ih", &[4 * hidden, inputs], uniform),
        weight_hh: path.var("weight_hh", &[4 * hidden, hidden], uniform),
        bias_ih: path.var("bias_ih", &[4 * hidden], Init::Const(0.0)),
        bias_hh: path.var("bias_hh", &[4 * hidden], Init::Const(0.0)),
    }
}
