// Reading and writing safetensors files (Hugging Face's format: 8-byte little-endian header
// length, a JSON header {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the raw little-endian tensor bytes). Every field of outside input is validated:
// truncated headers, out-of-range or overlapping offsets, sizes that disagree with shapes.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace snip {

struct TensorRef {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // FP32, product(shape) elements
};

// The metadata key under which write_safetensors records the CRC-32 (zlib's, 8 hex digits) of
// the data section followed by the tensor table (names, dtypes, shapes, offsets), so changed
// numbers and swapped or renamed tensors are both caught. SafetensorsFile verifies it when
// present (files of other writers have none).
inline constexpr const char* kDataChecksumKey = "snip_data_crc32";

// Writes FP32 tensors atomically (temp file, fsync, rename), recording the data's checksum in
// the metadata (kDataChecksumKey); returns that checksum. Throws snip::Error.
std::string write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// The checksum a file's header records (kDataChecksumKey; "" when it records none; nothing when
// the header cannot be read: SafetensorsFile::open says why), read from the header alone: cheap,
// and not a check of the data (SafetensorsFile::open checks that).
std::optional<std::string> recorded_data_checksum(const std::string& path);

class SafetensorsFile {
 public:
  // Reads and validates the whole file. Throws snip::Error naming the file and what is wrong.
  static SafetensorsFile open(const std::string& path);
  // Same, from bytes in memory (`source` names it in messages); used by the fuzzer.
  static SafetensorsFile parse(std::string bytes, const std::string& source);

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;
  bool has(const std::string& name) const;
  std::vector<int64_t> shape(const std::string& name) const;  // throws when missing
  // The metadata as its writer gave it (without kDataChecksumKey, verified when the file was read).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Copies tensor `name` (dtype F32; BF16/F16 are converted) into `out`. Throws snip::Error
  // when it is missing or its shape differs from `expected_shape`, e.g.
  // "model.safetensors: tensor model.layers.3.mlp.up_proj.weight has shape (256, 64), expected (688, 256)".
  void read_f32(const std::string& name, float* out, const std::vector<int64_t>& expected_shape) const;

 private:
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;  // offsets into the data section
  };
  std::string path_;
  std::string bytes_;
  uint64_t data_start_ = 0;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> metadata_;
  std::string data_checksum_;
};

}  // namespace snip
