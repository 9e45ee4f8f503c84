// Text forms of stored entities (see store_export.h).
#include "snip/store_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <vector>

#include "snip/store.h"

namespace snip {

using nlohmann::json;

namespace {

// The length of the UTF-8 sequence starting at s[i] and its code point, or 0 when the bytes there
// are not valid UTF-8 (overlong forms, surrogates and values past U+10FFFF included).
size_t utf8_sequence(std::string_view s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (b(k) & 0x3f);
  }
  static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMin[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return n;
}

// Code points that change how the text around them is ordered or shown without being seen:
// the bidirectional marks, embeddings, overrides and isolates.
bool invisible_control(uint32_t cp) {
  return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069) ||
         // zero-width space, joiners, word joiner and the byte-order mark: invisible, they make
         // two different names look the same
         (cp >= 0x200b && cp <= 0x200d) || cp == 0x2060 || cp == 0xfeff;
}

// Combining marks take no column of their own (é written as e + U+0301).
bool combining_mark(uint32_t cp) {
  return (cp >= 0x0300 && cp <= 0x036f) || (cp >= 0x1ab0 && cp <= 0x1aff) || (cp >= 0x1dc0 && cp <= 0x1dff) ||
         (cp >= 0x20d0 && cp <= 0x20ff) || (cp >= 0xfe20 && cp <= 0xfe2f);
}

}  // namespace

std::string shell_quote(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](unsigned char c) {
    return std::isalnum(c) || std::strchr("_./:=@%+,-", c) != nullptr;
  });
  if (plain) return word;
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string compare_resume_command(const Store& store, int64_t id) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(store.path(), ec);
  const std::string db = ec ? store.path() : abs.lexically_normal().string();
  return "snip compare --resume " + std::to_string(id) + " --db " + shell_quote(db);
}

namespace {
std::string printable(std::string_view s, bool keep_lines);
}

std::string printable_text(std::string_view s) {
  return printable(s, false);
}

std::string printable_message(std::string_view s) {
  return printable(s, true);
}

namespace {
std::string printable(std::string_view s, bool keep_lines) {
  std::string out;
  out.reserve(s.size());
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = utf8_sequence(s, i, &cp);
    if (n == 0) {  // not UTF-8: the byte, escaped
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i]));
      out += buf;
      ++i;
      continue;
    }
    if (keep_lines && (cp == '\n' || cp == '\t')) {
      out += char(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", unsigned(cp));
      out += buf;
    } else if ((cp >= 0x80 && cp <= 0x9f) || invisible_control(cp)) {
      std::snprintf(buf, sizeof buf, "\\u{%04x}", unsigned(cp));
      out += buf;
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}
}  // namespace

std::string fit_column(std::string_view text, size_t width) {
  // Cut and pad by characters (code points), never inside a UTF-8 sequence.
  std::string out;
  size_t chars = 0, i = 0;
  std::vector<size_t> starts;
  while (i < text.size()) {
    uint32_t cp = 0;
    const size_t n = std::max<size_t>(1, utf8_sequence(text, i, &cp));
    if (!combining_mark(cp) || starts.empty()) starts.push_back(i);  // a mark belongs to its base character
    i += n;
  }
  if (starts.size() > width && width > 0) {
    out = std::string(text.substr(0, starts[width - 1])) + "~";
    chars = width;
  } else {
    out = std::string(text);
    chars = starts.size();
  }
  if (chars < width) out.append(width - chars, ' ');
  return out;
}

nlohmann::json run_record_json(const Store& store, const RunInfo& run) {
  if (!run.checkpoints.empty()) return run_to_json(run);
  RunInfo full = run;
  full.checkpoints = store.checkpoints(run.id);
  return run_to_json(full);
}

std::string format_utc_ms(int64_t unix_ms) {
  if (unix_ms == 0) return "-";
  const std::time_t t = std::time_t(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {
json opt(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? json(*v) : json(nullptr);
}
json opt(const std::optional<int64_t>& v) {
  return v ? json(*v) : json(nullptr);
}
json num(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}  // JSON has no NaN/Inf

std::string csv_number(double v) {
  if (std::isnan(v)) return "nan";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}
}  // namespace

json run_to_json(const RunInfo& r) {
  json j;
  j["id"] = r.id;
  j["name"] = r.spec.name;
  j["status"] = run_status_name(r.status);
  j["status_message"] = r.status_message;
  j["model"] = {{"hidden_size", r.spec.dims.hidden},
                {"intermediate_size", r.spec.dims.intermediate},
                {"num_hidden_layers", r.spec.dims.num_layers},
                {"num_attention_heads", r.spec.dims.num_heads},
                {"num_key_value_heads", r.spec.dims.num_kv_heads}};
  j["model_config"] = r.spec.model_config;
  j["train_config"] = r.spec.train_config;
  j["data_source"] = r.spec.data_source;
  j["recipe"] = r.spec.recipe;
  j["seed"] = r.spec.seed;
  j["method"] = r.spec.method;
  j["plan_id"] = opt(r.spec.plan_id);
  j["parent_run_id"] = opt(r.spec.parent_run_id);
  j["parent_step"] = opt(r.spec.parent_step);
  j["notes"] = r.spec.notes;
  j["started"] = format_utc_ms(r.started_ms);
  j["started_ms"] = r.started_ms;
  j["ended_ms"] = opt(r.ended_ms);
  j["last_step"] = r.last_step;
  j["metric_rows"] = r.metric_rows;
  j["owner"] = {{"pid", r.owner_pid}, {"host", r.owner_host}, {"heartbeat_ms", r.heartbeat_ms}};
  json cks = json::array();
  for (const auto& c : r.checkpoints) cks.push_back({{"step", c.step}, {"path", c.path}, {"created_ms", c.created_ms}});
  j["checkpoints"] = cks;
  return j;
}

json metric_row_to_json(const MetricRow& m) {
  return {{"step", m.step},
          {"train_loss", num(m.train_loss)},
          {"val_loss", opt(m.val_loss)},
          {"lr", num(m.lr)},
          {"grad_norm", num(m.grad_norm)},
          {"tokens_per_s", num(m.tokens_per_s)},
          {"fp4_fraction", num(m.fp4_fraction)},
          {"bf16_gap", opt(m.bf16_gap)}};
}

json plan_solve_to_json(const PlanSolveInfo& s) {
  return {{"run_id", opt(s.run_id)},
          {"stats_round_id", opt(s.stats_round_id)},
          {"options", s.options},
          {"objective", opt(s.objective)},
          {"predicted_delta_loss", opt(s.predicted_delta_loss)},
          {"predicted_delta_weight", opt(s.predicted_delta_weight)},
          {"solver_status", s.solver_status},
          {"solve_time_s", opt(s.solve_time_s)},
          {"mip_gap", opt(s.mip_gap)}};
}

json validation_to_json(const ValidationResult& v) {
  json j;
  j["id"] = v.id;
  j["run_id"] = opt(v.run_id);
  j["stats_round_id"] = opt(v.stats_round_id);
  j["step"] = v.step;
  j["options"] = v.options;
  json summary = json::object();
  for (const auto& [k, x] : v.summary) summary[k] = num(x);
  j["summary"] = summary;
  json entries = json::array();
  for (const auto& e : v.entries) {
    json vals = json::object();
    for (const auto& [k, x] : e.values) vals[k] = num(x);
    entries.push_back({{"layer", e.layer}, {"precision", e.precision}, {"values", vals}});
  }
  j["entries"] = entries;
  return j;
}

std::string metrics_to_csv(std::span<const MetricRow> rows) {
  std::string out = "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,fp4_fraction,bf16_gap\n";
  out.reserve(out.size() + rows.size() * 120);
  auto field = [&out](const std::optional<double>& v) {
    out += ',';
    if (v) out += csv_number(*v);
  };
  for (const auto& r : rows) {
    out += std::to_string(r.step);
    field(r.train_loss);
    field(r.val_loss);
    field(r.lr);
    field(r.grad_norm);
    field(r.tokens_per_s);
    field(r.fp4_fraction);
    field(r.bf16_gap);
    out += '\n';
  }
  return out;
}

std::string plan_to_csv(const Plan& plan) {
  struct Row {
    int index;
    std::string name;
    LinearPrecision lp;
  };
  std::vector<Row> rows;
  for (const auto& [name, lp] : plan.layers) {
    const auto id = parse_layer_module_name(name);
    rows.push_back({id ? id->index() : -1, name, lp});
  }
  // Block layers in index order, anything else after them by name.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    const bool ab = a.index >= 0, bb = b.index >= 0;
    if (ab != bb) return ab;
    return ab ? a.index < b.index : a.name < b.name;
  });
  std::string out = "layer,layer_index,role,precision\n";
  for (const auto& r : rows)
    for (Gemm g : kAllGemms) {
      out += csv_field(r.name);
      out += ',';
      if (r.index >= 0) out += std::to_string(r.index);
      out += ',';
      out += gemm_name(g);
      out += ',';
      out += precision_name(r.lp[g]);
      out += '\n';
    }
  return out;
}

}  // namespace snip
