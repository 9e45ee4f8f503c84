// TensorBoard event files (`events.out.tfevents.*`), for a run's scalars in the dashboard
// researchers already keep open. The file is a sequence of records: a little-endian u64 length,
// the masked CRC-32C of those 8 bytes, the data (an Event protobuf of
// engine/io/proto/tensorboard_event.proto, in protobuf's wire format), and the masked CRC-32C of
// the data.
// The first event names the file version ("brain.Event:2"); each scalar is an Event with a step,
// a wall time and a Summary holding one tagged simple_value.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace snip {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and TensorFlow's mask of it:
// ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

class TensorBoardWriter {
 public:
  // Writes <dir>/events.out.tfevents.<wall seconds>.<host>.<source>; `dir` is created when missing.
  // The file is written in place of a temporary one when close() succeeds, so a reader never
  // sees half a file. Throws snip::Error.
  // `source` ends the file's name ("snip-run3"): exports of two runs into one folder never share
  // a name (the time in it is the run's start, in whole seconds), while a second export of the
  // same run replaces its first.
  TensorBoardWriter(const std::string& dir, double wall_time, const std::string& source = "snip");
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  void add_scalar(const std::string& tag, int64_t step, double value, double wall_time);
  // Writes the file (atomically); returns its path.
  std::string close();
  int64_t scalars() const { return scalars_; }

 private:
  void add_record(const std::string& data);
  std::string dir_, name_, bytes_;
  int64_t scalars_ = 0;
};

}  // namespace snip
