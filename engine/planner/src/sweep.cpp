// Budget sweeps: every budget × method, with identical plans at one budget marked as such.
#include "snip/sweep.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "snip/error.h"
#include "snip/text.h"

namespace snip {

namespace {

double parse_budget(const std::string& s, const std::string& whole) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v))
    throw Error("budgets '" + whole + "': '" + s + "' is not a number");
  if (v < 0 || v > 1) throw Error("budgets '" + whole + "': " + s + " is outside [0, 1] (an FP4 FLOP fraction)");
  return v;
}

}  // namespace

std::vector<double> parse_budget_list(const std::string& text) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    if (item.find(':') != std::string::npos) {
      // a:b:step, inclusive of b (within half a step of rounding)
      std::vector<std::string> parts;
      std::stringstream ps(item);
      std::string p;
      while (std::getline(ps, p, ':')) parts.push_back(trim(p));
      if (parts.size() != 3) throw Error("budgets '" + text + "': a range is start:stop:step, e.g. 0:1:0.05");
      const double a = parse_budget(parts[0], text), b = parse_budget(parts[1], text);
      char* end = nullptr;
      const double step = std::strtod(parts[2].c_str(), &end);
      if (!(step > 0) || end != parts[2].c_str() + parts[2].size())
        throw Error("budgets '" + text + "': the step '" + parts[2] + "' must be a positive number");
      const long n = std::lround(std::floor((b - a) / step + 0.5));
      if (b < a || n > 100000) throw Error("budgets '" + text + "': the range " + item + " is empty or too long");
      // Multiply instead of accumulating so 0:1:0.05 gives exactly 0.05·k (rounded to 1e-12).
      for (long k = 0; k <= n; ++k) out.push_back(std::min(1.0, std::round((a + k * step) * 1e12) / 1e12));
    } else {
      out.push_back(parse_budget(item, text));
    }
  }
  if (out.empty()) throw Error("no budgets given (e.g. --budgets 0,0.25,0.5,0.75,1 or 0:1:0.05)");
  return out;
}

std::vector<Method> parse_method_list(const std::string& text) {
  std::vector<Method> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item = trim(item);
    if (item.empty()) continue;
    if (item == "all") {
      out.insert(out.end(), kAllMethods.begin(), kAllMethods.end());
      continue;
    }
    out.push_back(parse_method(item));
  }
  if (out.empty()) throw Error("no methods given (e.g. --methods snip,min-err,random)");
  return out;
}

std::vector<SweepPoint> run_sweep(const PlannerInput& input, const SweepOptions& options) {
  if (options.budgets.empty()) throw Error("sweep: no budgets");
  if (options.methods.empty()) throw Error("sweep: no methods");
  if (options.random_seeds < 1) throw Error("sweep: random_seeds must be ≥ 1");
  for (double b : options.budgets)
    if (!(b >= 0 && b <= 1)) throw Error("sweep: budget " + std::to_string(b) + " is outside [0, 1]");
  std::vector<SweepPoint> out;
  for (double budget : options.budgets) {
    const size_t first = out.size();
    for (Method m : options.methods) {
      const int runs = m == Method::random ? options.random_seeds : 1;
      for (int k = 0; k < runs; ++k) {
        SweepPoint pt;
        pt.budget = budget;
        pt.method = method_name(m);
        PlanRequest req = options.request;
        req.budget = budget;
        req.seed = options.request.seed + uint64_t(k);
        pt.seed = m == Method::random ? req.seed : 0;
        try {
          pt.result = make_plan(input, m, req);
          pt.ok = true;
        } catch (const Error& e) {
          pt.error = e.what();
        }
        out.push_back(std::move(pt));
      }
    }
    // Identical plans at this budget: each point lists the other methods with the same plan.
    for (size_t i = first; i < out.size(); ++i)
      for (size_t j = first; j < out.size(); ++j) {
        if (i == j || !out[i].ok || !out[j].ok) continue;
        if (out[i].result.plan.layers != out[j].result.plan.layers) continue;
        std::string name = out[j].method;
        if (out[j].method == "random") name += "#" + std::to_string(out[j].seed);
        out[i].same_plan_as.push_back(name);
      }
  }
  return out;
}

}  // namespace snip
