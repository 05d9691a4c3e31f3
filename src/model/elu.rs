//! The ELU of the universe network's conv layers, through a3g's own CPU kernel
//! (`src/model/elu.cpp`, compiled by build.rs against libtorch's headers as `cfg(a3g_elu)`).
//!
//! The kernel computes the same function as libtorch's `elu` to within its rounding
//! (both are within two float units in the last place), about four times faster on the
//! AVX2 cores a3g trains on; its backward pass is libtorch's `elu_backward` from the
//! output, which skips the exponential that the backward from the input recomputes.
//! Tensors off the CPU, other dtypes and CPUs without AVX2 and FMA get libtorch's
//! `elu`, as do builds for other architectures and a build where the kernel did not
//! compile.

use tch::Tensor;

#[cfg(a3g_elu)]
mod kernel {
    extern "C" {
        pub fn a3g_elu(input: *const torch_sys::C_tensor) -> *mut torch_sys::C_tensor;
    }
}

/// ELU with alpha 1: `x` above zero, `e^x - 1` below; differentiable.
pub fn elu(input: &Tensor) -> Tensor {
    #[cfg(a3g_elu)]
    if input.device() == tch::Device::Cpu {
        // SAFETY: the kernel reads the tensor `input` points to and returns a new
        // at::Tensor allocated with `new`, which from_ptr takes ownership of; null only
        // when libtorch threw.
        let output = unsafe { kernel::a3g_elu(input.as_ptr()) };
        assert!(!output.is_null(), "libtorch failed in a3g's ELU kernel (out of memory?)");
        return unsafe { Tensor::from_ptr(output) };
    }
    input.elu()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    /// Values on both sides of zero and in every range the kernel treats apart: tiny
    /// negatives (where e^x - 1 cancels), the reduction's steps, far below -88.
    fn probe_values() -> Tensor {
        let spread = Tensor::linspace(-100.0, 5.0, 100_003, (Kind::Float, Device::Cpu));
        let random = Tensor::randn([50_000], (Kind::Float, Device::Cpu)) * 3.0;
        let edges = Tensor::from_slice(&[0.0f32, -0.0, -1e-8, -1e-30, -87.5, -88.7, -200.0, 1e-30]);
        Tensor::cat(&[spread, random, edges], 0)
    }

    /// Without the kernel the tests below would pass on libtorch's ELU alone.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_kernel_is_built() {
        let built = cfg!(a3g_elu);
        assert!(built, "src/model/elu.cpp did not compile: the build's warnings say why");
    }

    #[test]
    fn elu_matches_libtorch_to_rounding() {
        let input = probe_values();
        let exact = input.to_kind(Kind::Double).elu();
        let ours = elu(&input).to_kind(Kind::Double);
        let libtorch = input.elu().to_kind(Kind::Double);
        let error = (&ours - &exact).abs().max().double_value(&[]);
        let libtorch_error = (&libtorch - &exact).abs().max().double_value(&[]);
        assert!(
            error < 2.0 * libtorch_error.max(1e-8),
            "error {error}, libtorch's {libtorch_error}"
        );
        // Relative error on the negative side, where a careless e^x - 1 loses digits.
        let negative = input.lt(0.0);
        let relative = ((&ours - &exact).abs() / exact.abs().clamp_min(1e-30))
            .masked_select(&negative)
            .max()
            .double_value(&[]);
        assert!(relative < 3e-7, "relative error {relative} below zero");
    }

    #[test]
    fn elu_keeps_the_layout_and_odd_lengths() {
        // A channels-last conv output, and a length that is not a multiple of 8.
        let nchw = Tensor::randn([3, 5, 7, 9], (Kind::Float, Device::Cpu));
        let channels_last = nchw.permute([0, 2, 3, 1]).contiguous().permute([0, 3, 1, 2]);
        let output = elu(&channels_last);
        assert_eq!(output.stride(), channels_last.stride());
        assert!(output.allclose(&nchw.elu(), 1e-6, 1e-7, false));
        let transposed = nchw.transpose(1, 3);
        assert!(elu(&transposed).allclose(&transposed.elu(), 1e-6, 1e-7, false));
    }

    #[test]
    fn elu_gradient_is_libtorchs() {
        let input = probe_values().narrow(0, 90_000, 20_000).set_requires_grad(true);
        let upstream = Tensor::randn_like(&input);
        let ours = Tensor::run_backward(
            &[(elu(&input) * &upstream).sum(Kind::Float)],
            &[&input],
            false,
            false,
        );
        let libtorch = Tensor::run_backward(
            &[(input.elu() * &upstream).sum(Kind::Float)],
            &[&input],
            false,
            false,
        );
        assert!(ours[0].allclose(&libtorch[0], 1e-5, 1e-6, false));
    }
}
