// Element formats, rounding, block scaling and fake quantization (FORMATS.md).
// Layout: row-major everywhere. A QuantSpec's block runs (block_rows × block_cols) over a
// rows × cols matrix; 0 means "the whole dimension" (so {0,0} is per-tensor).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace snip {

enum class ElemFormat : uint8_t { fp32, bf16, e4m3, e5m2, e3m2, e2m3, e2m1 };
enum class Rounding : uint8_t { rne, stochastic, away };
enum class ScaleKind : uint8_t { none, fp32, e8m0, nvfp4 };  // none: no scaling (fp32, bf16)
enum class E8M0Mode : uint8_t { floor, ceil, rceil, even };

const char* elem_format_name(ElemFormat f);        // "fp32" "bf16" "e4m3" "e5m2" "e3m2" "e2m3" "e2m1"
ElemFormat parse_elem_format(std::string_view s);  // throws snip::Error
const char* rounding_name(Rounding r);
Rounding parse_rounding(std::string_view s);
const char* e8m0_mode_name(E8M0Mode m);
E8M0Mode parse_e8m0_mode(std::string_view s);

// How to fake-quantize one operand.
struct QuantSpec {
  ElemFormat format = ElemFormat::fp32;
  int block_rows = 0;  // 0 = whole dimension
  int block_cols = 0;  // 0 = whole dimension
  ScaleKind scale = ScaleKind::none;
  E8M0Mode e8m0_mode = E8M0Mode::rceil;
  Rounding rounding = Rounding::rne;
  bool operator==(const QuantSpec&) const = default;
};

// Key of the counter-based RNG for stochastic rounding: the random bits of element i are a
// pure function of (seed, step, layer, role, i), so results never depend on thread count.
struct RngKey {
  uint64_t seed = 0;
  uint64_t step = 0;
  uint32_t layer = 0;
  uint32_t role = 0;  // distinguishes the operands/GEMMs of one layer
};

// Error statistics of one fake quantization (filled when requested).
struct QuantStats {
  double err_sq = 0;  // ‖x̂ − x‖²
  double ref_sq = 0;  // ‖x‖²
  double max_abs_err = 0;
  int64_t saturated = 0;  // elements clamped to ±max
  int64_t zeros = 0;      // elements that quantized to zero
  int64_t count = 0;
};

// y = dequantize(quantize(x)); y may alias x. `codes` (optional) receives one element code
// per element. Non-finite input throws snip::Error naming `tensor_name` and the index.
void fake_quantize(float* y, const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                   const char* tensor_name, QuantStats* stats = nullptr, uint8_t* codes = nullptr);

// Scalar reference twin of fake_quantize: block by block, element by element, rounding in
// double (elem_format.h). Bit-identical to fake_quantize (stats up to summation order);
// the test oracle. Slow.
void fake_quantize_ref(float* y, const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                       const char* tensor_name, QuantStats* stats = nullptr, uint8_t* codes = nullptr);

// Threads used by the quantization kernels (default: the shared pool's size, pool_threads():
// SNIP_NUM_THREADS or the hardware concurrency); the work runs on the shared thread pool of
// snip/thread_pool.h. Results never depend on it; tests set it to check exactly that.
// n <= 0 restores the default.
void set_quant_threads(int n);
int quant_threads();

}  // namespace snip
