// `diffnet inspect`: text and JSON output, --dump-dct from the file and from pixels, errors (exit 2).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

#include "diffnet/common.h"
#include "diffnet/dct.h"
#include "diffnet/image_io.h"
#include "diffnet/safetensors.h"
#include "test_io_util.h"
#include "testing.h"

using namespace diffnet;

namespace {
std::string io(const std::string& f) { return "'" + testutil::data_path("io/" + f) + "'"; }
}  // namespace

TEST(IoCli, InspectText) {
  auto r = testutil::run_cli("inspect " + io("small_prog.jpg"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("jpeg 61x45"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("progressive"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4:2:0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("quality 80 "), std::string::npos) << r.out;
  // Row 0 of the q80 table: 6 4 4 6 10 16 20 24.
  EXPECT_NE(r.out.find("  6   4   4   6  10  16  20  24"), std::string::npos) << r.out;
}

TEST(IoCli, InspectJsonOneObjectPerLine) {
  auto r = testutil::run_cli("inspect --json " + io("small_444.jpg") + " " + io("la16.png") + " " + io("small_gray.jpg"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<nlohmann::json> objs;
  while (std::getline(lines, line)) objs.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(objs.size(), 3u);
  EXPECT_EQ(objs[0]["subsampling"], "4:4:4");
  EXPECT_EQ(objs[0]["quality_estimate"], 92);
  EXPECT_EQ(objs[0]["quality_exact"], true);
  const at::Tensor q92 = ijg_luma_table(92);
  EXPECT_EQ(objs[0]["luma_qtable"].get<std::vector<int64_t>>(),
            std::vector<int64_t>(q92.data_ptr<int64_t>(), q92.data_ptr<int64_t>() + 64));
  EXPECT_EQ(objs[1]["format"], "png");
  EXPECT_EQ(objs[1]["color_space"], "gray+alpha");
  EXPECT_EQ(objs[1]["bit_depth"], 16);
  EXPECT_EQ(objs[1]["quality_estimate"], -1);
  EXPECT_EQ(objs[2]["color_space"], "gray");
  EXPECT_EQ(objs[2]["width"], 61);
}

TEST(IoCli, DumpDctFromFileAndPixels) {
  const std::string dir = testutil::temp_dir("io-cli");
  const std::string jpg = testutil::data_path("io/doc_q90_444.jpg");
  auto r = testutil::run_cli("inspect --dump-dct '" + dir + "/f.safetensors' '" + jpg + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  SafeTensors f = load_safetensors(dir + "/f.safetensors");
  JpegCoefficients c = read_jpeg_coefficients(jpg);
  EXPECT_TRUE(at::equal(f.tensors.at("dct"), c.coef.abs().clamp_max(20).to(at::kByte)));
  EXPECT_TRUE(at::equal(f.tensors.at("qt"), ijg_luma_table(90)));
  EXPECT_EQ(f.metadata.at("source"), "file");

  r = testutil::run_cli("inspect --dct-source pixels --dump-dct '" + dir + "/p.safetensors' '" + jpg + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  SafeTensors p = load_safetensors(dir + "/p.safetensors");
  EXPECT_TRUE(at::equal(p.tensors.at("qt"), ijg_luma_table(90)));
  EXPECT_GE(p.tensors.at("dct").eq(f.tensors.at("dct")).to(at::kDouble).mean().item<double>(), 0.99);

  // PNG, not a multiple of 8 (61x45): padded with white to 64x48, all-ones table.
  const std::string png = testutil::data_path("io/small.png");
  r = testutil::run_cli("inspect --dump-dct '" + dir + "/s.safetensors' '" + png + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  SafeTensors s = load_safetensors(dir + "/s.safetensors");
  at::Tensor padded = at::full({48, 64, 3}, 255, at::kByte);
  padded.narrow(0, 0, 45).narrow(1, 0, 61).copy_(decode_image(png));
  EXPECT_TRUE(at::equal(s.tensors.at("dct"), pixel_dct(padded, ones_table())));
  EXPECT_TRUE(at::equal(s.tensors.at("qt"), ones_table()));
  EXPECT_EQ(s.metadata.at("width"), "61");
}

TEST(IoCli, ErrorsExitTwoWithOneLine) {
  const std::string dir = testutil::temp_dir("io-cli");
  auto r = testutil::run_cli("inspect --dump-dct '" + dir + "/x.safetensors' " + io("small.png") + " " + io("small_444.jpg"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("exactly one input file"), std::string::npos) << r.err;

  r = testutil::run_cli("inspect --dct-source file --dump-dct '" + dir + "/x.safetensors' " + io("small.png"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("has no DCT coefficients"), std::string::npos) << r.err;

  r = testutil::run_cli("inspect --dump-dct '" + dir + "/x.safetensors' " + io("cmyk.jpg"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cmyk.jpg: JPEG: ycck colour space is not supported"), std::string::npos) << r.err;

  r = testutil::run_cli("inspect --max-pixels 1000 " + io("small.png"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("over the limit"), std::string::npos) << r.err;

  const std::string empty = testutil::write_temp_bytes("io-cli", "empty.jpg", {});
  r = testutil::run_cli("inspect '" + empty + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "error: " + empty + ": empty file\n");

  auto trunc = read_file(testutil::data_path("io/small_420.jpg"));
  trunc.resize(trunc.size() / 2);
  const std::string t = testutil::write_temp_bytes("io-cli", "trunc.jpg", trunc);
  r = testutil::run_cli("inspect --dump-dct '" + dir + "/t.safetensors' '" + t + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("trunc.jpg: JPEG: Premature end of JPEG file"), std::string::npos) << r.err;

  // Several files: the good ones are reported, each bad one gets its error line, exit 2.
  r = testutil::run_cli("inspect --json " + io("small.png") + " '" + empty + "' " + io("small_444.jpg"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}
