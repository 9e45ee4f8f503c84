// See environment.h. Each variable's own parser decides, so the check and the reader agree.
#include "snip/environment.h"

#include <cstdlib>

#include "snip/qgemm.h"
#include "snip/thread_pool.h"

namespace snip {

const std::vector<EnvironmentVariable>& environment_variables() {
  static const std::vector<EnvironmentVariable> vars = {
      {"SNIP_NUM_THREADS", "threads of the element-wise loops and the quantizer: 1 to 256 (unset: all cores)"},
      {"SNIP_QGEMM", "the quantized GEMMs' kernels: auto, fma, scalar or sgemm (unset: auto)"},
  };
  return vars;
}

void check_environment() {
  (void)parse_thread_count(std::getenv("SNIP_NUM_THREADS"));
  (void)parse_qgemm_mode(std::getenv("SNIP_QGEMM"));
}

}  // namespace snip
