// Shared basics: the project's error type, runtime set-up (threads), file helpers and a progress line.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace diffnet {

// Every user-facing failure is a diffnet::Error whose what() is one line: "<subject>: <reason>".
// The CLI prints it as "error: <what>" and exits with code 2.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  Error(const std::string& subject, const std::string& reason)
      : std::runtime_error(subject + ": " + reason) {}
};

// Sets the intra-op thread count used by LibTorch and our OpenMP kernels.
// threads <= 0 means: $DIFFNET_THREADS if set, else auto_threads() (re-checked by refresh_threads()).
// Returns the count in effect. Call once at program start (the CLI and tests do).
int init_runtime(int threads = 0);
// Cores this process may use: its CPU affinity, capped by a cgroup v2 CPU quota.
int usable_cores();
// The automatic thread count: usable_cores() minus the threads other processes keep runnable right now
// (/proc/stat procs_running less our own running threads, median of 3 samples), at least 1. On a busy
// machine more threads than free cores make every parallel region wait for a descheduled thread.
// Within a CPU restriction (affinity or quota smaller than the machine) the restriction alone counts.
int auto_threads();
// When init_runtime chose the count automatically, applies auto_threads() again (long batches call it
// between inputs, so a job that starts beside us is noticed). Returns the count in effect.
int refresh_threads();
// True when init_runtime chose the thread count itself (no -t, no $DIFFNET_THREADS).
bool threads_are_auto();
// Sets the compute threads (OpenMP/ATen/oneDNN team size) of the calling thread only, at least 1; the
// process's count and other threads keep theirs. For threads that share the cores with others (loader
// workers, concurrent inference slots). Call it in that thread before its first ATen op, and again
// whenever the process count may have been reapplied there.
void set_this_thread_threads(int threads);

// Whole file as bytes; throws Error(path, reason) when it cannot be read.
std::vector<uint8_t> read_file(const std::string& path);

// Writes bytes to path atomically: temp file in the same directory, fsync, rename.
// A crash at any moment leaves either the old file or the new one, never a partial file.
void write_file_atomic(const std::string& path, const void* data, size_t size);
inline void write_file_atomic(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_file_atomic(path, bytes.data(), bytes.size());
}

// A file written atomically in pieces (bounded memory): write() appends to "<path>.tmp.<pid>", commit()
// fsyncs and renames it to path. Destroyed uncommitted, the temp file is removed and path is untouched.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // Error(path, "cannot write: ...") when the temp file cannot be made
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t size);
  void write(const std::string& s) { write(s.data(), s.size()); }
  void commit();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

// A private folder "<system temp dir>/<prefix>-XXXXXX" (mkdtemp: mode 0700, a fresh name), removed with
// everything in it when the object goes. Error(prefix, ...) when it cannot be made.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Removes the temp files that write_file_atomic left in `dir` (not recursive) when its process was
// killed mid-write ("<name>.tmp.<pid>" whose process no longer runs). Returns how many were removed.
int remove_stale_temp_files(const std::string& dir);

// Creates a directory and its parents (no error if it exists).
void make_dirs(const std::string& path);

// Lower-case file extension including the dot (".jpg"), or "" when there is none.
std::string file_extension(const std::string& path);

// File name without directory and without the last extension ("a/b/c.png" -> "c").
std::string file_stem(const std::string& path);

// Text for JSON: s with every byte that is not part of valid UTF-8 replaced by U+FFFD (file names on
// POSIX are bytes; a JSON writer must not fail on them after the work is done).
std::string valid_utf8(const std::string& s);
bool is_valid_utf8(const std::string& s);
// Bytes as lower-case hex ("ab" -> "6162") and back (Error for odd length or a non-hex digit).
std::string hex_bytes(const std::string& s);
std::string from_hex(const std::string& hex);
// Standard base64 (RFC 4648, with '=' padding).
std::string base64_encode(const std::vector<uint8_t>& bytes);

// Monotonic seconds since an arbitrary origin.
double now_seconds();
// The median of a sample (the mean of the middle two for an even count); the benchmarks' statistic.
// Throws Error for an empty sample.
double median(std::vector<double> v);
// CPU seconds used so far by the whole process / by the calling thread (robust timings on a busy machine).
double process_cpu_seconds();
double thread_cpu_seconds();

// A single-line progress indicator on stderr: "label  123/456  27%  12.3 it/s  ETA 0:42  <extra>".
// Redraws in place when stderr is a terminal, otherwise prints at most every `min_interval_s` seconds.
// Silent when quiet is true.
class Progress {
 public:
  Progress(std::string label, int64_t total, bool quiet = false, double min_interval_s = 5.0);
  // Advances by n and redraws if due. extra is appended to the line (e.g. "loss 0.123").
  void step(int64_t n = 1, const std::string& extra = "");
  // Prints the final line with a newline (idempotent).
  void finish(const std::string& extra = "");
  int64_t done() const { return done_; }
  ~Progress();

 private:
  void draw(bool final_line, const std::string& extra);
  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  bool quiet_;
  bool tty_;
  bool finished_ = false;
  double min_interval_s_;
  double start_;
  double last_draw_ = -1e30;
};

// A shape or list of sizes as "[a, b, c]" (error messages; pass t.sizes().vec() for a tensor).
std::string shape_str(const std::vector<int64_t>& dims);

// Formats seconds as H:MM:SS or M:SS.
std::string format_duration(double seconds);

}  // namespace diffnet
