// libFuzzer target: snip::read_token_file (llm.c token files: 1024-byte int32 header, then
// uint16 or uint32 tokens) on arbitrary bytes, with the vocabulary bound taken from the first byte.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "snip/dataset.h"
#include "snip/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int vocab = size ? 1 + data[0] * 257 : 256;  // 1 .. 65536: exercise the id bound check
  std::string path = snip_fuzz::write_temp(data, size, "_tokens.bin");
  try {
    auto tokens = snip::read_token_file(path, vocab);
    for (int32_t t : tokens)
      if (t < 0 || t >= vocab) __builtin_trap();  // the reader promised every id < vocab
  } catch (const snip::Error&) {
  }
  return 0;
}
