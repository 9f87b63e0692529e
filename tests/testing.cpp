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

}  // namespace diffnet::testutil
