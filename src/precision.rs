//! `--precision`: the batched passes of GA3C's trainers and predictors in bfloat16,
//! where the hardware computes it natively.
//!
//! A bf16 pass runs the network's body (the convolutions, or the MLP's layers) under
//! libtorch's autocast (src/autocast.cpp): the weights stay fp32 (the shared model,
//! each thread's copy, the optimizer's statistics, every checkpoint), autocast casts
//! them and the inputs for the body's products, and the body's output comes back as
//! fp32 for the LSTM cell, the heads and the loss. The casts are part of the graph, so
//! the gradients reach the fp32 weights in fp32. Batch-1 passes (A3C's workers, the
//! test agent, eval) stay fp32: there bf16 loses (docs/benchmarks.md, "bf16").

use tch::{Device, Kind, Tensor};

/// How a run computes its batched passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Bf16,
}

/// The fewest rows a predictor's batch has for its forward pass to run in bf16:
/// below it the universe network's forward pass costs more in bf16 than in fp32
/// (docs/benchmarks.md, "bf16": 0.61x at batch 1, 0.85x at 4, 1.33x at 8, 1.74x at 32
/// on an EPYC with AVX512-BF16; the reference network's gains at every batch).
pub const PREDICT_MIN_BF16_ROWS: usize = 8;

/// Whether this machine's CPU computes bf16 products natively (AVX512-BF16 or
/// AMX-BF16): elsewhere libtorch emulates them, several times slower than fp32.
pub fn native_bf16_cpu() -> bool {
    cpu_flags().iter().any(|flag| flag == "avx512_bf16" || flag == "amx_bf16")
}

/// The CPU's feature flags as Linux lists them, empty where it does not.
fn cpu_flags() -> Vec<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find(|line| line.starts_with("flags"))
        .and_then(|line| line.split_once(':'))
        .map(|(_, flags)| flags.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Whether `device` computes bf16 natively: a CPU with native bf16, or CUDA devices
/// of compute capability 8.0 or above (Ampere on; libtorch answers for the current
/// one, and a run's GPUs are taken to be alike).
pub fn native_bf16(device: Device) -> bool {
    match device {
        Device::Cpu => native_bf16_cpu(),
        // SAFETY: the shim asks libtorch's CUDA hooks and catches what they throw.
        Device::Cuda(_) => unsafe { ffi::a3g_cuda_native_bf16() == 1 },
        _ => false,
    }
}

impl Precision {
    /// What `--precision auto` takes on `devices`: bf16 where every device computes it
    /// natively, fp32 elsewhere.
    pub fn auto(devices: &[Device]) -> Self {
        if !devices.is_empty() && devices.iter().all(|&device| native_bf16(device)) {
            Precision::Bf16
        } else {
            Precision::Fp32
        }
    }

    /// The flag's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
        }
    }

    /// Runs `body`, a network body's pass on `device`, in this precision, and gives its
    /// output as fp32.
    pub fn run(self, device: Device, body: impl FnOnce() -> Tensor) -> Tensor {
        match self {
            Precision::Fp32 => body(),
            Precision::Bf16 => {
                let _region = Bf16Region::enter(device);
                body()
            }
            .to_kind(Kind::Float),
        }
    }

    /// The precision of a predictor's forward pass over `rows` rows: bf16 only for
    /// batches large enough to gain by it.
    pub fn for_rows(self, rows: usize) -> Self {
        if rows >= PREDICT_MIN_BF16_ROWS {
            self
        } else {
            Precision::Fp32
        }
    }
}

mod ffi {
    use std::ffi::c_int;

    extern "C" {
        pub fn a3g_autocast_enter(cuda: c_int) -> c_int;
        pub fn a3g_autocast_exit(cuda: c_int, was_enabled: c_int);
        pub fn a3g_cuda_native_bf16() -> c_int;
    }
}

/// This thread's autocast region in bf16 on one kind of device; left when dropped.
struct Bf16Region {
    cuda: i32,
    was_enabled: i32,
}

impl Bf16Region {
    fn enter(device: Device) -> Self {
        let cuda = i32::from(device.is_cuda());
        // SAFETY: the shim only sets this thread's autocast state and catches what
        // libtorch throws.
        let was_enabled = unsafe { ffi::a3g_autocast_enter(cuda) };
        assert!(was_enabled >= 0, "libtorch refused an autocast region");
        Bf16Region { cuda, was_enabled }
    }
}

impl Drop for Bf16Region {
    fn drop(&mut self) {
        // SAFETY: as in `enter`; restores the state `enter` found.
        unsafe { ffi::a3g_autocast_exit(self.cuda, self.was_enabled) }
    }
}

#[cfg(test)]
mod tests {
    use tch::nn;

    use super::*;

    /// Inside a region a convolution runs in bf16 on fp32 weights and inputs, its
    /// output comes back fp32, close to the fp32 pass, and its gradient reaches the
    /// fp32 weight in fp32; outside, the same convolution is fp32 again (the region
    /// left no state, and no cast of the weight outlived it).
    #[test]
    fn a_region_runs_products_in_bf16_and_leaves_the_weights_fp32() {
        tch::manual_seed(3);
        let vs = nn::VarStore::new(Device::Cpu);
        let conv = nn::conv2d(vs.root() / "conv", 4, 8, 3, Default::default());
        let input = Tensor::randn([2, 4, 9, 9], (Kind::Float, Device::Cpu));
        let mut inner_kind = None;
        let mixed = Precision::Bf16.run(Device::Cpu, || {
            let output = input.apply(&conv);
            inner_kind = Some(output.kind());
            output
        });
        assert_eq!(inner_kind, Some(Kind::BFloat16));
        assert_eq!(mixed.kind(), Kind::Float);
        let exact = input.apply(&conv);
        assert_eq!(exact.kind(), Kind::Float);
        let error = (&mixed - &exact).abs().max().double_value(&[]);
        let scale = exact.abs().max().double_value(&[]);
        assert!(error < 0.02 * scale, "{error} against {scale}");
        mixed.sum(Kind::Float).backward();
        assert_eq!(conv.ws.grad().kind(), Kind::Float);
        assert_eq!(conv.ws.kind(), Kind::Float);
    }

    /// Small predictor batches stay fp32; fp32 stays fp32 at any size.
    #[test]
    fn only_large_batches_take_bf16() {
        assert_eq!(Precision::Bf16.for_rows(1), Precision::Fp32);
        assert_eq!(Precision::Bf16.for_rows(PREDICT_MIN_BF16_ROWS), Precision::Bf16);
        assert_eq!(Precision::Fp32.for_rows(1024), Precision::Fp32);
    }
}
