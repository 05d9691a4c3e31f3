//! The classic-control and Box2D body: two fully connected ReLU layers over a flat
//! observation, after its `--normalize-obs` scaling when it has one.

use tch::nn::{self, Init};

use crate::input_norm::{InputNorm, INPUT_NORM_CLIP};

/// Two ReLU layers with PyTorch's default Linear initialisation, after the input's
/// scaling when it has one.
pub(super) fn mlp(
    root: &nn::Path,
    inputs: i64,
    hidden: i64,
    input_norm: Option<&InputNorm>,
) -> nn::Sequential {
    let layer = |name: &str, inputs: i64| {
        let bound = 1.0 / (inputs as f64).sqrt();
        let config = nn::LinearConfig {
            ws_init: Init::Uniform { lo: -bound, up: bound },
            bs_init: Some(Init::Uniform { lo: -bound, up: bound }),
            bias: true,
        };
        nn::linear(root / name, inputs, hidden, config)
    };
    let mut body = nn::seq();
    if let Some(norm) = input_norm {
        let device = root.device();
        let (mean, std) = (norm.mean_tensor(device), norm.std_tensor(device));
        body = body.add_fn(move |x| ((x - &mean) / &std).clamp(-INPUT_NORM_CLIP, INPUT_NORM_CLIP));
    }
    body.add(layer("fc1", inputs))
        .add_fn(|x| x.relu())
        .add(layer("fc2", hidden))
        .add_fn(|x| x.relu())
}
