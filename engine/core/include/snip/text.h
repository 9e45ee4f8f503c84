// Text helpers every part shares: trimming, and numbers and durations as people read them. (The
// GUI writes its durations through Qt's tr(), to be translated; everything else comes here.)
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace snip {

// Without leading and trailing spaces, tabs, carriage returns and newlines.
std::string trim(std::string_view s);

// "%g": 0.1, 0.75, 1e-05, 3.
std::string format_g(double v);

// A fixed number of decimals: format_fixed(0.5, 4) = "0.5000".
std::string format_fixed(double v, int digits = 4);

// A duration: "12.3s", "2m 05s", "1h 02m 03s" (negative: "0.0s").
std::string format_duration_ms(int64_t ms);

}  // namespace snip
