// libdistrain_sentencepiece.so: SentencePiece's processor and trainer behind the C interface
// of datasets/sentencepiece_abi.h. No exception or C++ type leaves this file.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/sentencepiece_abi.h"

struct dt_sp_model {
  sentencepiece::SentencePieceProcessor processor;
  // Whether a text's ids are those of its lines (each with its newline) one after another,
  // so that a long text is encoded in pieces: SentencePiece's time grows faster than the
  // length of what it is given (Tiny Shakespeare whole: 4.6x its lines' time).
  bool lines_apart = false;
};

namespace {

void put(char* err, size_t errlen, const std::string& message) {
  if (err && errlen) std::snprintf(err, errlen, "%s", message.c_str());
}

// The lines of one text for the trainer, without copying the text.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(std::string_view text) : text_(text) { advance(); }
  bool done() const override { return at_end_; }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void advance() {
    if (pos_ >= text_.size()) {
      at_end_ = true;
      return;
    }
    size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) end = text_.size();
    line_.assign(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
  }
  std::string_view text_;
  size_t pos_ = 0;
  std::string line_;
  bool at_end_ = false;
};

// The varint at bytes[at], moving at past it; false past the end.
bool read_varint(std::string_view bytes, size_t& at, uint64_t& value) {
  value = 0;
  for (int shift = 0; at < bytes.size() && shift < 64; shift += 7) {
    const auto byte = static_cast<uint8_t>(bytes[at++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

// Calls field(number, varint, bytes) for each field of a serialized protobuf message;
// false for a message that does not parse.
template <typename F>
bool for_each_field(std::string_view message, F field) {
  for (size_t at = 0; at < message.size();) {
    uint64_t tag = 0, value = 0;
    if (!read_varint(message, at, tag)) return false;
    const int wire = static_cast<int>(tag & 7);
    if (wire == 0) {
      if (!read_varint(message, at, value)) return false;
      field(tag >> 3, value, std::string_view());
    } else if (wire == 2) {
      if (!read_varint(message, at, value) || value > message.size() - at) return false;
      field(tag >> 3, 0, message.substr(at, value));
      at += value;
    } else if (wire == 1 || wire == 5) {
      at += wire == 1 ? 8 : 4;
    } else {
      return false;
    }
  }
  return true;
}

// Lines encode apart where nothing can join a newline to its neighbours: no normalization
// (NormalizerSpec, field 3 of ModelProto: name "identity"), no dummy prefix before each
// piece of text and no whitespace removal (fields 3 and 4, true by default), and no piece
// holding a newline (it is then a byte of its own, which BPE and unigram never join).
bool lines_encode_apart(const sentencepiece::SentencePieceProcessor& processor) {
  std::string name;
  bool dummy_prefix = true, remove_whitespace = true;
  const std::string model = processor.serialized_model_proto();
  for_each_field(model, [&](uint64_t number, uint64_t, std::string_view spec) {
    if (number != 3) return;
    for_each_field(spec, [&](uint64_t inner, uint64_t value, std::string_view text) {
      if (inner == 1) name = std::string(text);
      if (inner == 3) dummy_prefix = value != 0;
      if (inner == 4) remove_whitespace = value != 0;
    });
  });
  if (name != "identity" || dummy_prefix || remove_whitespace) return false;
  for (int id = 0; id < processor.GetPieceSize(); ++id)
    if (!processor.IsByte(id) && processor.IdToPiece(id).find('\n') != std::string::npos) return false;
  return true;
}

// Appends the ids of `text` to `out`.
sentencepiece::util::Status encode_into(const dt_sp_model& model, std::string_view text, std::vector<int>& out) {
  std::vector<int> ids;
  const auto status = model.processor.Encode(text, &ids);
  out.insert(out.end(), ids.begin(), ids.end());
  return status;
}

// A text's ids; where lines encode apart, in runs of whole lines of about 1 KB.
sentencepiece::util::Status encode_text(const dt_sp_model& model, std::string_view text, std::vector<int>& out) {
  constexpr size_t kRun = 1 << 10;
  if (!model.lines_apart) return encode_into(model, text, out);
  for (size_t at = 0; at < text.size();) {
    size_t end = text.size();
    if (end - at > kRun) {
      size_t newline = text.rfind('\n', at + kRun);
      if (newline == std::string_view::npos || newline < at) newline = text.find('\n', at + kRun);
      end = newline == std::string_view::npos ? text.size() : newline + 1;
    }
    if (auto status = encode_into(model, text.substr(at, end - at), out); !status.ok()) return status;
    at = end;
  }
  return {};
}

}  // namespace

extern "C" {

dt_sp_model* dt_sp_load(const char* bytes, size_t size, char* err, size_t errlen) {
  try {
    auto* model = new dt_sp_model;
    const auto status = model->processor.LoadFromSerializedProto(std::string_view(bytes, size));
    if (!status.ok()) {
      put(err, errlen, status.ToString());
      delete model;
      return nullptr;
    }
    model->lines_apart = lines_encode_apart(model->processor);
    return model;
  } catch (const std::exception& e) {
    put(err, errlen, e.what());
    return nullptr;
  }
}

void dt_sp_free(dt_sp_model* model) { delete model; }

int32_t dt_sp_vocab_size(const dt_sp_model* model) { return model->processor.GetPieceSize(); }

int32_t dt_sp_eos(const dt_sp_model* model) { return model->processor.eos_id(); }

int64_t dt_sp_encode(const dt_sp_model* model, const char* text, size_t size, int32_t* ids, size_t capacity, char* err,
                     size_t errlen) {
  try {
    std::vector<int> out;
    const auto status = encode_text(*model, std::string_view(text, size), out);
    if (!status.ok()) {
      put(err, errlen, status.ToString());
      return -1;
    }
    for (size_t i = 0; i < out.size() && i < capacity; ++i) ids[i] = out[i];
    return static_cast<int64_t>(out.size());
  } catch (const std::exception& e) {
    put(err, errlen, e.what());
    return -1;
  }
}

int64_t dt_sp_decode(const dt_sp_model* model, const int32_t* ids, size_t count, char* out, size_t capacity, char* err,
                     size_t errlen) {
  try {
    std::string text;
    const auto status = model->processor.Decode(std::vector<int>(ids, ids + count), &text);
    if (!status.ok()) {
      put(err, errlen, status.ToString());
      return -1;
    }
    std::memcpy(out, text.data(), std::min(capacity, text.size()));
    return static_cast<int64_t>(text.size());
  } catch (const std::exception& e) {
    put(err, errlen, e.what());
    return -1;
  }
}

int dt_sp_train(const char* flags, const char* text, size_t size, dt_sp_sink sink, void* context, char* err,
                size_t errlen) {
  try {
    LineIterator lines(std::string_view(text, size));
    std::string model;
    // The trainer logs its flags and progress to std::cerr whatever --minloglevel says;
    // its status carries what a caller needs.
    std::ostringstream log;
    std::streambuf* const cerr = std::cerr.rdbuf(log.rdbuf());
    const auto status = sentencepiece::SentencePieceTrainer::Train(flags, &lines, &model);
    std::cerr.rdbuf(cerr);
    if (!status.ok()) {
      put(err, errlen, status.ToString());
      return -1;
    }
    sink(context, model.data(), model.size());
    return 0;
  } catch (const std::exception& e) {
    put(err, errlen, e.what());
    return -1;
  }
}

}  // extern "C"
