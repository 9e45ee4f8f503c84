// Text forms of stored entities, shared by `snip export`/`snip show` and the GUI's export
// actions: runs and validation results as JSON, metrics and plans as CSV, times as UTC text.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "snip/store_types.h"
#include "snip/text.h"  // format_duration_ms

namespace snip {

class Store;

// "2026-11-22T04:51:02Z" (ISO 8601, UTC, seconds); "-" for 0.
std::string format_utc_ms(int64_t unix_ms);
// `s` with every control character escaped (\n, \r, \t, \xNN), bytes that are not UTF-8 as \xNN,
// and the C1 controls and bidirectional marks, embeddings, overrides and isolates as \u{XXXX}, so
// a stored string (a run name, a path, a message) prints as one line of text in its own order
// and cannot forge or reorder rows of a table.
std::string printable_text(std::string_view s);
// The same for a message of several lines (an error): newlines and tabs are kept, every other
// control character and every byte that is not UTF-8 escaped, so text quoted from a damaged
// file never reaches a terminal or a dialog as raw bytes.
std::string printable_message(std::string_view s);
// `word` as one word of a POSIX shell command line: unchanged when it holds only characters no
// shell treats specially, else in single quotes (a ' inside as '\''), so a printed command can
// be pasted back whatever the paths hold.
std::string shell_quote(const std::string& word);
// The command that continues stored compare `id` of `store`, naming the database by its absolute
// path: the hint a compare stores works from any working directory.
std::string compare_resume_command(const Store& store, int64_t id);
// One column of a listing: `text` (printable_text's output) cut to `width` characters with a
// final "~", or padded with spaces to it; counted in characters, never cut inside one.
std::string fit_column(std::string_view text, size_t width);
// The run as JSON with its checkpoints (read from `store` when `run` came from runs(), which
// leaves them out): what `snip runs --json` and `snip show --json` both print.
nlohmann::json run_record_json(const Store& store, const RunInfo& run);

// {"id", "name", "status", ..., "model": {...}, "checkpoints": [...]} (no metrics).
nlohmann::json run_to_json(const RunInfo& run);
nlohmann::json metric_row_to_json(const MetricRow& row);  // absent optionals are null
nlohmann::json plan_solve_to_json(const PlanSolveInfo& solve);
nlohmann::json validation_to_json(const ValidationResult& v);

// Header "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,fp4_fraction,bf16_gap" and one
// row per step; absent values are empty fields; numbers round-trip exactly (%.17g).
std::string metrics_to_csv(std::span<const MetricRow> rows);
// Header "layer,layer_index,role,precision" and one row per (layer, GEMM role), in layer
// index order (names that are not block layers last, layer_index empty).
std::string plan_to_csv(const Plan& plan);

}  // namespace snip
