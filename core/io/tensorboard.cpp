#include "core/io/tensorboard.hpp"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <regex>
#include <type_traits>

#include "core/base/error.hpp"
#include "core/io/tfrecord.hpp"

namespace distrain {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFileVersion = "brain.Event:2";
enum Wire { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
  out += static_cast<char>(v);
}

void put_tag(std::string& out, int field, Wire wire) { put_varint(out, static_cast<uint64_t>(field << 3 | wire)); }

template <typename T>
void put_fixed(std::string& out, int field, T v) {
  put_tag(out, field, sizeof(T) == 8 ? kFixed64 : kFixed32);
  using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
  const U bits = std::bit_cast<U>(v);
  for (size_t i = 0; i < sizeof(U); ++i) out += static_cast<char>((bits >> (8 * i)) & 0xff);
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_tag(out, field, kBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

// Protobuf wire-format reader over one message; every read checks the bounds.
class WireReader {
 public:
  WireReader(std::string_view bytes, const std::string& where) : bytes_(bytes), where_(where) {}
  bool done() const { return at_ == bytes_.size(); }
  std::pair<int, int> tag() {
    const uint64_t t = varint();
    return {static_cast<int>(t >> 3), static_cast<int>(t & 7)};
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      need(1);
      const auto b = static_cast<uint8_t>(bytes_[at_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw UserError(fmt::format("{}: malformed event (varint longer than 10 bytes)", where_));
  }
  uint64_t fixed(size_t size) {
    need(size);
    uint64_t v = 0;
    for (size_t i = 0; i < size; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes_[at_++])) << (8 * i);
    return v;
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    need(n);
    const std::string_view out = bytes_.substr(at_, n);
    at_ += n;
    return out;
  }
  void skip(int wire) {
    if (wire == kVarint) varint();
    else if (wire == kFixed64) fixed(8);
    else if (wire == kBytes) bytes();
    else if (wire == kFixed32) fixed(4);
    else throw UserError(fmt::format("{}: malformed event (protobuf wire type {})", where_, wire));
  }

 private:
  void need(uint64_t n) const {
    DT_USER_CHECK(n <= bytes_.size() - at_, "{}: malformed event (truncated protobuf field)", where_);
  }
  std::string_view bytes_;
  const std::string& where_;
  size_t at_ = 0;
};

// A Summary.Value with a simple_value is a scalar; other kinds of values are skipped.
void decode_value(std::string_view bytes, const std::string& where, Scalars& out) {
  WireReader r(bytes, where);
  std::string tag;
  bool scalar = false;
  float value = 0;
  while (!r.done()) {
    const auto [field, wire] = r.tag();
    if (field == 1 && wire == kBytes) tag = r.bytes();
    else if (field == 2 && wire == kFixed32) {
      value = std::bit_cast<float>(static_cast<uint32_t>(r.fixed(4)));
      scalar = true;
    } else {
      r.skip(wire);
    }
  }
  if (scalar) out.emplace_back(tag, value);
}

void decode_summary(std::string_view bytes, const std::string& where, Scalars& out) {
  WireReader r(bytes, where);
  while (!r.done()) {
    const auto [field, wire] = r.tag();
    if (field == 1 && wire == kBytes) decode_value(r.bytes(), where, out);
    else r.skip(wire);
  }
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const std::regex& event_file_pattern() {
  static const std::regex pattern(R"(events\.out\.tfevents\.(\d+)\..+\.distrain)");
  return pattern;
}

int64_t file_time(const std::string& path) {
  std::smatch m;
  const std::string name = fs::path(path).filename().string();
  if (!std::regex_match(name, m, event_file_pattern())) return 0;
  // Names order the files (a new one must sort after the others): a time no clock gives
  // (beyond the year 5000) cannot be followed, so it is named rather than overflowed.
  constexpr int64_t kLatest = 95'617'584'000;  // 5000-01-01, in seconds since 1970
  int64_t t = 0;
  const std::string digits = m[1];
  const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), t);
  DT_USER_CHECK(err == std::errc{} && end == digits.data() + digits.size() && t <= kLatest,
                "{}: the time in this event file's name ({}) is beyond the year 5000; move the file out of the run folder",
                path, digits);
  return t;
}

std::string new_event_file(const std::string& dir) {
  int64_t time = std::time(nullptr);
  for (const auto& f : list_event_files(dir)) time = std::max(time, file_time(f) + 1);
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) std::snprintf(host, sizeof host, "localhost");
  return (fs::path(dir) / fmt::format("events.out.tfevents.{}.{}.{}.distrain", time, host, getpid())).string();
}

void trim_event_file(const std::string& path, const std::function<bool(const Event&)>& keep) {
  const TFRecords file = read_tfrecords(path);
  std::string kept;
  bool dropped = file.truncated, has_scalars = false;
  for (size_t i = 0; i < file.records.size(); ++i) {
    const Event e = decode_event(file.records[i], fmt::format("{}: record {}", path, i));
    if (!e.scalars.empty() && !keep(e)) {
      dropped = true;
      continue;
    }
    has_scalars = has_scalars || !e.scalars.empty();
    kept += tfrecord_frame(file.records[i]);
  }
  if (!has_scalars) {
    fs::remove(path);
    return;
  }
  if (!dropped) return;
  // Replaced atomically: a crash now leaves the old file or the trimmed one, never half of it.
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp, std::ios::binary | std::ios::trunc) << kept;
  DT_USER_CHECK(fs::file_size(tmp) == kept.size(), "{}: cannot write (disk full?)", tmp);
  fs::rename(tmp, path);
}

}  // namespace

std::string encode_event(const Event& event) {
  std::string out;
  put_fixed(out, 1, event.wall_time);
  if (event.step != 0) {  // proto3 leaves out fields at their default, as TensorFlow's writer does
    put_tag(out, 2, kVarint);
    put_varint(out, static_cast<uint64_t>(event.step));
  }
  if (!event.file_version.empty()) put_bytes(out, 3, event.file_version);
  if (event.scalars.empty()) return out;
  std::string summary;
  for (const auto& [tag, value] : event.scalars) {
    std::string v;
    put_bytes(v, 1, tag);
    put_fixed(v, 2, value);
    put_bytes(summary, 1, v);
  }
  put_bytes(out, 5, summary);
  return out;
}

Event decode_event(std::string_view bytes, const std::string& where) {
  Event e;
  WireReader r(bytes, where);
  while (!r.done()) {
    const auto [field, wire] = r.tag();
    if (field == 1 && wire == kFixed64) e.wall_time = std::bit_cast<double>(r.fixed(8));
    else if (field == 2 && wire == kVarint) e.step = static_cast<int64_t>(r.varint());
    else if (field == 3 && wire == kBytes) e.file_version = r.bytes();
    else if (field == 5 && wire == kBytes) decode_summary(r.bytes(), where, e.scalars);
    else r.skip(wire);
  }
  return e;
}

EventFileWriter::EventFileWriter(const std::string& dir) : path_(new_event_file(dir)) {
  out_.open(path_, std::ios::binary | std::ios::trunc);
  DT_USER_CHECK(out_, "{}: cannot create (is the run folder writable?)", path_);
  out_ << tfrecord_frame(encode_event(Event{now_seconds(), 0, kFileVersion, {}}));
}

void EventFileWriter::add(int64_t step, const Scalars& scalars) {
  out_ << tfrecord_frame(encode_event(Event{now_seconds(), step, "", scalars}));
}

void EventFileWriter::flush() {
  out_.flush();
  DT_USER_CHECK(out_, "{}: cannot write (disk full?)", path_);
}

std::vector<std::string> list_event_files(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  if (!fs::is_directory(dir)) return {};
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && std::regex_match(name, event_file_pattern())) found.emplace_back(file_time(name), e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [time, p] : found) out.push_back(std::move(p));
  return out;
}

void trim_event_files(const std::string& dir, const std::function<bool(const Event&)>& keep) {
  for (const auto& f : list_event_files(dir)) trim_event_file(f, keep);
}

}  // namespace distrain
