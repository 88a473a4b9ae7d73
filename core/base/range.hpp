// Range: the half-open interval [begin, end) of elements in an arena or a buffer. Sharding
// keeps asking which part of a variable or a layer falls in a replica's range; intersect()
// is that question, answered once.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace distrain {

struct Range {
  int64_t begin = 0, end = 0;

  // Empty ranges (end <= begin) have size 0, so an intersection needs no separate test.
  int64_t size() const { return end > begin ? end - begin : 0; }
  bool empty() const { return end <= begin; }
  bool contains(const Range& r) const { return r.begin >= begin && r.end <= end; }
};

// [max(a.begin, b.begin), min(a.end, b.end)); empty when they do not overlap.
inline Range intersect(const Range& a, const Range& b) { return {std::max(a.begin, b.begin), std::min(a.end, b.end)}; }

// Non-overlapping ranges sorted by start, each joined to its neighbour where one ends as
// the next begins.
inline std::vector<Range> merged(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<Range> out;
  for (const Range& r : ranges) {
    if (!out.empty() && out.back().end == r.begin) out.back().end = r.end;
    else out.push_back(r);
  }
  return out;
}

}  // namespace distrain
