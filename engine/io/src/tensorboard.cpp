// TensorBoard event files: records framed with masked CRC-32C, Events in protobuf's wire format
// (proto/tensorboard_event.proto; encoded here, see engine/io/CMakeLists.txt for why).
#include "snip/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "snip/atomic_file.h"
#include "snip/error.h"

namespace snip {

namespace {

const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

// Protobuf's wire format: a key (field number << 3 | wire type), then the value.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, uint64_t(field) << 3 | uint64_t(wire_type));
}
void put_double(std::string& out, int field, double v) {  // wire type 1: 64-bit little-endian
  put_key(out, field, 1);
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  put_le(out, bits, 8);
}
void put_float(std::string& out, int field, float v) {  // wire type 5: 32-bit little-endian
  put_key(out, field, 5);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  put_le(out, bits, 4);
}
void put_int64(std::string& out, int field, int64_t v) {  // wire type 0 (two's complement for negatives)
  put_key(out, field, 0);
  put_varint(out, uint64_t(v));
}
void put_bytes(std::string& out, int field, const std::string& bytes) {  // wire type 2: length-delimited
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event (event.proto): wall_time = 1 (double), step = 2 (int64), file_version = 3 (string),
// summary = 5 (Summary { repeated Value value = 1 }, Value { tag = 1, simple_value = 2 (float) }).
std::string file_version_event(double wall_time) {
  std::string e;
  put_double(e, 1, wall_time);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v, summary, e;
  put_bytes(v, 1, tag);
  put_float(v, 2, value);
  put_bytes(summary, 1, v);
  put_double(e, 1, wall_time);
  put_int64(e, 2, step);
  put_bytes(e, 5, summary);
  return e;
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& t = crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, double wall_time, const std::string& source) : dir_(dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    throw Error(dir + " is a file; TensorBoard reads a folder of event files: give a folder");
  char host[256] = "localhost";
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  name_ = "events.out.tfevents." + std::to_string(int64_t(std::floor(wall_time))) + "." + host + "." + source;
  add_record(file_version_event(wall_time));
}

TensorBoardWriter::~TensorBoardWriter() = default;

void TensorBoardWriter::add_record(const std::string& data) {
  std::string header;
  put_le(header, data.size(), 8);
  bytes_ += header;
  put_le(bytes_, masked_crc32c(header.data(), header.size()), 4);
  bytes_ += data;
  put_le(bytes_, masked_crc32c(data.data(), data.size()), 4);
}

void TensorBoardWriter::add_scalar(const std::string& tag, int64_t step, double value, double wall_time) {
  add_record(scalar_event(wall_time, step, tag, float(value)));
  ++scalars_;
}

std::string TensorBoardWriter::close() {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw Error("cannot create " + dir_ + ": " + ec.message());
  const std::string path = (std::filesystem::path(dir_) / name_).string();
  write_file_atomic(path, bytes_);
  return path;
}

}  // namespace snip
