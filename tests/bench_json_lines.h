// For the operator benchmarks' tests: the JSON lines that `diffnet bench --op ... --json` prints.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace testutil {

// Every line of `out` that starts with `prefix`, as its text and the numbers of `keys` (-1 where a key
// is missing from the line).
struct BenchLine {
  std::string text;
  std::map<std::string, double> num;
};

inline std::vector<BenchLine> bench_json_lines(const std::string& out, const std::string& prefix,
                                               const std::vector<std::string>& keys) {
  std::vector<BenchLine> lines;
  size_t at = 0;
  while ((at = out.find(prefix, at)) != std::string::npos) {
    const size_t end = out.find('\n', at);
    BenchLine line{out.substr(at, end == std::string::npos ? std::string::npos : end - at), {}};
    for (const std::string& key : keys) {
      const size_t k = line.text.find("\"" + key + "\":");
      line.num[key] = k == std::string::npos ? -1.0 : std::stod(line.text.substr(k + key.size() + 3));
    }
    lines.push_back(line);
    if (end == std::string::npos) break;
    at = end;
  }
  return lines;
}

}  // namespace testutil
