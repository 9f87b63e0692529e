// `diffnet synth` end to end: determinism, masks against pristine/, op frequencies, bad sources.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "diffnet/common.h"
#include "diffnet/image_io.h"
#include "synth/boxes.h"
#include "synth/layouts.h"
#include "synth/raster.h"
#include "testing.h"

using namespace diffnet;
namespace fs = std::filesystem;

namespace {

std::vector<nlohmann::json> read_manifest(const std::string& dir) {
  std::ifstream in(dir + "/manifest.jsonl");
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<std::string> files_under(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}

const char* kSmall = "--dpi 100 --crop 320 --quiet";

}  // namespace

TEST(SynthCli, SameSeedGivesByteIdenticalOutput) {
  std::string a = testutil::temp_dir("synth-a"), b = testutil::temp_dir("synth-b"), c = testutil::temp_dir("synth-c");
  std::string common = std::string(" --count 8 --keep-pristine --output-format mixed ") + kSmall;
  auto ra = testutil::run_cli("synth --out " + a + " --seed 5" + common);
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  // Different thread count: parallel generation must not change the bytes.
  auto rb = testutil::run_cli("-t 1 synth --out " + b + " --seed 5" + common);
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  auto rc = testutil::run_cli("synth --out " + c + " --seed 6" + common);
  ASSERT_EQ(rc.exit_code, 0) << rc.err;
  auto fa = files_under(a), fb = files_under(b);
  ASSERT_EQ(fa, fb);
  EXPECT_GE(fa.size(), 8u * 3 + 1);
  bool any_diff = false;
  for (auto& f : fa) {
    EXPECT_EQ(read_file(a + "/" + f), read_file(b + "/" + f)) << f;
    if (fs::exists(c + "/" + f)) any_diff |= read_file(a + "/" + f) != read_file(c + "/" + f);
  }
  EXPECT_TRUE(any_diff);
}

// --degrade-after-edit-prob 1: the print-scan look comes after the edits, the same look (same noise) on the
// pristine copy, so the pages differ only within the blur's reach (3 sigma <= 3 px) of the mask; no first
// compression; the look is really there (little pure white paper left).
TEST(SynthCli, DegradeAfterEditGivesTheEditsThePagesLook) {
  std::string out = testutil::temp_dir("synth-after");
  auto r = testutil::run_cli("synth --out " + out + " --seed 12 --count 8 --keep-pristine --output-format png " +
                             "--degrade-after-edit-prob 1 --print-scan-prob 0 --q1-prob 1 --pristine-prob 0 " +
                             "--ops text:1 --text-overlay-prob 1 --layouts receipt,invoice " + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto manifest = read_manifest(out);
  ASSERT_EQ(manifest.size(), 8u);
  int tampered = 0;
  for (auto& m : manifest) {
    EXPECT_TRUE(m["source"].value("print_scan_after_edit", false)) << m["id"];
    EXPECT_EQ(m["source"]["print_scan"]["angle_deg"].get<double>(), 0.0) << m["id"];
    for (auto& h : m["compression"]) EXPECT_NE(h.value("stage", ""), "before-edit") << m["id"];
    at::Tensor img = decode_image(out + "/" + m["image"].get<std::string>());
    at::Tensor pri = decode_image(out + "/" + m["pristine"].get<std::string>());
    at::Tensor mask = decode_mask(out + "/" + m["mask"].get<std::string>());
    at::Tensor white = (pri == 255).all(2).to(at::kFloat).mean();
    EXPECT_LT(white.item<double>(), 0.5) << m["id"] << ": the pristine page has no print-scan look";
    at::Tensor reach = at::max_pool2d((mask > 0).to(at::kFloat).unsqueeze(0), {7, 7}, {1, 1}, {3, 3})[0] > 0;
    at::Tensor diff = (img != pri).any(2);
    EXPECT_EQ((diff & ~reach).sum().item<int64_t>(), 0) << m["id"];
    if (m["tampered"].get<bool>()) {
      ++tampered;
      EXPECT_GT((diff & (mask > 0)).sum().item<int64_t>(), 0) << m["id"];
    }
  }
  EXPECT_GT(tampered, 4);
}

// Lossless output against pristine/: the differing pixels lie in the mask; unedited pages have
// empty masks and equal their pristine page; manifest fields are present.
TEST(SynthCli, MasksCoverChangedPixelsAndPristinePagesAreClean) {
  std::string out = testutil::temp_dir("synth-masks");
  auto r = testutil::run_cli("synth --out " + out + " --seed 11 --count 24 --keep-pristine --output-format png " +
                             "--q1-prob 0.5 --layouts receipt,invoice,payslip,statement,form,letter " + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto manifest = read_manifest(out);
  ASSERT_EQ(manifest.size(), 24u);
  int tampered = 0, pristine = 0;
  std::set<std::string> ops_seen;
  for (auto& m : manifest) {
    at::Tensor img = decode_image(out + "/" + m["image"].get<std::string>());
    at::Tensor pri = decode_image(out + "/" + m["pristine"].get<std::string>());
    at::Tensor mask = decode_mask(out + "/" + m["mask"].get<std::string>());
    ASSERT_EQ(img.sizes(), pri.sizes());
    ASSERT_EQ(mask.size(0), img.size(0));
    ASSERT_EQ(mask.size(1), img.size(1));
    EXPECT_TRUE(((mask == 0) | (mask == 255)).all().item<bool>());
    at::Tensor diff = (img != pri).any(2);
    int64_t changed = diff.sum().item<int64_t>();
    int64_t outside = (diff & (mask == 0)).sum().item<int64_t>();
    int64_t masked = (mask > 0).sum().item<int64_t>();
    EXPECT_EQ(masked, m["mask_pixels"].get<int64_t>());
    for (auto& f : {"source", "compression", "family", "ops", "seed"}) EXPECT_TRUE(m.contains(f)) << f;
    if (m["tampered"].get<bool>()) {
      ++tampered;
      EXPECT_GT(changed, 0) << m["id"];
      EXPECT_LE(outside, changed / 100) << m["id"] << ": " << outside << " of " << changed << " outside";
      for (auto& op : m["ops"]) ops_seen.insert(op["op"].get<std::string>());
    } else {
      ++pristine;
      EXPECT_EQ(masked, 0) << m["id"];
      EXPECT_EQ(changed, 0) << m["id"];
    }
  }
  EXPECT_GT(tampered, 10);
  EXPECT_GT(pristine, 0);
  EXPECT_GE(ops_seen.size(), 5u);
}

// First-choice op frequencies in a real run follow the configured weights (infeasible choices are
// recorded, so the sampler's draws can be counted exactly).
TEST(SynthCli, OpFrequenciesFollowWeights) {
  std::string out = testutil::temp_dir("synth-freq");
  auto r = testutil::run_cli("synth --out " + out + " --seed 3 --count 60 --pristine-prob 0 --max-edits 2 " +
                             "--ops copy-move:3,inpaint:1 --output-format png --q1-prob 0 --print-scan-prob 0 " + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int cm = 0, total = 0;
  for (auto& m : read_manifest(out))
    for (auto& op : m["ops"]) {
      std::string first = op.contains("infeasible_first") ? op["infeasible_first"][0].get<std::string>()
                                                           : op["op"].get<std::string>();
      cm += first == "copy-move";
      ++total;
      EXPECT_TRUE(op["op"] == "copy-move" || op["op"] == "inpaint");
    }
  ASSERT_GT(total, 60);
  double p = double(cm) / total, sd = std::sqrt(0.75 * 0.25 / total);
  EXPECT_NEAR(p, 0.75, 4 * sd) << cm << "/" << total;
}

TEST(SynthCli, BadSourcesAreSkippedAndCounted) {
  std::string src = testutil::temp_dir("synth-src");
  // One good page: a rendered receipt with its boxes in SROIE format (images/ + boxes/ layout).
  fs::create_directories(src + "/images");
  fs::create_directories(src + "/boxes");
  synth::Rng rng(1);
  auto page = synth::render_document(synth::LayoutKind::Receipt, synth::select_fonts({"mono"})[0], 150, rng);
  write_png(src + "/images/good.png", synth::to_tensor(page.image));
  std::string boxes;
  for (auto& w : page.words) {
    const auto& b = w.box;
    boxes += std::to_string(b.x0) + "," + std::to_string(b.y0) + "," + std::to_string(b.x1 - 1) + "," +
             std::to_string(b.y0) + "," + std::to_string(b.x1 - 1) + "," + std::to_string(b.y1 - 1) + "," +
             std::to_string(b.x0) + "," + std::to_string(b.y1 - 1) + "," + w.text + "\r\n";
  }
  write_file_atomic(src + "/boxes/good.txt", boxes.data(), boxes.size());
  // A second good page without a box file (words are detected).
  synth::Rng rng2(2);
  auto page2 = synth::render_document(synth::LayoutKind::Invoice, synth::select_fonts({"serif"})[0], 100, rng2);
  write_png(src + "/images/detect.png", synth::to_tensor(page2.image));
  // Bad ones: corrupt JPEG, tiny PNG, blank page (no text), empty file.
  std::vector<uint8_t> corrupt = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0, 1, 2, 3};
  write_file_atomic(src + "/images/corrupt.jpg", corrupt);
  write_png(src + "/images/tiny.png", at::full({20, 20, 3}, 255, at::kByte));
  write_png(src + "/images/blank.png", at::full({300, 200, 3}, 250, at::kByte));
  write_file_atomic(src + "/images/empty.jpg", std::vector<uint8_t>{});

  std::string out = testutil::temp_dir("synth-src-out");
  auto r = testutil::run_cli("synth --sources " + src + " --out " + out +
                             " --seed 4 --count 8 --output-format png --keep-pristine");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("skipped sources: 4"), std::string::npos) << r.out;
  for (auto name : {"corrupt.jpg", "tiny.png", "blank.png", "empty.jpg"})
    EXPECT_NE(r.err.find(name), std::string::npos) << name << "\n" << r.err;
  auto manifest = read_manifest(out);
  ASSERT_EQ(manifest.size(), 8u);
  std::set<std::string> used, boxes_kind;
  for (auto& m : manifest) {
    used.insert(fs::path(m["source"]["path"].get<std::string>()).filename().string());
    boxes_kind.insert(m["source"]["boxes"].get<std::string>());
  }
  EXPECT_EQ(used, (std::set<std::string>{"good.png", "detect.png"}));
  EXPECT_EQ(boxes_kind, (std::set<std::string>{"file", "detected"}));

  // Nothing usable at all: a one-line error, exit code 2.
  std::string bad_only = testutil::temp_dir("synth-bad");
  write_file_atomic(bad_only + "/x.jpg", corrupt);
  auto r2 = testutil::run_cli("synth --sources " + bad_only + " --out " + out + "2 --count 2 --quiet");
  EXPECT_EQ(r2.exit_code, 2);
  EXPECT_NE(r2.err.find("no usable source"), std::string::npos) << r2.err;
}

TEST(SynthCli, BadOptionsAreOneLineErrors) {
  std::string out = testutil::temp_dir("synth-opt");
  for (const char* args : {"--ops blur", "--dpi abc", "--output-format gif", "--fonts nosuchfont", "--q1 90-80",
                           "--layouts poster", "--insert-overlay-prob 1.5", "--text-overlay-prob -0.1",
                           "--overlay-letter-prob 2"}) {
    auto r = testutil::run_cli(std::string("synth --out ") + out + " --count 1 " + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": " << r.err;
  }
}
