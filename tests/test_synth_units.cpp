// Synth building blocks: RNG, op sampler, box files, word detection, inpainting, resizing.
#include <cmath>
#include <map>

#include "diffnet/common.h"
#include "synth/boxes.h"
#include "synth/inpaint.h"
#include "synth/layouts.h"
#include "synth/ops.h"
#include "synth/raster.h"
#include "synth/rng.h"
#include "testing.h"

using namespace diffnet;
using namespace diffnet::synth;

TEST(SynthRng, SameSeedSameStreamAndUniformIntegers) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    differs |= x != c.next_u64();
  }
  EXPECT_TRUE(differs);
  // randint(0, 9): chi-square over 50k draws (9 dof; 99.9 % quantile 27.9).
  Rng r(7);
  std::vector<int> counts(10, 0);
  const int n = 50000;
  for (int i = 0; i < n; ++i) {
    int64_t v = r.randint(0, 9);
    ASSERT_GE(v, 0);
    ASSERT_LE(v, 9);
    counts[v]++;
  }
  double chi2 = 0;
  for (int k : counts) chi2 += (k - n / 10.0) * (k - n / 10.0) / (n / 10.0);
  EXPECT_LT(chi2, 27.9);
  // normal(): mean 0, variance 1.
  double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    double v = r.normal();
    s += v, s2 += v * v;
  }
  EXPECT_NEAR(s / n, 0.0, 0.03);
  EXPECT_NEAR(s2 / n, 1.0, 0.03);
  // Per-sample seeds are distinct.
  EXPECT_NE(derive_seed(1, 0), derive_seed(1, 1));
  EXPECT_NE(derive_seed(1, 5), derive_seed(2, 5));
}

TEST(SynthOps, SamplerFrequenciesMatchWeights) {
  OpWeights w = parse_op_weights("copy-move:3,splice:1,erase:1,inpaint:0.5,text:2,insert:0.5");
  double total = 8.0;
  Rng r(123);
  const int n = 40000;
  std::array<int, kNumOps> counts{};
  std::array<bool, kNumOps> all;
  all.fill(true);
  for (int i = 0; i < n; ++i) counts[sample_op(r, w, all)]++;
  for (int k = 0; k < kNumOps; ++k) {
    double p = w[k] / total, sd = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(counts[k] / double(n), p, 4 * sd) << op_name(static_cast<OpKind>(k));
  }
  // Disallowed ops are never drawn; the others renormalise.
  std::array<bool, kNumOps> some = all;
  some[0] = some[4] = false;
  std::array<int, kNumOps> c2{};
  for (int i = 0; i < n; ++i) c2[sample_op(r, w, some)]++;
  EXPECT_EQ(c2[0], 0);
  EXPECT_EQ(c2[4], 0);
  double p1 = 1.0 / 3.0;
  EXPECT_NEAR(c2[1] / double(n), p1, 4 * std::sqrt(p1 * (1 - p1) / n));
  std::array<bool, kNumOps> none{};
  EXPECT_EQ(sample_op(r, w, none), -1);
}

TEST(SynthOps, EditCountDistribution) {
  Rng r(9);
  const int n = 40000;
  std::map<int, int> c;
  for (int i = 0; i < n; ++i) c[sample_edit_count(r, 0.2, 5)]++;
  EXPECT_EQ(c.size(), 6u);
  EXPECT_NEAR(c[0] / double(n), 0.2, 4 * std::sqrt(0.2 * 0.8 / n));
  for (int k = 1; k <= 5; ++k) EXPECT_NEAR(c[k] / double(n), 0.16, 4 * std::sqrt(0.16 * 0.84 / n)) << k;
}

TEST(SynthOps, ParseOpWeights) {
  OpWeights w = parse_op_weights("copy-move,splice:2");
  EXPECT_DOUBLE_EQ(w[0], default_op_weights()[0]);
  EXPECT_DOUBLE_EQ(w[1], 2.0);
  for (int k = 2; k < kNumOps; ++k) EXPECT_EQ(w[k], 0.0);
  EXPECT_THROW(parse_op_weights("copy-move,blur"), Error);
  EXPECT_THROW(parse_op_weights("text:-1"), Error);
  EXPECT_THROW(parse_op_weights("text:0"), Error);
}

TEST(SynthBoxes, SroieWithCommasAndCrlf) {
  std::string text =
      "63,340,553,340,553,369,63,369,SYL ROASTED DELIGHTS SDN. BHD.\r\n"
      "74,406,541,406,541,432,74,432,75, JALAN SS 22/19, DAMANSARA JAYA, 47400 PJ,\r\n"
      "10,10,20,10,20,30,10,30,X\r\n";
  auto w = parse_boxes(text, "r.txt", 600, 420);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].box, (Box{63, 340, 554, 370}));
  EXPECT_EQ(w[0].text, "SYL ROASTED DELIGHTS SDN. BHD.");
  EXPECT_EQ(w[1].text, "75, JALAN SS 22/19, DAMANSARA JAYA, 47400 PJ,");
  EXPECT_EQ(w[1].box, (Box{74, 406, 542, 420}));  // clipped to the image height
}

TEST(SynthBoxes, DiffnetFormatRoundTripAndErrors) {
  std::vector<Word> words(2);
  words[0].box = {1, 2, 30, 14};
  words[0].text = "TOTAL, incl. VAT";
  words[1].box = {40, 2, 60, 14};
  std::string s = format_boxes(words);
  auto back = parse_boxes(s, "b.txt", 100, 100);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].box, words[0].box);
  EXPECT_EQ(back[0].text, "TOTAL, incl. VAT");
  EXPECT_EQ(back[1].text, "");
  // A header line forces the diffnet format even when the text starts with numbers.
  auto n = parse_boxes("# diffnet-boxes\n1,2,3,4,5,6,7,8,9\n", "n.txt", 100, 100);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].box, (Box{1, 2, 3, 4}));
  EXPECT_EQ(n[0].text, "5,6,7,8,9");
  try {
    parse_boxes("1,2,3,4,A\nfoo bar\n", "bad.txt", 100, 100);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.txt"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos);
  }
}

TEST(SynthBoxes, DetectedWordsMatchRenderedWords) {
  Rng r(5);
  FontFace f = select_fonts({"sans"})[0];
  RenderedPage p = render_document(LayoutKind::Invoice, f, 120, r);
  auto found = detect_words(p.image);
  ASSERT_GT(found.size(), 20u);
  int matched = 0, total = 0;
  for (auto& w : p.words) {
    if (w.box.h() < 8) continue;
    ++total;
    for (auto& d : found) {
      Box i{std::max(w.box.x0, d.box.x0), std::max(w.box.y0, d.box.y0), std::min(w.box.x1, d.box.x1),
            std::min(w.box.y1, d.box.y1)};
      double inter = double(i.area()), uni = double(w.box.area() + d.box.area()) - inter;
      if (inter / uni >= 0.5) {
        ++matched;
        break;
      }
    }
  }
  ASSERT_GT(total, 50);
  EXPECT_GE(matched, 0.7 * total) << matched << " of " << total;
}

// Inpainting must reproduce harmonic functions exactly (up to rounding): a linear ramp and the
// saddle x^2 - y^2, whose discrete Laplacian is zero too.
TEST(SynthInpaint, ReproducesHarmonicBackgrounds) {
  const int W = 160, H = 70;
  auto ramp = [](int x, int y, int k) { return 40.0 + (k + 1) * 0.3 * x + (3 - k) * 0.5 * y; };
  auto saddle = [](int x, int y, int k) { return 128.0 + k * 5 + ((x - 80.0) * (x - 80.0) - (y - 35.0) * (y - 35.0)) / 60.0; };
  for (int which = 0; which < 2; ++which) {
    Raster img(W, H, 3);
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x)
        for (int k = 0; k < 3; ++k) img.px(x, y)[k] = to_u8(which == 0 ? ramp(x, y, k) : saddle(x, y, k));
    Box box{30, 20, 130, 48};
    // "Text": dark strokes inside the box.
    for (int y = 24; y < 44; ++y)
      for (int x = 34; x < 126; ++x)
        if ((x / 3) % 3 == 0 || y % 7 == 0) img.px(x, y)[0] = img.px(x, y)[1] = img.px(x, y)[2] = 10;
    std::vector<uint8_t> unknown(size_t(box.w()) * box.h(), 1);
    Raster before = img;
    inpaint_diffusion(img, box, unknown);
    double sum = 0, mx = 0;
    int n = 0;
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x)
        for (int k = 0; k < 3; ++k) {
          bool inside = x >= box.x0 && x < box.x1 && y >= box.y0 && y < box.y1;
          if (!inside) {
            ASSERT_EQ(img.px(x, y)[k], before.px(x, y)[k]);
            continue;
          }
          double e = std::fabs(img.px(x, y)[k] - (which == 0 ? ramp(x, y, k) : saddle(x, y, k)));
          sum += e, mx = std::max(mx, e), ++n;
        }
    EXPECT_LT(sum / n, 1.0) << "case " << which;
    EXPECT_LE(mx, 3.0) << "case " << which;
  }
}

// Bilinear resize against a float64 reference with half-pixel centres and clamped edges.
TEST(SynthRaster, BilinearResizeMatchesReference) {
  Rng r(3);
  Raster src(13, 7, 3);
  for (auto& v : src.data) v = static_cast<uint8_t>(r.randint(0, 255));
  for (auto [w, h] : {std::pair<int, int>{29, 15}, {6, 4}, {13, 7}}) {
    Raster out = resize_bilinear(src, w, h);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int k = 0; k < 3; ++k) {
          double sx = std::max(0.0, (x + 0.5) * 13.0 / w - 0.5), sy = std::max(0.0, (y + 0.5) * 7.0 / h - 0.5);
          int x0 = std::min(12, int(sx)), y0 = std::min(6, int(sy));
          int x1 = std::min(12, x0 + 1), y1 = std::min(6, y0 + 1);
          double fx = sx - x0, fy = sy - y0;
          double v = (1 - fy) * ((1 - fx) * src.px(x0, y0)[k] + fx * src.px(x1, y0)[k]) +
                     fy * ((1 - fx) * src.px(x0, y1)[k] + fx * src.px(x1, y1)[k]);
          ASSERT_NEAR(out.px(x, y)[k], v, 0.51) << x << "," << y;
        }
  }
}
