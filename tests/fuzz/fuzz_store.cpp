// libFuzzer target: snip::Store opening arbitrary bytes as a database file (never creating it),
// then listing what an accepted file holds, as the GUI and `snip runs` do on start-up.
#include <unistd.h>

#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "snip/error.h"
#include "snip/store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = snip_fuzz::write_temp(data, size, "_store.db");
  try {
    snip::StoreOptions opts;
    opts.create = false;
    opts.busy_timeout_ms = 0;
    snip::Store store(path, opts);
    for (const auto& run : store.runs()) (void)store.stats_rounds(run.id);
    (void)store.plans();
  } catch (const snip::Error&) {
  }
  // SQLite may leave a journal or WAL next to the file; remove them so inputs stay independent.
  unlink((path + "-journal").c_str());
  unlink((path + "-wal").c_str());
  unlink((path + "-shm").c_str());
  return 0;
}
