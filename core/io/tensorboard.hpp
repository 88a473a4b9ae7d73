// TensorBoard event files, so that `tensorboard --logdir runs/` shows distrain runs beside
// Keras and PyTorch ones. A file is a TFRecord file (core/io/tfrecord.hpp) of serialised
// tensorflow.Event protobufs, of which distrain writes and reads only:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// The first event of a file carries file_version "brain.Event:2", the rest scalars.
//
// Files are named events.out.tfevents.<unix time>.<host>.<pid>.distrain; TensorBoard reads
// a folder's files in name order, so a new file's time is made later than every earlier
// one's in the folder even when two runs start within a second.
#pragma once
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace distrain {

using Scalars = std::vector<std::pair<std::string, float>>;  // (tag, value)

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;  // the first event of a file only
  Scalars scalars;
};

std::string encode_event(const Event& event);
// Reads what encode_event writes, skipping fields of Event, Summary and Value it does not
// use; malformed bytes are a UserError naming `where`.
Event decode_event(std::string_view bytes, const std::string& where);

class EventFileWriter {
 public:
  // Creates a new event file in `dir` and writes its file_version event.
  explicit EventFileWriter(const std::string& dir);
  void add(int64_t step, const Scalars& scalars);
  // Buffered records reach the file (the trainer flushes once per epoch).
  void flush();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

// The event files distrain wrote in `dir`, oldest first.
std::vector<std::string> list_event_files(const std::string& dir);

// Keeps, in the folder's event files, the events with scalars for which keep(event) is
// true (a resumed run drops those of the steps it redoes). A file left without scalars is
// removed, a record cut short by a crash dropped; a rewritten file is replaced atomically.
void trim_event_files(const std::string& dir, const std::function<bool(const Event&)>& keep);

}  // namespace distrain
