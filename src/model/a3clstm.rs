//! The reference's network body (rl_a3c_pytorch's A3Clstm): four convolutions with
//! max-pooling and ReLU over an 80x80 screen, 1024 features for the LSTM.

use tch::nn::{self, Init};

/// Features the Atari conv stack gives an LSTM: 64 channels of 4x4.
pub(super) const ATARI_FEATURES: i64 = 1024;

/// The reference's conv layers: name, input channels, filters, kernel side, padding.
pub(super) const ATARI_CONVS: [(&str, i64, i64, i64, i64); 4] = [
    ("conv1", 1, 32, 5, 2),
    ("conv2", 32, 32, 5, 1),
    ("conv3", 32, 64, 4, 1),
    ("conv4", 64, 64, 3, 1),
];

/// The reference's conv stack: each conv is followed by 2x2 max-pooling, then ReLU.
/// Weights start as PyTorch's default (uniform within 1/sqrt(fan_in)) scaled by the
/// ReLU gain sqrt(2); biases at zero.
pub(super) fn atari_convs(root: &nn::Path) -> nn::Sequential {
    let mut body = nn::seq();
    for (name, inputs, outputs, kernel, padding) in ATARI_CONVS {
        let fan_in = (inputs * kernel * kernel) as f64;
        let bound = 2f64.sqrt() / fan_in.sqrt();
        let config = nn::ConvConfig {
            padding,
            ws_init: Init::Uniform { lo: -bound, up: bound },
            bs_init: Init::Const(0.0),
            ..Default::default()
        };
        let conv = nn::conv2d(root / name, inputs, outputs, kernel, config);
        body =
            body.add(conv).add_fn(|x| x.max_pool2d([2, 2], [2, 2], [0, 0], [1, 1], false).relu());
    }
    body
}
