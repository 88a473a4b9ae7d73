// Per-kernel GPU time of any CUDA process, for machines without Nsight Systems.
// Built by bench/gpu_session.sh prepare as libkernel_times.so; the CUDA driver loads it
// into a process started with CUDA_INJECTION64_PATH=/path/libkernel_times.so and calls
// InitializeInjection. CUPTI's activity records give each kernel's, copy's and fill's
// device time; at exit the totals go to $KERNEL_TIMES_OUT (default stderr), largest
// first: one line each with the share of the device time, calls, total and mean.
// Works for distrain and for PyTorch alike, so the two can be compared kernel by kernel.
#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Total {
  uint64_t ns = 0;
  uint64_t calls = 0;
};

std::mutex totals_mutex;
std::map<std::string, Total>& totals() {
  static auto* t = new std::map<std::string, Total>;  // outlives static destructors run at exit
  return *t;
}

std::string readable(const char* mangled) {
  if (mangled == nullptr) return "?";
  int status = 0;
  char* plain = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && plain != nullptr ? plain : mangled;
  std::free(plain);
  // Template arguments make names pages long; the kernel and its first arguments suffice.
  if (name.size() > 110) name = name.substr(0, 107) + "...";
  return name;
}

void add(const std::string& name, uint64_t start, uint64_t end) {
  std::lock_guard<std::mutex> lock(totals_mutex);
  Total& t = totals()[name];
  t.ns += end > start ? end - start : 0;
  ++t.calls;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 16u << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      add(readable(k->name), k->start, k->end);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      add("[copy kind " + std::to_string(m->copyKind) + "]", m->start, m->end);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      add("[memset]", m->start, m->end);
    }
  }
  std::free(buffer);
}

void report() {
  cuptiActivityFlushAll(1);
  std::vector<std::pair<std::string, Total>> rows(totals().begin(), totals().end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  uint64_t all = 0;
  for (const auto& r : rows) all += r.second.ns;
  const char* path = std::getenv("KERNEL_TIMES_OUT");
  FILE* out = path != nullptr ? std::fopen(path, "a") : stderr;
  if (out == nullptr) out = stderr;
  std::fprintf(out, "device time %.3f ms in %zu kinds of kernel, copy and fill\n", all / 1e6, rows.size());
  std::fprintf(out, "%7s %8s %11s %10s  %s\n", "share", "calls", "total ms", "mean us", "name");
  for (const auto& [name, t] : rows) {
    if (t.ns * 1000 < all) break;  // below 0.1% of the device time
    std::fprintf(out, "%6.2f%% %8llu %11.3f %10.2f  %s\n", 100.0 * t.ns / all, static_cast<unsigned long long>(t.calls),
                 t.ns / 1e6, t.ns / 1e3 / t.calls, name.c_str());
  }
  if (out != stderr) std::fclose(out);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 0;
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  std::atexit(report);
  return 1;
}
