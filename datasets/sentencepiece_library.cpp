#include "datasets/sentencepiece_library.hpp"

#include <dlfcn.h>

#include <stdexcept>

#include "core/base/error.hpp"
#include "core/base/plugin_path.hpp"

namespace distrain {

namespace {

constexpr const char* kPluginName = "libdistrain_sentencepiece.so";

std::string plugin_path() {
  const std::string path = find_plugin("DISTRAIN_SENTENCEPIECE_PLUGIN", kPluginName);
  DT_USER_CHECK(!path.empty(), "SentencePiece: this distrain has no {} (neither beside the executable nor in ../lib); "
                "rebuild with libsentencepiece-dev installed", kPluginName);
  return path;
}

// SentencePiece's symbols, its protobuf runtime among them, must bind inside the plugin,
// never to the process's protobuf: the plugin gets a link-map namespace of its own, with
// its own C++ runtime. (RTLD_DEEPBIND binds them too, but the plugin's std::cerr would then
// be the library's own copy, not the executable's initialised one; and AddressSanitizer
// refuses it.) Only C types and buffers cross, so the two runtimes never meet.
void* open_plugin(const std::string& path) { return dlmopen(LM_ID_NEWLM, path.c_str(), RTLD_NOW | RTLD_LOCAL); }

template <typename F>
void bind(void* handle, const std::string& path, const char* name, F& function) {
  function = reinterpret_cast<F>(dlsym(handle, name));
  DT_USER_CHECK(function, "{}: not distrain's SentencePiece plugin (no {})", path, name);
}

SentencePieceLibrary open_library() {
  const std::string path = plugin_path();
  // Never closed: models from it live until exit.
  void* handle = open_plugin(path);
  DT_USER_CHECK(handle, "{}: cannot load: {}; install libsentencepiece0", path, dlerror());
  SentencePieceLibrary l{};
  l.path = path;
  bind(handle, path, "dt_sp_load", l.load);
  bind(handle, path, "dt_sp_free", l.free);
  bind(handle, path, "dt_sp_vocab_size", l.vocab_size);
  bind(handle, path, "dt_sp_eos", l.eos);
  bind(handle, path, "dt_sp_encode", l.encode);
  bind(handle, path, "dt_sp_decode", l.decode);
  bind(handle, path, "dt_sp_train", l.train);
  return l;
}

}  // namespace

const SentencePieceLibrary& sentencepiece_library() {
  static const SentencePieceLibrary library = open_library();
  return library;
}

std::string sentencepiece_status() {
  try {
    return "plugin " + sentencepiece_library().path + " (.model files, tokenizer train)";
  } catch (const UserError& e) {
    return std::string("not usable: ") + e.what();
  }
}

}  // namespace distrain
