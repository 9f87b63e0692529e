#include "diffnet/common.h"

#include <ATen/Parallel.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/sysinfo.h>
#include <signal.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace diffnet {

namespace {

bool g_auto_threads = false;  // init_runtime chose the thread count itself: refresh_threads() may change it
int g_threads = 0;

void apply_threads(int threads) {
  if (threads == g_threads) return;
  at::set_num_threads(threads);
  omp_set_num_threads(threads);
  g_threads = threads;
}

// Runnable threads of the whole system right now (/proc/stat "procs_running"); -1 when unknown.
int procs_running() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "procs_running") {
      int n = -1;
      in >> n;
      return n;
    }
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

// Threads of this process that are running or runnable (state R in /proc/self/task/*/stat).
int own_running_threads() {
  int n = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream in(task.path() / "stat");
    std::string line;
    std::getline(in, line);
    const size_t close = line.rfind(')');  // the name may contain spaces and parentheses
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'R') ++n;
  }
  return std::max(n, 1);
}

// CPU limit of a cgroup v2 quota (cpu.max "QUOTA PERIOD"), rounded up; 0 when there is none.
int cgroup_cpu_limit() {
  std::ifstream in("/sys/fs/cgroup/cpu.max");
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  return std::max(1, int(std::ceil(std::atof(quota.c_str()) / period)));
}

}  // namespace

int usable_cores() {
  int n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (const int limit = cgroup_cpu_limit(); limit > 0) n = std::min(n, limit);
  return std::max(n, 1);
}

int auto_threads() {
  const int usable = usable_cores();
  // Restricted by affinity or a quota (a container): trust the restriction; the system-wide run queue
  // counts processes outside it.
  if (usable < get_nprocs()) return usable;
  int samples[3];
  for (int& s : samples) {
    s = procs_running();
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  std::sort(samples, samples + 3);
  if (samples[1] < 0) return usable;
  const int others = std::max(0, samples[1] - own_running_threads());
  return std::clamp(usable - others, 1, usable);
}

int init_runtime(int threads) {
  if (threads <= 0) {
    if (const char* env = std::getenv("DIFFNET_THREADS")) threads = std::atoi(env);
  }
  g_auto_threads = threads <= 0;
  if (g_auto_threads) threads = auto_threads();
  g_threads = 0;
  apply_threads(threads);
  return threads;
}

bool threads_are_auto() { return g_auto_threads; }

void set_this_thread_threads(int threads) {
  // ATen applies the process's count to a thread lazily, at its first parallel op: run that first, or it
  // would later overwrite this thread's setting.
  at::internal::lazy_init_num_threads();
  omp_set_num_threads(std::max(threads, 1));
}

int refresh_threads() {
  if (g_auto_threads) apply_threads(auto_threads());
  return g_threads;
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

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd_ < 0) throw Error(path_, std::string("cannot write: ") + std::strerror(errno));
}

TempDir::TempDir(const std::string& prefix) {
  std::string name = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!::mkdtemp(name.data())) throw Error(prefix, std::string("cannot make a temporary folder: ") + std::strerror(errno));
  path_ = name;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  if (fd_ < 0) throw Error(path_, "write after commit or failure");
  const char* ptr = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(fd_, ptr, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd_);
      fd_ = -1;
      ::unlink(tmp_.c_str());
      throw Error(path_, std::string("write failed: ") + std::strerror(e));
    }
    ptr += n;
    left -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw Error(path_, "commit after commit or failure");
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp_.c_str());
    throw Error(path_, "fsync/close failed");
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp_.c_str());
    throw Error(path_, std::string("rename failed: ") + std::strerror(e));
  }
  // Make the rename itself durable.
  std::filesystem::path p(path_);
  std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, const void* data, size_t size) {
  AtomicFile f(path);
  f.write(data, size);
  f.commit();
}

int remove_stale_temp_files(const std::string& dir) {
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at + 5 >= name.size()) continue;
    const std::string pid = name.substr(at + 5);
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
    const pid_t p = static_cast<pid_t>(std::stol(pid));
    if (p == ::getpid() || ::kill(p, 0) == 0 || errno != ESRCH) continue;  // its writer still runs
    std::error_code rm;
    if (std::filesystem::remove(entry.path(), rm)) ++removed;
  }
  return removed;
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

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 when it is not one (overlong forms,
// surrogates and code points above U+10FFFF are invalid, RFC 3629).
size_t utf8_sequence(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

bool is_valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::string hex_bytes(const std::string& s) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * s.size());
  for (unsigned char c : s) out += kDigits[c >> 4], out += kDigits[c & 15];
  return out;
}

std::string from_hex(const std::string& hex) {
  if (hex.size() % 2) throw Error("hex", "odd number of digits");
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw Error("hex", std::string("not a hex digit: '") + c + "'");
  };
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) out += static_cast<char>(digit(hex[i]) * 16 + digit(hex[i + 1]));
  return out;
}

std::string base64_encode(const std::vector<uint8_t>& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = uint32_t(bytes[i]) << 16 | uint32_t(bytes[i + 1]) << 8 | bytes[i + 2];
    for (int s : {18, 12, 6, 0}) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == bytes.size()) {
    uint32_t v = uint32_t(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    uint32_t v = uint32_t(bytes[i]) << 16 | uint32_t(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) throw Error("median", "no values");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
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

std::string shape_str(const std::vector<int64_t>& dims) {
  std::string r = "[";
  for (size_t i = 0; i < dims.size(); ++i) r += (i ? ", " : "") + std::to_string(dims[i]);
  return r + "]";
}

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
