// Raw statistics of one SNIP statistics round (METHOD.md section 4), kept raw so the
// divergence estimates can be recomputed later with other options without the model.
// The same structure is the `snip-stats/1` JSON file exchanged with other tools:
//   {"format": "snip-stats/1", "step": 1200, "batch_id": "train:e0:b37", "model": {hidden_size, ...},
//    "tokens": 4096, "globals": {"loss0": 3.1, ...}, "options": {...},
//    "layers": [{"name": "model.layers.0.self_attn.q_proj", "scalars": {"x_norm": ...},
//                "per_precision": {"fp8": {"dy_err": ...}, "fp4": {...}},
//                "vectors": {"gamma": [...]}}, ...]}
// Key names are defined where the statistics are produced and consumed (engine/planner).
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "snip/layers.h"

namespace snip {

struct LayerStats {
  std::string name;                                                    // HF module name
  std::map<std::string, double> scalars;                               // precision-independent
  std::map<std::string, std::map<std::string, double>> per_precision;  // "fp8"/"fp4"/... -> key -> value
  std::map<std::string, std::vector<float>> vectors;                   // e.g. per-output-channel gains
  bool operator==(const LayerStats&) const = default;
};

struct StatsRound {
  int64_t step = 0;
  std::string batch_id;
  ModelDims dims;      // model the statistics belong to
  int64_t tokens = 0;  // T = tokens in the batch (FLOPs are 2·T·K·N per GEMM)
  std::string recipe = "snip";
  std::map<std::string, double> globals;  // round-wide values (loss0, curvature c, sigmas, residual gains ...)
  nlohmann::json options = nlohmann::json::object();
  std::vector<LayerStats> layers;  // in layer index order
  bool operator==(const StatsRound&) const = default;
};

// JSON text <-> StatsRound. Throws snip::Error naming `source` and the offending field.
StatsRound stats_from_json(const std::string& text, const std::string& source = "statistics");
std::string stats_to_json(const StatsRound& round);

}  // namespace snip
