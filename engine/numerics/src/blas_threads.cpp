// See snip/blas_threads.h. The restart uses functions OpenBLAS exports for its own fork handler
// (openblas_read_env, blas_thread_shutdown_, blas_thread_init), looked up at run time so that a
// BLAS without them (another OpenBLAS version, a reference BLAS) is simply left as it is.
#include "snip/blas_threads.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace snip {
namespace {

constexpr const char* kTimeoutVar = "OPENBLAS_THREAD_TIMEOUT";
constexpr const char* kShortTimeout = "4";  // OpenBLAS clamps the exponent to [4, 30]

bool g_set_by_snip = false;

std::mutex g_single_mutex;
int g_single_depth = 0;   // live BlasSingleThreaded instances
int g_saved_threads = 1;  // OpenBLAS's thread count before the first of them

std::string setup() {
  if (const char* user = std::getenv(kTimeoutVar); user && *user)
    return std::string(kTimeoutVar) + "=" + user + " (from the environment)";
  using Fn = void (*)();
  using InitFn = int (*)();
  auto read_env = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_read_env"));
  auto shutdown = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "blas_thread_shutdown_"));
  auto init = reinterpret_cast<InitFn>(dlsym(RTLD_DEFAULT, "blas_thread_init"));
  if (!read_env || !shutdown || !init) return "left as is: the BLAS library has no OpenBLAS thread server";
  setenv(kTimeoutVar, kShortTimeout, 1);  // unset or empty here
  g_set_by_snip = true;
  read_env();  // OpenBLAS reads its variables once, at load time: again, with the new timeout
  shutdown();  // joins the workers started at load time (what OpenBLAS does before a fork) ...
  init();      // ... and starts them again, now with the short timeout
  return std::string(kTimeoutVar) + "=" + kShortTimeout + " (set by snip)";
}

}  // namespace

// First called from qlinear.cpp's static initializer: before main(), while the process has a
// single thread and no GEMM can be running.
std::string blas_thread_setup() {
  static const std::string done = setup();
  return done;
}

BlasSingleThreaded::BlasSingleThreaded() {
  std::lock_guard<std::mutex> lock(g_single_mutex);
  if (g_single_depth++ == 0) {
    g_saved_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
  }
}

BlasSingleThreaded::~BlasSingleThreaded() {
  std::lock_guard<std::mutex> lock(g_single_mutex);
  if (--g_single_depth == 0) openblas_set_num_threads(g_saved_threads);
}

bool blas_thread_timeout_set_by_snip() {
  blas_thread_setup();
  return g_set_by_snip;
}
}  // namespace snip
