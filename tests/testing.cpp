#include "testing.h"

#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "diffnet/common.h"

namespace diffnet::testutil {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempRoot {
  std::string root;
  TempRoot() {
    root = (std::filesystem::temp_directory_path() / ("diffnet-test-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(root);
  }
  ~TempRoot() {
    // POSIX nftw rather than std::filesystem::remove_all: PyTorch's pip LibTorch exports its own copy of
    // that symbol, and calling it from here at exit crashed every test binary of a GPU build.
    if (!std::getenv("DIFFNET_KEEP_TEST_FILES"))
      nftw(root.c_str(), [](const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }, 16,
           FTW_DEPTH | FTW_PHYS);
  }
};

TempRoot& temp_root() {
  static TempRoot r;
  return r;
}

// Sets the thread count once for every test executable.
struct RuntimeInit {
  RuntimeInit() { diffnet::init_runtime(0); }
} runtime_init;

}  // namespace

std::string data_path(const std::string& rel) { return std::string(DIFFNET_TEST_DATA_DIR) + "/" + rel; }
std::string source_path(const std::string& rel) { return std::string(DIFFNET_SOURCE_DIR) + "/" + rel; }

std::string temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  std::string dir = temp_root().root + "/" + tag + "-" + std::to_string(counter++);
  std::filesystem::create_directories(dir);
  return dir;
}

CliResult run_command(const std::string& command) {
  std::string dir = temp_dir("cli");
  std::string out = dir + "/stdout", err = dir + "/stderr";
  std::string cmd = "(" + command + ") >'" + out + "' 2>'" + err + "'";
  int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

CliResult run_cli(const std::string& args) { return run_command(std::string("'") + DIFFNET_CLI + "' " + args); }

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kCPU, at::kDouble) - b.to(at::kCPU, at::kDouble)).abs().max().item<double>();
}

// A minimal big-endian TIFF/EXIF payload holding only the Orientation tag.
std::vector<uint8_t> exif_payload(int orientation) {
  std::vector<uint8_t> t = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1,  // header, IFD0 at 8, one entry
                            0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, static_cast<uint8_t>(orientation), 0, 0,
                            0, 0, 0, 0};  // next IFD: none
  return t;
}

std::vector<uint8_t> jpeg_with_orientation(const std::vector<uint8_t>& jpeg, int orientation) {
  std::vector<uint8_t> seg = {'E', 'x', 'i', 'f', 0, 0};
  auto p = exif_payload(orientation);
  seg.insert(seg.end(), p.begin(), p.end());
  std::vector<uint8_t> out(jpeg.begin(), jpeg.begin() + 2);
  const size_t len = seg.size() + 2;
  out.insert(out.end(), {0xFF, 0xE1, static_cast<uint8_t>(len >> 8), static_cast<uint8_t>(len & 0xFF)});
  out.insert(out.end(), seg.begin(), seg.end());
  out.insert(out.end(), jpeg.begin() + 2, jpeg.end());
  return out;
}

}  // namespace diffnet::testutil
