// safetensors reader and writer. The file is: u64 little-endian header length N, N bytes of
// JSON (padded with spaces to a multiple of 8 by writers), then the data section. Every tensor's
// [begin, end) is relative to the data section. Outside input is validated field by field with
// the rules of Hugging Face's reference implementation (safetensors/src/tensor.rs): header
// bounded by the file, known dtypes, byte size = numel · dtype size, offsets inside the data
// section, tensors neither overlapping nor leaving holes.
#include "snip/safetensors.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "snip/atomic_file.h"
#include "snip/error.h"

namespace snip {

static_assert(std::endian::native == std::endian::little, "safetensors bytes are little-endian; so must the host be");

namespace {

// Hugging Face refuses headers above 100 MB; a larger "length" means a corrupt or foreign file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

int dtype_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

// IEEE binary16 -> binary32, exact (every half is a float): handles subnormals, Inf and NaN.
float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);  // Inf / NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;  // ±0
  } else {
    // Subnormal half: value = man · 2^-24; renormalise so the leading 1 is implicit.
    int e = -1;
    do {
      man <<= 1;
      ++e;
    } while ((man & 0x400u) == 0);
    bits = sign | uint32_t(127 - 15 - e) << 23 | ((man & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// bfloat16 is the top half of a binary32.
float bf16_to_f32(uint16_t b) {
  return std::bit_cast<float>(uint32_t(b) << 16);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Writer

namespace {

std::string checksum_text(uLong crc) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08lx", (unsigned long)(crc & 0xffffffffu));
  return buf;
}

uLong crc_update(uLong crc, const void* data, uint64_t size) {
  const auto* p = static_cast<const Bytef*>(data);
  for (uint64_t left = size; left > 0;) {
    const uInt chunk = uInt(std::min<uint64_t>(left, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    left -= chunk;
  }
  return crc;
}

// The tensor table as the checksum covers it, by name: dtype, shape and offsets of each (so
// swapped names or shapes of equal size are caught, not only changed numbers).
struct TableEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};
std::string table_text(const std::map<std::string, TableEntry>& table) {
  std::string s;
  for (const auto& [name, e] : table) {
    s += name + '\0' + e.dtype + '\0';
    for (int64_t d : e.shape) s += std::to_string(d) + ',';
    s += '\0' + std::to_string(e.begin) + '\0' + std::to_string(e.end) + '\n';
  }
  return s;
}

// The checksum of a file: its data section, then its tensor table.
std::string checksum_of(uLong data_crc, const std::map<std::string, TableEntry>& table) {
  const std::string t = table_text(table);
  return checksum_text(crc_update(data_crc, t.data(), t.size()));
}

}  // namespace

std::string write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  if (metadata.count(kDataChecksumKey))
    throw Error(path + ": metadata key " + std::string(kDataChecksumKey) + " is the writer's own");
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = nullptr;  // first, filled in below with the checksum
  std::set<std::string> seen;
  std::map<std::string, TableEntry> table;
  uLong crc = crc32(0L, Z_NULL, 0);
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__")
      throw Error(path + ": cannot write a tensor named '" + t.name + "' (reserved or empty name)");
    if (!seen.insert(t.name).second) throw Error(path + ": tensor " + t.name + " is listed twice");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) throw Error(path + ": tensor " + t.name + " has negative dimension in shape " + shape_str(t.shape));
      if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / 4 / uint64_t(d))
        throw Error(path + ": tensor " + t.name + " shape " + shape_str(t.shape) + " is too large");
      numel *= uint64_t(d);
    }
    if (numel > 0 && t.data == nullptr) throw Error(path + ": tensor " + t.name + " has no data");
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + numel * 4}}};
    table[t.name] = TableEntry{"F32", t.shape, offset, offset + numel * 4};
    if (numel) crc = crc_update(crc, t.data, numel * 4);  // the data section, in file order
    offset += numel * 4;
  }
  // The checksum of the data and the tensor table, recorded in the metadata, verified by every reader.
  std::map<std::string, std::string> meta = metadata;
  meta[kDataChecksumKey] = checksum_of(crc, table);
  header["__metadata__"] = meta;
  std::string json = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned, as Hugging Face's writer does.
  json.append((8 - json.size() % 8) % 8, ' ');

  std::string bytes;
  bytes.resize(8 + json.size() + offset);
  const uint64_t n = json.size();
  std::memcpy(bytes.data(), &n, 8);
  std::memcpy(bytes.data() + 8, json.data(), json.size());
  char* out = bytes.data() + 8 + json.size();
  for (const auto& t : tensors) {
    uint64_t numel = 1;
    for (int64_t d : t.shape) numel *= uint64_t(d);
    if (numel) std::memcpy(out, t.data, numel * 4);
    out += numel * 4;
  }
  write_file_atomic(path, bytes.data(), bytes.size());
  return meta[kDataChecksumKey];
}

std::optional<std::string> recorded_data_checksum(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  if (!in || in.gcount() != 8 || n > (100u << 20)) return std::nullopt;
  std::string json(n, '\0');
  in.read(json.data(), std::streamsize(n));
  if (uint64_t(in.gcount()) != n) return std::nullopt;
  const nlohmann::json header = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return std::nullopt;
  if (header.contains("__metadata__") && header["__metadata__"].is_object() &&
      header["__metadata__"].contains(kDataChecksumKey) && header["__metadata__"][kDataChecksumKey].is_string())
    return header["__metadata__"][kDataChecksumKey].get<std::string>();
  return std::string();
}

// ---------------------------------------------------------------------------------------------
// Reader

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + " is a folder, not a safetensors file");
  return parse(read_file(path), path);
}

namespace {

const char* const kParseHint = " — is it a complete safetensors file? (re-save or re-download it)";

// The header's length from the first 8 bytes, checked against the file's size.
uint64_t header_length(const std::string& bytes, const std::string& src) {
  const std::string hint = kParseHint;
  if (bytes.size() < 8)
    throw Error(src + ": file is " + std::to_string(bytes.size()) +
                " bytes, too short for the 8-byte safetensors header length" + hint);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeaderBytes)
    throw Error(src + ": header length " + std::to_string(n) + " exceeds the 100 MB limit" + hint);
  if (n > bytes.size() - 8)
    throw Error(src + ": truncated header: header length says " + std::to_string(n) + " bytes but only " +
                std::to_string(bytes.size() - 8) + " follow" + hint);
  if (n < 2 || bytes[8] != '{') throw Error(src + ": header does not start with a JSON object '{'" + hint);
  return n;
}

// The JSON header (n bytes after the length): an object without duplicate top-level keys.
nlohmann::json parse_header(const std::string& bytes, uint64_t n, const std::string& src) {
  const std::string hint = kParseHint;
  // Duplicate top-level keys would silently shadow a tensor; nlohmann keeps the last, so detect them.
  std::set<std::string> top_keys;
  std::string duplicate;
  auto on_event = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && !top_keys.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + int64_t(n), on_event);
  } catch (const nlohmann::json::exception& e) {
    throw Error(src + ": header is not valid JSON (" + e.what() + ")" + hint);
  }
  if (!header.is_object()) throw Error(src + ": header is not a JSON object" + hint);
  if (!duplicate.empty()) throw Error(src + ": header lists '" + duplicate + "' twice" + hint);
  return header;
}

// The header's __metadata__: an object of strings.
std::map<std::string, std::string> parse_metadata(const nlohmann::json& value, const std::string& src) {
  const std::string hint = kParseHint;
  std::map<std::string, std::string> out;
  if (!value.is_object()) throw Error(src + ": __metadata__ is not a JSON object of strings" + hint);
  for (const auto& [k, v] : value.items()) {
    if (!v.is_string()) throw Error(src + ": __metadata__ value for '" + k + "' is not a string" + hint);
    out[k] = v.get<std::string>();
  }
  return out;
}

// A tensor's shape: non-negative integers whose product (times 8) fits 64 bits; *numel its
// element count.
std::vector<int64_t> parse_shape(const nlohmann::json& shape, const std::string& where, uint64_t* numel) {
  const std::string hint = kParseHint;
  std::vector<int64_t> out;
  uint64_t count = 1;
  bool overflow = false;
  for (const auto& d : shape) {
    if (!d.is_number_integer()) throw Error(where + ": shape " + shape.dump() + " has a non-integer dimension" + hint);
    if (d.is_number_unsigned() ? d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())
                               : d.get<int64_t>() < 0)
      throw Error(where + ": shape " + shape.dump() + " has a negative or out-of-range dimension" + hint);
    const uint64_t dim = d.get<uint64_t>();
    out.push_back(int64_t(dim));
    if (dim != 0 && count > std::numeric_limits<uint64_t>::max() / 8 / dim) overflow = true;
    count = overflow ? 0 : count * dim;
  }
  if (overflow) throw Error(where + ": shape " + shape_str(out) + " overflows 64-bit sizes" + hint);
  *numel = count;
  return out;
}

// One tensor's entry of the header, checked: a supported dtype, a shape, and data offsets inside
// the data section (data_size bytes) that span exactly the shape's bytes.
TableEntry parse_entry(const nlohmann::json& value, const std::string& where, uint64_t data_size) {
  const std::string hint = kParseHint;
  if (!value.is_object()) throw Error(where + ": entry is not a JSON object" + hint);
  if (!value.contains("dtype") || !value["dtype"].is_string()) throw Error(where + ": missing string 'dtype'" + hint);
  if (!value.contains("shape") || !value["shape"].is_array()) throw Error(where + ": missing array 'shape'" + hint);
  if (!value.contains("data_offsets") || !value["data_offsets"].is_array() || value["data_offsets"].size() != 2)
    throw Error(where + ": 'data_offsets' must be an array [begin, end]" + hint);
  TableEntry e;
  e.dtype = value["dtype"].get<std::string>();
  const int esize = dtype_size(e.dtype);
  if (esize == 0)
    throw Error(where + " has dtype " + e.dtype +
                "; only F32, F16 and BF16 are supported (convert the file to one of them)");
  uint64_t numel = 0;
  e.shape = parse_shape(value["shape"], where, &numel);
  for (int i = 0; i < 2; ++i) {
    const auto& o = value["data_offsets"][i];
    if (!o.is_number_integer() || (!o.is_number_unsigned() && o.get<int64_t>() < 0))
      throw Error(where + ": data_offsets " + value["data_offsets"].dump() + " are not non-negative integers" + hint);
  }
  e.begin = value["data_offsets"][0].get<uint64_t>();
  e.end = value["data_offsets"][1].get<uint64_t>();
  if (e.end < e.begin)
    throw Error(where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                "] end before they begin" + hint);
  if (e.end > data_size)
    throw Error(where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                "] run past the data section (" + std::to_string(data_size) +
                " bytes) — the file is truncated or corrupt");
  if (e.end - e.begin != numel * uint64_t(esize))
    throw Error(where + ": shape " + shape_str(e.shape) + " of " + e.dtype + " needs " + std::to_string(numel * esize) +
                " bytes but data_offsets span " + std::to_string(e.end - e.begin) + hint);
  return e;
}

// Tensors must tile the data section exactly: no overlaps (two tensors sharing bytes) and no
// holes (bytes nobody owns), as in Hugging Face's validation.
template <class Entries>
void check_tiling(const Entries& entries, uint64_t data_size, const std::string& src) {
  const std::string hint = kParseHint;
  std::vector<std::pair<const std::string*, const typename Entries::mapped_type*>> order;
  for (const auto& [name, e] : entries) order.push_back({&name, &e});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->begin != b.second->begin ? a.second->begin < b.second->begin : a.second->end < b.second->end;
  });
  uint64_t covered = 0;
  const std::string* prev = nullptr;
  for (const auto& [name, e] : order) {
    if (e->begin < covered)
      throw Error(src + ": tensors " + *prev + " and " + *name + " overlap in the data section" + hint);
    if (e->begin > covered)
      throw Error(src + ": data section bytes [" + std::to_string(covered) + ", " + std::to_string(e->begin) +
                  ") belong to no tensor (before " + *name + ")" + hint);
    covered = e->end;
    prev = name;
  }
  if (covered != data_size)
    throw Error(src + ": data section has " + std::to_string(data_size) + " bytes but the tensors cover only " +
                std::to_string(covered) + hint);
}

}  // namespace

SafetensorsFile SafetensorsFile::parse(std::string bytes, const std::string& source) {
  const std::string& src = source;
  const uint64_t n = header_length(bytes, src);
  const nlohmann::json header = parse_header(bytes, n, src);

  SafetensorsFile f;
  f.path_ = source;
  f.data_start_ = 8 + n;
  const uint64_t data_size = bytes.size() - f.data_start_;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      for (auto& [k, v] : parse_metadata(value, src)) f.metadata_[k] = std::move(v);
      continue;
    }
    TableEntry e = parse_entry(value, src + ": tensor " + name, data_size);
    f.entries_.emplace(name, Entry{std::move(e.dtype), std::move(e.shape), e.begin, e.end});
  }
  check_tiling(f.entries_, data_size, src);

  // The checksum recorded when we wrote it: a file that still parses but whose numbers changed
  // (a flipped bit, a weight set by another tool) is refused instead of used silently.
  if (const auto it = f.metadata_.find(kDataChecksumKey); it != f.metadata_.end()) {
    f.data_checksum_ = it->second;
    std::map<std::string, TableEntry> table;
    for (const auto& [name, e] : f.entries_) table[name] = TableEntry{e.dtype, e.shape, e.begin, e.end};
    const std::string now =
        checksum_of(crc_update(crc32(0L, Z_NULL, 0), bytes.data() + f.data_start_, data_size), table);
    if (now != it->second)
      throw Error(src + ": its tensors do not match the checksum recorded when it was written (" +
                  std::string(kDataChecksumKey) + " " + it->second + ", the data now gives " + now +
                  ") — its numbers or its tensor table were changed or damaged after it was saved; restore it from a "
                  "copy or retrain");
    f.metadata_.erase(it);  // the writer's own key: metadata() is what the caller wrote
  }
  f.bytes_ = std::move(bytes);
  return f;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) out.push_back(name);
  return out;
}

bool SafetensorsFile::has(const std::string& name) const {
  return entries_.count(name) != 0;
}

std::vector<int64_t> SafetensorsFile::shape(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    throw Error(path_ + ": has no tensor " + name + " (" + std::to_string(entries_.size()) +
                " tensors present) — was it saved by another model or config?");
  return it->second.shape;
}

void SafetensorsFile::read_f32(const std::string& name, float* out, const std::vector<int64_t>& expected_shape) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    throw Error(path_ + ": has no tensor " + name + " (" + std::to_string(entries_.size()) +
                " tensors present) — was it saved by another model or config?");
  const Entry& e = it->second;
  if (e.shape != expected_shape)
    throw Error(path_ + ": tensor " + name + " has shape " + shape_str(e.shape) + ", expected " +
                shape_str(expected_shape) + " — was it saved with another config?");
  const char* src = bytes_.data() + data_start_ + e.begin;
  const uint64_t bytes = e.end - e.begin;
  // memcpy, not casts: the data section need not be aligned for float in memory.
  if (e.dtype == "F32") {
    if (bytes) std::memcpy(out, src, bytes);
    return;
  }
  const uint64_t numel = bytes / 2;
  const bool is_bf16 = e.dtype == "BF16";
  for (uint64_t i = 0; i < numel; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    out[i] = is_bf16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
}

}  // namespace snip
