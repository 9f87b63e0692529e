#include "diffnet/common.h"

#include <ATen/Parallel.h>
#include <fcntl.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace diffnet {

int init_runtime(int threads) {
  if (threads <= 0) {
    if (const char* env = std::getenv("DIFFNET_THREADS")) threads = std::atoi(env);
  }
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  at::set_num_threads(threads);
  omp_set_num_threads(threads);
  return threads;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path, "is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, std::string("cannot open: ") + std::strerror(errno));
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) throw Error(path, "cannot determine size");
  in.seekg(0, std::ios::beg);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size))
    throw Error(path, "read failed");
  return bytes;
}

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  std::filesystem::path p(path);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error(path, std::string("cannot write: ") + std::strerror(errno));
  const char* ptr = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(fd, ptr, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error(path, std::string("write failed: ") + std::strerror(e));
    }
    ptr += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw Error(path, "fsync/close failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw Error(path, std::string("rename failed: ") + std::strerror(e));
  }
  // Make the rename itself durable.
  std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec && !std::filesystem::is_directory(path))
    throw Error(path, "cannot create directory: " + ec.message());
}

std::string file_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

std::string file_stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

namespace {
double cpu_clock_seconds(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

double process_cpu_seconds() { return cpu_clock_seconds(CLOCK_PROCESS_CPUTIME_ID); }
double thread_cpu_seconds() { return cpu_clock_seconds(CLOCK_THREAD_CPUTIME_ID); }

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8) return "?";
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

Progress::Progress(std::string label, int64_t total, bool quiet, double min_interval_s)
    : label_(std::move(label)),
      total_(total),
      quiet_(quiet),
      tty_(::isatty(2) != 0),
      min_interval_s_(min_interval_s),
      start_(now_seconds()) {}

Progress::~Progress() {
  if (!finished_ && done_ > 0) finish();
}

void Progress::step(int64_t n, const std::string& extra) {
  done_ += n;
  double t = now_seconds();
  double interval = tty_ ? 0.1 : min_interval_s_;
  if (t - last_draw_ >= interval) {
    last_draw_ = t;
    draw(false, extra);
  }
}

void Progress::finish(const std::string& extra) {
  if (finished_) return;
  finished_ = true;
  draw(true, extra);
}

void Progress::draw(bool final_line, const std::string& extra) {
  if (quiet_) return;
  double elapsed = now_seconds() - start_;
  double rate = elapsed > 0 ? done_ / elapsed : 0.0;
  char buf[256];
  if (total_ > 0) {
    double eta = rate > 0 ? (total_ - done_) / rate : -1;
    std::snprintf(buf, sizeof buf, "%s %lld/%lld %3d%% %.2f it/s %s %s", label_.c_str(),
                  static_cast<long long>(done_), static_cast<long long>(total_),
                  static_cast<int>(100.0 * done_ / total_), rate,
                  final_line ? "elapsed" : "ETA", format_duration(final_line ? elapsed : eta).c_str());
  } else {
    std::snprintf(buf, sizeof buf, "%s %lld %.2f it/s elapsed %s", label_.c_str(),
                  static_cast<long long>(done_), rate, format_duration(elapsed).c_str());
  }
  std::string line = buf;
  if (!extra.empty()) line += "  " + extra;
  if (tty_)
    std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
  else
    std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace diffnet
