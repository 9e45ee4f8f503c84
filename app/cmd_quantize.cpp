// `snip quantize`: fake-quantizes a raw float32 matrix with one element format and one of the
// recipes' scalings (FORMATS.md, METHOD.md section 2), writes the dequantized values (and
// optionally the element codes) and prints the quantization error, so our numerics can be
// checked bit for bit against any other implementation.
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/atomic_file.h"
#include "snip/checked.h"
#include "snip/error.h"
#include "snip/qlinear.h"
#include "snip/quant.h"

namespace {

static_assert(std::endian::native == std::endian::little, "raw .f32 files are little-endian");

struct QuantizeOptions {
  std::string format;
  std::string recipe = "snip";
  std::string role = "activation";
  std::string shape;
  std::string in;
  std::string out;
  std::string rounding;  // empty: the recipe's rounding for this role
  uint64_t seed = 0;
  std::string scale_mode = "rceil";
  std::string codes;
  bool json = false;
};

// "ROWSxCOLS" -> (rows, cols), both positive.
std::pair<int64_t, int64_t> parse_shape(const std::string& s) {
  const auto x = s.find('x');
  auto bad = [&] { return snip::Error("--shape '" + s + "' is not ROWSxCOLS with positive integers (e.g. 4096x256)"); };
  if (x == std::string::npos || x == 0 || x + 1 >= s.size()) throw bad();
  int64_t v[2];
  const std::string parts[2] = {s.substr(0, x), s.substr(x + 1)};
  for (int i = 0; i < 2; ++i) {
    if (parts[i].find_first_not_of("0123456789") != std::string::npos || parts[i].size() > 12) throw bad();
    v[i] = std::stoll(parts[i]);
    if (v[i] <= 0) throw bad();
  }
  return {v[0], v[1]};
}

// The options the resolved quantization does not use: an error where the output would claim
// what was not done (a rounding BF16 does not have), a warning where the option has no effect.
void check_options_used(const snip::cli::OptionRules& rules, const snip::QuantSpec& spec, snip::ElemFormat format) {
  const bool bf16 = format == snip::ElemFormat::bf16;
  if (bf16 && rules.given("--rounding") && spec.rounding != snip::Rounding::rne)
    throw snip::Error("--rounding " + std::string(snip::rounding_name(spec.rounding)) +
                      " with --format bf16: BF16 is always rounded to nearest-even here; drop --rounding");
  if (bf16)
    for (const char* opt : {"--recipe", "--role", "--scale-mode"})
      if (rules.given(opt))
        snip::cli::OptionRules::warn(std::string(opt) + " is ignored with --format bf16 (no scale, no blocks)");
  if (!bf16 && rules.given("--scale-mode") && spec.scale != snip::ScaleKind::e8m0)
    snip::cli::OptionRules::warn("--scale-mode is ignored: this recipe and format use no E8M0 scale (mx does)");
  if (rules.given("--seed") && spec.rounding != snip::Rounding::stochastic)
    snip::cli::OptionRules::warn("--seed is ignored: the rounding is " +
                                 std::string(snip::rounding_name(spec.rounding)) +
                                 ", not stochastic (give --rounding stochastic)");
}

snip::ElemFormat parse_format_option(const std::string& name) {
  const char* const formats = "e4m3, e5m2, e2m1, e3m2, e2m3 or bf16";
  if (name == "fp32") throw snip::Error(std::string("--format fp32 is the identity; use ") + formats);
  try {
    return snip::parse_elem_format(name);
  } catch (const snip::Error&) {
    throw snip::Error("unknown --format '" + name + "': use " + formats);
  }
}

// The recipe's quantization for this format and role, with --rounding applied.
snip::QuantSpec quant_spec(const QuantizeOptions& o, const snip::Recipe& recipe, snip::ElemFormat format,
                           snip::Operand role) {
  // The element format picks the recipe's precision class; 1D blocks run along the last
  // (contiguous) dimension, as for X and dY in their own GEMMs; weights use the 2D blocks.
  const snip::Precision p = format == snip::ElemFormat::bf16   ? snip::Precision::bf16
                            : format == snip::ElemFormat::e2m1 ? snip::Precision::fp4
                                                               : snip::Precision::fp8;
  const snip::Gemm gemm = role == snip::Operand::gradient ? snip::Gemm::dgrad : snip::Gemm::fprop;
  snip::QuantSpec spec = recipe.spec(p, gemm, role);
  spec.format = format;
  if (!o.rounding.empty()) spec.rounding = snip::parse_rounding(o.rounding);
  return spec;
}

// The rows·cols float32 input; its size and the memory checked before anything is read.
std::vector<float> read_matrix(const QuantizeOptions& o, int64_t rows, int64_t cols) {
  // rows·cols·4 from the user's numbers: checked, so an overflowing --shape cannot wrap to the file size.
  const int64_t elements = snip::mul_or_throw<int64_t>(rows, cols, "--shape " + o.shape);
  const uint64_t need = uint64_t(snip::mul_or_throw<int64_t>(elements, 4, "--shape " + o.shape + " in bytes"));
  // The file's size and the memory before anything is read (reading was a third of the memory).
  std::error_code size_ec;
  const uintmax_t size = std::filesystem::file_size(o.in, size_ec);
  if (!size_ec && size != need)
    throw snip::Error(o.in + " has " + std::to_string(size) + " bytes but --shape " + o.shape + " needs " +
                      std::to_string(need) + " (rows·cols·4 bytes of raw little-endian float32); check --shape");
  snip::check_fits_in_memory(double(need) * (o.codes.empty() ? 3.0 : 3.25), "quantizing a " + o.shape + " matrix",
                             "quantize a smaller matrix");
  const std::string data = snip::read_file(o.in);
  if (data.size() != need)
    throw snip::Error(o.in + " has " + std::to_string(data.size()) + " bytes but --shape " + o.shape + " needs " +
                      std::to_string(need) + " (rows·cols·4 bytes of raw little-endian float32); check --shape");
  std::vector<float> x(static_cast<size_t>(elements));
  std::memcpy(x.data(), data.data(), data.size());
  return x;
}

void print_quantize_report(const QuantizeOptions& o, const snip::QuantSpec& spec, const snip::Recipe& recipe,
                           snip::Operand role, int64_t rows, int64_t cols, const snip::QuantStats& st) {
  const double n = double(st.count);
  const double rmse = std::sqrt(st.err_sq / n);
  const double rel = st.ref_sq > 0 ? std::sqrt(st.err_sq / st.ref_sq) : (st.err_sq > 0 ? INFINITY : 0.0);
  const double sat_pct = 100.0 * double(st.saturated) / n;
  const double zero_pct = 100.0 * double(st.zeros) / n;
  const char* scale_names[] = {"none", "fp32", "e8m0", "nvfp4"};
  const std::string block = std::to_string(spec.block_rows) + "x" + std::to_string(spec.block_cols);
  if (o.json) {
    nlohmann::json j = {{"format", snip::elem_format_name(spec.format)},
                        {"recipe", recipe.name()},
                        {"role", snip::operand_name(role)},
                        {"rows", rows},
                        {"cols", cols},
                        {"block_rows", spec.block_rows},
                        {"block_cols", spec.block_cols},
                        {"scale", scale_names[int(spec.scale)]},
                        {"scale_mode", snip::e8m0_mode_name(spec.e8m0_mode)},
                        {"rounding", snip::rounding_name(spec.rounding)},
                        {"seed", o.seed},
                        {"elements", st.count},
                        {"rmse", rmse},
                        {"rel_frobenius_error", rel},
                        {"max_abs_error", st.max_abs_err},
                        {"saturated_pct", sat_pct},
                        {"zero_pct", zero_pct}};
    std::printf("%s\n", snip::cli::json_text(j).c_str());
    return;
  }
  std::printf(
      "quantized %lldx%lld %s with recipe %s (%s): blocks %s (0 = whole dimension), scale %s%s%s, rounding %s\n",
      (long long)rows, (long long)cols, snip::elem_format_name(spec.format), recipe.name().c_str(),
      snip::operand_name(role), block.c_str(), scale_names[int(spec.scale)],
      spec.scale == snip::ScaleKind::e8m0 ? " mode " : "",
      spec.scale == snip::ScaleKind::e8m0 ? snip::e8m0_mode_name(spec.e8m0_mode) : "",
      snip::rounding_name(spec.rounding));
  std::printf("  rmse                 %.6g\n", rmse);
  std::printf("  rel. Frobenius error %.6g\n", rel);
  std::printf("  max abs error        %.6g\n", st.max_abs_err);
  std::printf("  saturated            %.4f %%\n", sat_pct);
  std::printf("  zero                 %.4f %%\n", zero_pct);
}

void run_quantize(const QuantizeOptions& o, const snip::cli::OptionRules& rules) {
  snip::checked_write_target(o.out);  // both outputs refused (a directory, a device) before either is written
  if (!o.codes.empty()) snip::checked_write_target(o.codes);
  const snip::ElemFormat format = parse_format_option(o.format);
  const snip::Operand role = snip::parse_operand(o.role);
  const auto [rows, cols] = parse_shape(o.shape);

  snip::RecipeOptions ro;
  ro.name = o.recipe;
  ro.scale_mode = snip::parse_e8m0_mode(o.scale_mode);
  const snip::Recipe recipe(ro);
  const snip::QuantSpec spec = quant_spec(o, recipe, format, role);
  check_options_used(rules, spec, format);

  const std::vector<float> x = read_matrix(o, rows, cols);
  std::vector<float> y(x.size());
  std::vector<uint8_t> codes(o.codes.empty() ? 0 : x.size());
  snip::QuantStats st;
  const snip::RngKey key{o.seed, 0, 0, 0};
  snip::fake_quantize(y.data(), x.data(), rows, cols, spec, key, o.in.c_str(), &st,
                      o.codes.empty() ? nullptr : codes.data());
  snip::write_file_atomic(o.out, y.data(), y.size() * sizeof(float));
  if (!o.codes.empty()) snip::write_file_atomic(o.codes, codes.data(), codes.size());
  print_quantize_report(o, spec, recipe, role, rows, cols, st);
}

void setup_quantize(CLI::App& app) {
  auto opts = std::make_shared<QuantizeOptions>();
  auto* cmd = app.add_subcommand(
      "quantize", "Fake-quantize a raw float32 matrix (element format + recipe scaling) and report the error");
  cmd->add_option("--format", opts->format, "Element format: e4m3, e5m2, e2m1, e3m2, e2m3 or bf16")->required();
  cmd->add_option("--recipe", opts->recipe,
                  "Scaling recipe: snip, mx, nvfp4, tensor, block:N, block:row or channel (+ :sr)")
      ->capture_default_str();
  cmd->add_option("--role", opts->role,
                  "Operand role: activation / gradient (1D blocks along the last dimension) or weight (the "
                  "recipe's 2D blocks)")
      ->capture_default_str();
  cmd->add_option("--shape", opts->shape, "Matrix shape ROWSxCOLS (row-major)")->required();
  cmd->add_option("--in", opts->in, "Input file (raw little-endian float32, rows·cols values)")->required();
  cmd->add_option("--out", opts->out, "Output file: the dequantized float32 values (written atomically)")->required();
  cmd->add_option("--rounding", opts->rounding, "Rounding: rne, stochastic or away (default: the recipe's)");
  cmd->add_option("--seed", opts->seed, "Stochastic-rounding seed")->capture_default_str();
  cmd->add_option("--scale-mode", opts->scale_mode, "E8M0 scale mode for mx: floor, ceil, rceil or even")
      ->capture_default_str();
  cmd->add_option("--codes", opts->codes,
                  "Also write the element codes, one byte per element: sign|exponent|mantissa in the low "
                  "1+E+M bits (e.g. E2M1 in the low nibble); not for bf16");
  cmd->add_flag("--json", opts->json, "Print the statistics as one JSON object");
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  rules->reads("--in", opts->in).writes("--out", opts->out).writes("--codes", opts->codes);
  snip::cli::run_checked(cmd, rules, [opts, rules] { run_quantize(*opts, *rules); });
}

SNIP_REGISTER_COMMAND("quantize", setup_quantize);

}  // namespace
