// Autocast regions for a3g's mixed-precision passes (src/precision.rs): libtorch's own
// autocast, which tch binds only in its deprecated CUDA-only form. Inside a region the
// ops autocast lists for the device (convolutions and matrix products) run in
// bfloat16 on casts of their fp32 inputs, recorded in the graph so that gradients
// reach the fp32 weights in fp32; everything else keeps its dtype. The state is the
// calling thread's own, as in PyTorch's `torch.autocast`.

#include <ATen/autocast_mode.h>
#include <ATen/detail/CUDAHooksInterface.h>

extern "C" {

// Enters a bfloat16 region on the CPU (`cuda` 0) or on CUDA devices (`cuda` 1).
// Returns whether autocast was already on for that device, which a3g_autocast_exit
// restores, or -1 if libtorch refused.
int a3g_autocast_enter(int cuda) {
  try {
    at::DeviceType device = cuda != 0 ? at::kCUDA : at::kCPU;
    bool was_enabled = at::autocast::is_autocast_enabled(device);
    at::autocast::set_autocast_dtype(device, at::kBFloat16);
    at::autocast::set_autocast_enabled(device, true);
    at::autocast::increment_nesting();
    return was_enabled ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

// Leaves the region a3g_autocast_enter opened. The casts autocast kept of the weights
// are dropped when the outermost region ends: the next pass reads weights that were
// pulled anew in place, which a kept cast would not see.
void a3g_autocast_exit(int cuda, int was_enabled) {
  try {
    at::DeviceType device = cuda != 0 ? at::kCUDA : at::kCPU;
    if (at::autocast::decrement_nesting() == 0) {
      at::autocast::clear_cache();
    }
    at::autocast::set_autocast_enabled(device, was_enabled != 0);
  } catch (...) {
  }
}

// Whether the current CUDA device computes bf16 natively (compute capability 8.0 or
// above), as libtorch's CUDA hooks answer without a3g needing CUDA's headers; 0
// without CUDA.
int a3g_cuda_native_bf16() {
  try {
    return at::detail::getCUDAHooks().supportsBFloat16ConvolutionWithCuDNNv8() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

}  // extern "C"
