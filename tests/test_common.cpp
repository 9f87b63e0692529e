#include <filesystem>
#include <fstream>

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
}

TEST(Common, CliVersion) {
  auto r = testutil::run_cli("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("diffnet"), std::string::npos);
}

TEST(Common, CliUnknownCommandExits2) {
  auto r = testutil::run_cli("no-such-command");
  EXPECT_EQ(r.exit_code, 2);
}
