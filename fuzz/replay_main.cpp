// Corpus replay of the fuzz targets with the normal compiler (ctest `fuzz_replay`): every file under
// fuzz/corpus/<target>/ and fuzz/crashes/<target>/ goes through its target once. A crash, an abort or
// an exception other than std::exception fails the test; so does a target without any corpus file.
//   test_fuzz_replay                   all targets, the directories above
//   test_fuzz_replay TARGET FILE...    one target on the given files (to reproduce a finding)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "diffnet/common.h"
#include "fuzz/fuzz_target.h"

namespace fs = std::filesystem;
using diffnet::fuzz::Target;

namespace {

const Target* find_target(const std::string& name) {
  for (const Target& t : diffnet::fuzz::registry())
    if (name == t.name) return &t;
  return nullptr;
}

void replay(const Target& t, const std::string& file) {
  const std::vector<uint8_t> bytes = diffnet::read_file(file);
  diffnet::fuzz::run_one(t.fn, bytes.data(), bytes.size());
}

int replay_dir(const Target& t, const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return 0;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().filename() != ".gitkeep") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) replay(t, f);
  return static_cast<int>(files.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2) {
    const Target* t = find_target(argv[1]);
    if (!t) {
      std::fprintf(stderr, "unknown target '%s'\n", argv[1]);
      return 2;
    }
    for (int i = 2; i < argc; ++i) {
      replay(*t, argv[i]);
      std::printf("%s: %s ok\n", t->name, argv[i]);
    }
    return 0;
  }
  const fs::path root = DIFFNET_FUZZ_DIR;
  int failures = 0;
  for (const Target& t : diffnet::fuzz::registry()) {
    const int corpus = replay_dir(t, root / "corpus" / t.name);
    const int crashes = replay_dir(t, root / "crashes" / t.name);
    std::printf("%-14s %3d corpus + %d crash file(s) replayed\n", t.name, corpus, crashes);
    if (corpus == 0) {
      std::fprintf(stderr, "%s: no seed in %s\n", t.name, (root / "corpus" / t.name).c_str());
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
