// See environment.h. Each variable's own parser decides, so the check and the reader agree.
#include "snip/environment.h"

#include <cstdlib>
#include <string>

#include "snip/error.h"
#include "snip/isa.h"
#include "snip/qgemm.h"
#include "snip/thread_pool.h"

namespace snip {

void check_environment() {
  (void)parse_thread_count(std::getenv("SNIP_NUM_THREADS"));
  (void)parse_isa_tier(std::getenv("SNIP_ISA"), cpu_isa_tier());
  (void)parse_qgemm_mode(std::getenv("SNIP_QGEMM"));
  if (const char* f = std::getenv("SNIP_FAULT_WRITE"); f && *f) {
    const std::string kind = std::string(f).substr(0, std::string(f).find(':'));
    if (kind != "ENOSPC" && kind != "EROFS")
      throw Error("SNIP_FAULT_WRITE='" + std::string(f) +
                  "' is not a fault: give ENOSPC[:substring] or EROFS[:substring] (or unset it)");
  }
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x && x[0] != '/')
    throw Error("XDG_DATA_HOME='" + std::string(x) +
                "' is not an absolute path (the XDG specification ignores a relative one, and the default database "
                "would move with the working directory); make it absolute or unset it");
}

}  // namespace snip
