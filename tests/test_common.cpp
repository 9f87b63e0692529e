#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <mutex>
#include <set>

#include <ATen/Parallel.h>

#include "diffnet/common.h"
#include "testing.h"

using namespace diffnet;

TEST(Common, AtomicWriteRoundTripAndReplace) {
  std::string dir = testutil::temp_dir("common");
  std::string path = dir + "/f.bin";
  write_file_atomic(path, std::vector<uint8_t>{1, 2, 3});
  write_file_atomic(path, std::vector<uint8_t>{4, 5});
  auto bytes = read_file(path);
  ASSERT_EQ(bytes.size(), 2u);
  EXPECT_EQ(bytes[0], 4);
  EXPECT_EQ(bytes[1], 5);
  // No temp files left behind.
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++n;
  EXPECT_EQ(n, 1);
}

TEST(Common, AtomicFileInPiecesLeavesTheOldFileUntilCommit) {
  const std::string dir = testutil::temp_dir("common-pieces"), path = dir + "/f.txt";
  write_file_atomic(path, std::vector<uint8_t>{'o', 'l', 'd'});
  auto text = [&] {
    auto b = read_file(path);
    return std::string(b.begin(), b.end());
  };
  {
    AtomicFile f(path);
    f.write("new ");
    EXPECT_EQ(text(), "old");
    EXPECT_TRUE(std::filesystem::exists(f.temp_path()));
  }  // not committed: the temp file goes, the old file stays
  EXPECT_EQ(text(), "old");
  {
    AtomicFile f(path);
    f.write("new ");
    f.write("text");
    f.commit();
    EXPECT_THROW(f.write("more"), Error);
  }
  EXPECT_EQ(text(), "new text");
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++n;
  EXPECT_EQ(n, 1);
  EXPECT_THROW(AtomicFile(dir + "/missing/f.txt"), Error);
}

TEST(Common, Base64KnownVectors) {
  auto enc = [](const std::string& s) { return base64_encode(std::vector<uint8_t>(s.begin(), s.end())); };
  EXPECT_EQ(enc(""), "");
  EXPECT_EQ(enc("f"), "Zg==");
  EXPECT_EQ(enc("fo"), "Zm8=");
  EXPECT_EQ(enc("foo"), "Zm9v");
  EXPECT_EQ(enc("foob"), "Zm9vYg==");
  EXPECT_EQ(enc("fooba"), "Zm9vYmE=");
  EXPECT_EQ(enc("foobar"), "Zm9vYmFy");
}

TEST(Common, MedianOfOddAndEvenCounts) {
  EXPECT_DOUBLE_EQ(median({5.0}), 5.0);
  EXPECT_DOUBLE_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 10.0}), 3.5);  // middle two of 1 3 4 10, not the upper one
  EXPECT_DOUBLE_EQ(median({2.0, 2.0, 9.0, -1.0, 7.0, 0.5}), 2.0);
  EXPECT_THROW(median({}), Error);
}

TEST(Common, TempDirIsPrivateFreshAndRemovedWithItsFiles) {
  std::string kept;
  {
    const TempDir a("diffnet-test"), b("diffnet-test");
    kept = a.path();
    EXPECT_NE(a.path(), b.path());
    EXPECT_EQ(std::filesystem::path(a.path()).parent_path(), std::filesystem::temp_directory_path());
    EXPECT_EQ(std::filesystem::path(a.path()).filename().string().rfind("diffnet-test-", 0), 0u);
    ASSERT_TRUE(std::filesystem::is_directory(a.path()));
    EXPECT_EQ(std::filesystem::status(a.path()).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_all);
    std::filesystem::create_directories(a.path() + "/sub");
    std::ofstream(a.path() + "/sub/f.txt") << "x";
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
}

TEST(Common, StaleTempFilesOfDeadWritersAreRemoved) {
  const std::string dir = testutil::temp_dir("common-stale");
  // A pid that no longer runs: a child that exited and was reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const std::string dead = std::to_string(child), mine = std::to_string(::getpid());
  const std::vector<std::string> names = {"last.safetensors.tmp." + dead, "log.jsonl.tmp." + dead, "a.tmp." + mine,
                                         "b.tmp.1", "c.tmp.abc", "keep.safetensors"};
  for (const std::string& name : names)
    std::ofstream(dir + "/" + name) << "x";
  EXPECT_EQ(remove_stale_temp_files(dir), 2);
  std::set<std::string> left;
  for (auto& e : std::filesystem::directory_iterator(dir)) left.insert(e.path().filename().string());
  // Ours, pid 1's (alive) and names that are not "<name>.tmp.<pid>" stay.
  EXPECT_EQ(left, (std::set<std::string>{"a.tmp." + mine, "b.tmp.1", "c.tmp.abc", "keep.safetensors"}));
  EXPECT_EQ(remove_stale_temp_files(dir + "/missing"), 0);
}

TEST(Common, AutoThreadsLeaveTheCoresOthersUse) {
  const int usable = usable_cores();
  ASSERT_GE(usable, 1);
  EXPECT_LE(auto_threads(), usable);
  EXPECT_GE(auto_threads(), 1);
  // As many CPU-bound processes as usable cores: only one thread is left to us (the floor). Spinning
  // children (not threads of ours) so that they count as other processes.
  std::vector<pid_t> spinners;
  for (int i = 0; i < usable; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      volatile uint64_t x = 0;
      while (std::chrono::steady_clock::now() < end) x = x + 1;
      ::_exit(0);
    }
    ASSERT_GT(pid, 0);
    spinners.push_back(pid);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const bool restricted = usable < static_cast<int>(std::thread::hardware_concurrency());
  const int busy = auto_threads();
  for (pid_t pid : spinners) ::kill(pid, SIGKILL), ::waitpid(pid, nullptr, 0);
  if (restricted) EXPECT_EQ(busy, usable) << "inside a CPU restriction only the restriction counts";
  else EXPECT_EQ(busy, 1);
  // An explicit count is kept and never refreshed.
  EXPECT_EQ(init_runtime(1), 1);
  EXPECT_FALSE(threads_are_auto());
  EXPECT_EQ(refresh_threads(), 1);
  init_runtime(0);  // back to what the other tests run with
}

// A thread's own count holds in its parallel regions (even with the setting made before its first ATen op,
// which applies the process's count lazily), and the process's count is left alone.
TEST(Common, ThisThreadThreadsAppliesToThatThreadOnly) {
  const int process = at::get_num_threads();
  auto thread_ids_of_a_parallel_loop = [] {
    std::mutex m;
    std::set<int> ids;
    at::parallel_for(0, 256, 1, [&](int64_t, int64_t) {
      std::lock_guard<std::mutex> lock(m);
      ids.insert(at::get_thread_num());
    });
    return ids.size();
  };
  size_t ids_one = 0, ids_default = 0;
  int reported_one = 0;
  std::thread([&] {
    set_this_thread_threads(1);
    ids_one = thread_ids_of_a_parallel_loop();
    reported_one = at::get_num_threads();
  }).join();
  std::thread([&] { ids_default = thread_ids_of_a_parallel_loop(); }).join();
  EXPECT_EQ(ids_one, 1u);
  EXPECT_EQ(reported_one, 1);
  EXPECT_EQ(at::get_num_threads(), process);
  // A thread without the setting runs the process's count (so the test above could fail).
  if (process > 1) {
    EXPECT_GT(ids_default, 1u);
  }
}

TEST(Common, Utf8ValidationAndHex) {
  // Hand-made cases (RFC 3629): ASCII, 2/3/4-byte forms valid; stray continuation, truncated sequence,
  // overlong "/", a UTF-16 surrogate and a code point above U+10FFFF invalid.
  EXPECT_TRUE(is_valid_utf8("plain.jpg"));
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x93\x84"));
  for (const std::string bad : {"\x80", "a\xC3", "\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xFF"})
    EXPECT_FALSE(is_valid_utf8(bad)) << hex_bytes(bad);
  EXPECT_EQ(valid_utf8("a\xFF" "b.jpg"), "a\xEF\xBF\xBD" "b.jpg");
  EXPECT_EQ(valid_utf8("\xC3\xA9\xC3"), "\xC3\xA9\xEF\xBF\xBD");
  EXPECT_EQ(valid_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(hex_bytes(std::string("a\xFF\x00", 3)), "61ff00");
  EXPECT_EQ(from_hex("61FF00"), std::string("a\xFF\x00", 3));
  EXPECT_THROW(from_hex("6"), Error);
  EXPECT_THROW(from_hex("zz"), Error);
}

TEST(Common, ReadErrorsNameTheFile) {
  try {
    read_file("/nonexistent/x.jpg");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.jpg"), std::string::npos);
  }
}

TEST(Common, PathHelpers) {
  EXPECT_EQ(file_extension("a/b/C.JPG"), ".jpg");
  EXPECT_EQ(file_extension("a/b/c"), "");
  EXPECT_EQ(file_stem("a/b/c.prob.png"), "c.prob");
  EXPECT_EQ(format_duration(3725), "1:02:05");
  EXPECT_EQ(format_duration(65), "1:05");
  EXPECT_EQ(shape_str({}), "[]");
  EXPECT_EQ(shape_str({2, 64, 7}), "[2, 64, 7]");
}

TEST(Common, CliVersion) {
  auto r = testutil::run_cli("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("diffnet 0."), std::string::npos) << r.out;
  // A build-tree binary has no <prefix>/share/diffnet beside it: the source tree's weights.
  EXPECT_NE(r.out.find(std::string("default weights: ") + DIFFNET_SOURCE_DIR + "/weights/diffnet-atto.safetensors"),
            std::string::npos) << r.out;
}

TEST(Common, CliUnknownCommandExits2) {
  auto r = testutil::run_cli("no-such-command");
  EXPECT_EQ(r.exit_code, 2);
}
