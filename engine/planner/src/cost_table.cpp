// Cost tables: built from a round's estimates, or imported from / exported to CSV.
#include "snip/cost_table.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "snip/atomic_file.h"
#include "snip/error.h"
#include "snip/names.h"
#include "snip/text.h"

namespace snip {

namespace {

constexpr std::array<Named<CostKind>, 4> kCostKindNames{{{CostKind::snip, "snip"},
                                                         {CostKind::min_err, "min-err"},
                                                         {CostKind::min_rel_err, "min-rel-err"},
                                                         {CostKind::hawq, "hawq"}}};

}  // namespace

const char* cost_kind_name(CostKind k) {
  return name_of(kCostKindNames, k);
}

CostTable cost_table_from_estimates(const Estimates& est, CostKind kind) {
  CostTable t;
  t.kind = cost_kind_name(kind);
  t.source = "statistics";
  t.has_roles = true;
  t.has_divergences = true;
  for (const auto& e : est.layers) {
    CostLayer c;
    c.name = e.name;
    c.block = e.block;
    c.type = e.type;
    c.flops = 3.0 * e.gemm_flops;
    if (kind == CostKind::hawq) {
      c.cost[0] = e.hawq;
      c.cost[1] = {0, 0, 0, 0};
    } else {
      const auto& src = kind == CostKind::snip      ? e.q_role
                        : kind == CostKind::min_err ? e.min_err_role
                                                    : e.min_rel_err_role;
      for (int r = 0; r < kNumRoles; ++r) c.cost[r] = src[r];
    }
    c.pred_dl = e.dl;
    c.pred_dw = e.dw;
    c.pred_q = e.q_role;
    // BF16 is the reference: zero cost and divergence when the round did not measure it.
    const int b = int(Precision::bf16);
    for (int r = 0; r < kNumRoles; ++r) {
      if (std::isnan(c.cost[r][b])) c.cost[r][b] = 0;
      if (std::isnan(c.pred_q[r][b])) c.pred_q[r][b] = 0;
    }
    if (std::isnan(c.pred_dl[b])) c.pred_dl[b] = 0;
    if (std::isnan(c.pred_dw[b])) c.pred_dw[b] = 0;
    t.layers.push_back(c);
  }
  std::sort(t.layers.begin(), t.layers.end(), [](const CostLayer& a, const CostLayer& b) {
    return std::pair(a.block, int(a.type)) < std::pair(b.block, int(b.type));
  });
  return t;
}

namespace {

// One CSV record (RFC 4180, as spreadsheets write it): fields separated by commas, a field in
// double quotes may hold commas and "" for a quote; unquoted fields are trimmed.
std::vector<std::string> split_csv_line(const std::string& line, const std::string& where) {
  std::vector<std::string> out;
  std::string cur;
  bool in_quotes = false, was_quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_quotes) {
      if (c != '"') {
        cur += c;
      } else if (i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else {
        in_quotes = false;
      }
    } else if (c == ',') {
      out.push_back(was_quoted ? cur : trim(cur));
      cur.clear();
      was_quoted = false;
    } else if (c == '"' && !was_quoted && trim(cur).empty()) {
      in_quotes = was_quoted = true;
      cur.clear();
    } else if (was_quoted) {
      if (c != ' ' && c != '\t' && c != '\r')
        throw Error(where + ": text after the closing quote of field " + std::to_string(out.size() + 1));
    } else {
      cur += c;
    }
  }
  if (in_quotes) throw Error(where + ": field " + std::to_string(out.size() + 1) + " opens a quote it never closes");
  out.push_back(was_quoted ? cur : trim(cur));
  return out;
}

std::string fmt_max() {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", kMaxCostValue);
  return buf;
}

double parse_number(const std::string& s, const std::string& where, const char* what) {
  if (s.empty()) throw Error(where + ": " + what + " is empty");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) throw Error(where + ": " + what + " '" + s + "' is not a number");
  if (!std::isfinite(v)) throw Error(where + ": " + what + " is " + s + "; it must be finite");
  if (v < 0) throw Error(where + ": " + what + " " + s + " is negative; it must be ≥ 0");
  if (v > kMaxCostValue)
    throw Error(where + ": " + what + " " + s + " is beyond any model (at most " + fmt_max() +
                "; the largest layer of a 405B-parameter Llama does about 1e20 FLOPs in a 16M-token step): the "
                "file is damaged or not in FLOPs and loss units");
  return v;
}

// The header's columns (lower-cased name -> index); layer, precision, cost and flops required.
std::map<std::string, int> parse_cost_header(const std::vector<std::string>& cells, const std::string& where) {
  std::map<std::string, int> col;
  for (size_t i = 0; i < cells.size(); ++i) {
    std::string name = cells[i];
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    if (col.count(name)) throw Error(where + ": column '" + name + "' appears twice in the header");
    col[name] = int(i);
  }
  for (const char* need : {"layer", "precision", "cost", "flops"})
    if (!col.count(need))
      throw Error(where + ": the header has no '" + need + "' column (expected layer,precision,cost,flops[,role])");
  return col;
}

// What the rows so far gave: name -> layer, plus the line on which each layer's FLOPs and each
// (layer, precision, role) were first given.
struct CostRows {
  std::map<std::string, int> col;
  bool roles = false;
  std::map<std::string, CostLayer> layers;
  std::map<std::string, int> flops_line;
  std::map<std::tuple<std::string, int, int>, int> seen;
};

Precision parse_row_precision(const std::string& cell, const std::string& where) {
  Precision p;
  try {
    p = parse_precision(cell);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  if (p == Precision::fp32) throw Error(where + ": precision fp32 is not a planning choice (use fp8, fp4 or bf16)");
  return p;
}

int parse_row_role(const std::string& r, const std::string& where) {
  if (r == "fprop") return 0;
  if (r == "backward") return 1;
  throw Error(where + ": unknown role '" + r + "' (expected fprop or backward)");
}

void add_cost_row(CostRows& rows, const std::vector<std::string>& cells, const std::string& where, int line_no) {
  auto& col = rows.col;
  if (cells.size() != col.size())
    throw Error(where + ": " + std::to_string(cells.size()) + " fields, the header has " + std::to_string(col.size()));
  const std::string& name = cells[col["layer"]];
  auto id = parse_layer_module_name(name);
  if (!id)
    throw Error(
        where + ": unknown layer '" + name +
        "' (expected an HF module name such as model.layers.0.self_attn.q_proj or model.layers.3.mlp.down_proj)");
  const Precision p = parse_row_precision(cells[col["precision"]], where);
  const int role = rows.roles ? parse_row_role(cells[col["role"]], where) : 0;
  const double cost = parse_number(cells[col["cost"]], where, "cost");
  const double flops = parse_number(cells[col["flops"]], where, "flops");
  if (!(flops > 0)) throw Error(where + ": flops is 0; every layer has positive FLOPs");
  auto key = std::make_tuple(name, int(p), role);
  if (auto it = rows.seen.find(key); it != rows.seen.end())
    throw Error(where + ": duplicate row for " + name + " " + precision_name(p) +
                (rows.roles ? std::string(" ") + role_name(Role(role)) : std::string()) + " (first given on line " +
                std::to_string(it->second) + ")");
  rows.seen[key] = line_no;
  auto [it, inserted] = rows.layers.try_emplace(name);
  CostLayer& c = it->second;
  if (inserted) {
    c.name = name;
    c.block = id->block;
    c.type = id->type;
    c.flops = flops;
    rows.flops_line[name] = line_no;
    for (int r = 0; r < kNumRoles; ++r) c.cost[r].fill(kNaN);
    for (int r = 0; r < kNumRoles; ++r) c.pred_q[r].fill(kNaN);
  } else if (c.flops != flops) {
    throw Error(where + ": flops " + cells[col["flops"]] + " for " + name + " differs from line " +
                std::to_string(rows.flops_line[name]) + "; a layer has one FLOP count");
  }
  c.cost[role][int(p)] = cost;
  if (!rows.roles) c.cost[1][int(p)] = 0;
}

// The table of the rows read, once every layer has its fp8 and fp4 costs.
CostTable imported_cost_table(std::map<std::string, CostLayer>& layers, bool roles, const std::string& source) {
  CostTable t;
  t.kind = "imported";
  t.source = source;
  t.has_roles = roles;
  t.has_divergences = false;
  for (auto& [name, c] : layers) {
    for (Precision p : {Precision::fp8, Precision::fp4})
      for (int r = 0; r < (roles ? kNumRoles : 1); ++r)
        if (std::isnan(c.cost[r][int(p)]))
          throw Error(source + ": " + name + " has no " + precision_name(p) +
                      (roles ? std::string(" ") + role_name(Role(r)) : std::string()) +
                      " row (every layer needs fp8 and fp4 costs)");
    const int b = int(Precision::bf16);
    if (roles && std::isnan(c.cost[0][b]) != std::isnan(c.cost[1][b]))
      throw Error(source + ": " + name + " has a bf16 row for only one role");
    c.pred_q = c.cost;  // imported costs are the quality measure
    t.layers.push_back(c);
  }
  std::sort(t.layers.begin(), t.layers.end(), [](const CostLayer& a, const CostLayer& b) {
    return std::pair(a.block, int(a.type)) < std::pair(b.block, int(b.type));
  });
  return t;
}

}  // namespace

CostTable cost_table_from_csv(const std::string& text, const std::string& source) {
  std::istringstream in{std::string(without_utf8_bom(text))};
  std::string line;
  int line_no = 0;
  CostRows rows;
  bool header = false;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const std::string where = source + ":" + std::to_string(line_no);
    const auto cells = split_csv_line(t, where);
    if (!header) {
      rows.col = parse_cost_header(cells, where);
      rows.roles = rows.col.count("role") > 0;
      header = true;
      continue;
    }
    add_cost_row(rows, cells, where, line_no);
  }
  if (!header) throw Error(source + ": empty cost file (expected a header layer,precision,cost,flops[,role])");
  if (rows.layers.empty()) throw Error(source + ": no cost rows after the header");
  return imported_cost_table(rows.layers, rows.roles, source);
}

CostTable read_cost_csv(const std::string& path) {
  return cost_table_from_csv(read_file(path), path);
}

std::string cost_table_to_csv(const CostTable& table) {
  std::ostringstream os;
  os.precision(17);
  os << (table.has_roles ? "layer,precision,role,cost,flops\n" : "layer,precision,cost,flops\n");
  for (const auto& c : table.layers)
    for (Precision p : {Precision::bf16, Precision::fp8, Precision::fp4}) {
      if (!c.has(p)) continue;
      if (table.has_roles) {
        for (int r = 0; r < kNumRoles; ++r)
          os << c.name << ',' << precision_name(p) << ',' << role_name(Role(r)) << ',' << c.cost[r][int(p)] << ','
             << c.flops << '\n';
      } else {
        os << c.name << ',' << precision_name(p) << ',' << c.total_cost(p) << ',' << c.flops << '\n';
      }
    }
  return os.str();
}

void check_cost_values(const CostTable& table) {
  const auto bad = [](double v) { return !(std::fabs(v) <= kMaxCostValue); };
  const std::string from = table.source.empty() ? std::string("the costs") : table.source;
  for (const CostLayer& l : table.layers) {
    if (bad(l.flops) || !(l.flops > 0))
      throw Error(from + ": " + l.name + ": flops " + std::to_string(l.flops) + " is not a positive number ≤ " +
                  fmt_max() + "; the layers' FLOPs must add up to a finite budget");
    for (int r = 0; r < kNumRoles; ++r)
      for (int p = 0; p < kNumPrecisions; ++p)
        if (!std::isnan(l.cost[r][p]) && bad(l.cost[r][p]))
          throw Error(from + ": " + l.name + ": the cost of " + precision_name(Precision(p)) + " is " +
                      std::to_string(l.cost[r][p]) + ", beyond ±" + fmt_max() + "; the objective must stay finite");
  }
}

}  // namespace snip
