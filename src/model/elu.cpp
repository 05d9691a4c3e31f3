// The universe network's ELU on the CPU (src/elu.rs says when it is used).
//
// libtorch's ELU evaluates SLEEF's expm1 at about 2.7 ns an element on the AVX2 cores
// a3g trains on, four times its memory traffic, and the universe network's ELUs were a
// fifth of a GA3C trainer's time and a sixth of a predictor's (docs/benchmarks.md).
// This forward pass uses the classic Cephes reduction of exp (x = n ln 2 + r, a
// degree-7 polynomial in r) and writes e^x - 1 as 2^n (e^r - 1) + (2^n - 1), which
// keeps libtorch's accuracy near zero. The backward pass is libtorch's own, from the
// output: d ELU / dx = 1 above zero and ELU(x) + 1 below.

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace {

// e^x - 1 for lanes with x <= 0.
__attribute__((target("avx2,fma"))) __m256 expm1_nonpositive(__m256 x) {
  // Below -88, e^x is under float's smallest normal and e^x - 1 rounds to -1.
  x = _mm256_max_ps(x, _mm256_set1_ps(-88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln 2, with ln 2 split in two so that n ln 2 is exact to float precision.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 expm1_r = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r);
  const __m256i exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 two_n = _mm256_castsi256_ps(exponent);
  return _mm256_fmadd_ps(two_n, expm1_r, _mm256_sub_ps(two_n, _mm256_set1_ps(1.0f)));
}

__attribute__((target("avx2,fma"))) void elu_avx2(const float* input, float* output,
                                                   int64_t length) {
  int64_t i = 0;
  for (; i + 8 <= length; i += 8) {
    const __m256 x = _mm256_loadu_ps(input + i);
    const __m256 below = expm1_nonpositive(_mm256_min_ps(x, _mm256_setzero_ps()));
    const __m256 positive = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ);
    _mm256_storeu_ps(output + i, _mm256_blendv_ps(below, x, positive));
  }
  for (; i < length; ++i) {
    output[i] = input[i] > 0.0f ? input[i] : std::expm1(input[i]);
  }
}

bool has_avx2_fma() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return supported;
}

struct Elu : public torch::autograd::Function<Elu> {
  static at::Tensor forward(torch::autograd::AutogradContext* context, const at::Tensor& input) {
    at::Tensor output;
    if (input.device().is_cpu() && input.scalar_type() == at::kFloat && has_avx2_fma()) {
      // Any dense layout will do (conv outputs are channels-last): the kernel runs over
      // memory in order, and empty_like keeps the input's strides.
      const at::Tensor dense = input.is_non_overlapping_and_dense() ? input : input.contiguous();
      output = at::empty_like(dense);
      elu_avx2(dense.const_data_ptr<float>(), output.mutable_data_ptr<float>(), dense.numel());
    } else {
      output = at::elu(input);
    }
    context->save_for_backward({output});
    return output;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const at::Tensor output = context->get_saved_variables()[0];
    return {at::elu_backward(gradients[0], 1.0, 1.0, 1.0, /*is_result=*/true, output)};
  }
};

}  // namespace

extern "C" {

// ELU(input) with alpha 1, recorded for autograd when input needs a gradient; a new
// tensor the caller owns, or null if libtorch threw (no exception crosses into Rust).
at::Tensor* a3g_elu(const at::Tensor* input) {
  try {
    return new at::Tensor(Elu::apply(*input));
  } catch (...) {
    return nullptr;
  }
}

}  // extern "C"
