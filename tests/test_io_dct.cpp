// DCT tables, luma, pixel-path DCT against a float64 textbook DCT-II, file-path vs pixel-path agreement.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <fstream>
#include <sstream>

#include "diffnet/common.h"
#include "diffnet/dct.h"
#include "diffnet/image_io.h"
#include "testing.h"

using namespace diffnet;

namespace {

// T.81 Annex K.1, typed from the standard (natural order).
const int kAnnexK[64] = {16, 11, 10, 16, 24,  40,  51,  61,  12, 12, 14, 19, 26,  58,  60,  55,
                         14, 13, 16, 24, 40,  57,  69,  56,  14, 17, 22, 29, 51,  87,  80,  62,
                         18, 22, 37, 56, 68,  109, 103, 77,  24, 35, 55, 64, 81,  104, 113, 92,
                         49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99};

// libjpeg's jpeg_quality_scaling + jpeg_add_quant_table(force_baseline), restated.
int64_t reference_entry(int i, int q) {
  double scale = q < 50 ? std::floor(5000.0 / q) : 200.0 - 2.0 * q;
  double v = std::floor((kAnnexK[i] * scale + 50.0) / 100.0);
  return static_cast<int64_t>(std::clamp(v, 1.0, 255.0));
}

// Textbook orthonormal 8x8 DCT-II of one block, float64, direct double sum.
void textbook_dct(const double x[8][8], double out[8][8]) {
  const double pi = std::acos(-1.0);
  for (int u = 0; u < 8; ++u)
    for (int v = 0; v < 8; ++v) {
      double s = 0;
      for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j)
          s += x[i][j] * std::cos((2 * i + 1) * u * pi / 16) * std::cos((2 * j + 1) * v * pi / 16);
      const double au = u == 0 ? 1 / std::sqrt(2.0) : 1.0, av = v == 0 ? 1 / std::sqrt(2.0) : 1.0;
      out[u][v] = 0.25 * au * av * s;
    }
}

// Round half to even via the FPU's default mode; values within 1e-9 of a tie are snapped to it.
int64_t reference_round(double v) {
  const double f = std::floor(v);
  if (std::fabs(v - f - 0.5) < 1e-9) v = f + 0.5;
  return static_cast<int64_t>(std::nearbyint(v));
}

// Reference pixel-path map: float luma formula check happens elsewhere; here L is computed as in docs/design.md §3.2.
at::Tensor reference_pixel_dct(const at::Tensor& rgb, const at::Tensor& qt) {
  const int64_t H = rgb.size(0), W = rgb.size(1);
  at::Tensor out = at::empty({H, W}, at::kByte);
  auto p = rgb.accessor<uint8_t, 3>();
  auto q = qt.accessor<int64_t, 1>();
  for (int64_t by = 0; by < H / 8; ++by)
    for (int64_t bx = 0; bx < W / 8; ++bx) {
      double x[8][8], X[8][8];
      for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) {
          const int64_t y = by * 8 + i, xx = bx * 8 + j;
          const int64_t L = (19595 * p[y][xx][0] + 38470 * p[y][xx][1] + 7471 * p[y][xx][2] + 32768) >> 16;
          x[i][j] = static_cast<double>(L) - 128.0;
        }
      textbook_dct(x, X);
      for (int u = 0; u < 8; ++u)
        for (int v = 0; v < 8; ++v) {
          int64_t r = std::abs(reference_round(X[u][v] / static_cast<double>(q[u * 8 + v])));
          out[by * 8 + u][bx * 8 + v] = static_cast<uint8_t>(std::min<int64_t>(r, 20));
        }
    }
  return out;
}

at::Tensor random_rgb(int64_t h, int64_t w, uint64_t seed) {
  at::manual_seed(seed);
  return at::randint(0, 256, {h, w, 3}, at::kByte);
}

}  // namespace

TEST(IoDct, IjgTablesMatchFormulaForEveryQuality) {
  for (int q = 1; q <= 100; ++q) {
    at::Tensor t = ijg_luma_table(q);
    ASSERT_EQ(t.scalar_type(), at::kLong);
    ASSERT_EQ(t.numel(), 64);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(t[i].item<int64_t>(), reference_entry(i, q)) << "q=" << q << " i=" << i;
  }
  EXPECT_EQ(ijg_luma_table(50)[0].item<int64_t>(), 16);  // quality 50 is Annex K itself
  EXPECT_TRUE(at::equal(ijg_luma_table(100), ones_table()));
  EXPECT_THROW(ijg_luma_table(0), Error);
  EXPECT_THROW(ijg_luma_table(101), Error);
}

TEST(IoDct, IjgTablesMatchCjpegFiles) {
  // tiny_q*.jpg were written by `cjpeg -quality q` (libjpeg-turbo-progs); tiny_tables.txt holds the
  // luma tables djpeg -verbose printed for them (unclamped: cjpeg writes 16-bit tables at q10).
  std::ifstream in(testutil::data_path("io/tiny_tables.txt"));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    int q;
    ss >> q;
    std::vector<int64_t> djpeg(64);
    for (auto& v : djpeg) ss >> v;
    ASSERT_TRUE(ss) << line;
    const std::string file = testutil::data_path("io/tiny_q" + std::to_string(q) + ".jpg");
    ImageInfo info = read_image_info(file);
    JpegCoefficients c = read_jpeg_coefficients(file);
    at::Tensor ours = ijg_luma_table(q);
    for (int i = 0; i < 64; ++i) {
      const int64_t expect = std::min<int64_t>(djpeg[i], 255);
      EXPECT_EQ(ours[i].item<int64_t>(), expect) << "q=" << q << " i=" << i;
      EXPECT_EQ(info.luma_qtable[i], expect) << "q=" << q << " i=" << i;
      EXPECT_EQ(c.qt[i].item<int64_t>(), expect) << "q=" << q << " i=" << i;
    }
    EXPECT_EQ(info.quality_estimate, q);
    EXPECT_TRUE(info.quality_exact);
    ++n;
  }
  EXPECT_EQ(n, 4);
}

TEST(IoDct, EncoderTablesAreIjgTablesAndQualityRoundTrips) {
  at::Tensor img = random_rgb(16, 16, 3);
  for (int q = 1; q <= 100; ++q) {
    JpegCoefficients c = read_jpeg_coefficients_bytes(encode_jpeg(img, q), "mem");
    ASSERT_TRUE(at::equal(c.qt, ijg_luma_table(q))) << "q=" << q;
    bool exact = false;
    ASSERT_EQ(estimate_jpeg_quality(c.qt, &exact), q);
    ASSERT_TRUE(exact);
  }
}

TEST(IoDct, QualityEstimateOfNonIjgTable) {
  at::Tensor t = ijg_luma_table(83).clone();
  t[5] += 1;  // no longer an IJG table, still nearest to 83
  bool exact = true;
  EXPECT_EQ(estimate_jpeg_quality(t, &exact), 83);
  EXPECT_FALSE(exact);
  EXPECT_THROW(estimate_jpeg_quality(at::ones({63}, at::kLong)), Error);
}

TEST(IoDct, LumaHandValues) {
  at::Tensor px = at::tensor({255, 255, 255, 255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 10, 200, 30}, at::kByte)
                      .view({1, 6, 3});
  at::Tensor l = rgb_to_luma(px);
  // (19595*R + 38470*G + 7471*B + 32768) >> 16, evaluated by hand.
  const int expect[5] = {255, 76, 150, 29, 0};
  EXPECT_EQ(l[0][0].item<int>(), expect[0]);
  EXPECT_EQ(l[0][1].item<int>(), expect[1]);
  EXPECT_EQ(l[0][2].item<int>(), expect[2]);
  EXPECT_EQ(l[0][3].item<int>(), expect[3]);
  EXPECT_EQ(l[0][4].item<int>(), expect[4]);
  // 19595*10 + 38470*200 + 7471*30 + 32768 = 8146848; 8146848 / 65536 = 124.31 -> 124.
  EXPECT_EQ(l[0][5].item<int>(), 124);
  // Against the real-valued BT.601 weights: within 1 everywhere.
  at::Tensor rgb = random_rgb(64, 64, 7);
  at::Tensor f = rgb.to(at::kDouble);
  at::Tensor ref = (f.select(2, 0) * 0.299 + f.select(2, 1) * 0.587 + f.select(2, 2) * 0.114);
  EXPECT_LE(testutil::max_abs_diff(rgb_to_luma(rgb), ref), 1.0);
}

TEST(IoDct, PixelDctMatchesTextbookDct) {
  at::Tensor doc = decode_image(testutil::data_path("io/doc.png"));
  at::Tensor rnd = random_rgb(40, 56, 11);
  at::manual_seed(5);
  at::Tensor qrand = at::randint(1, 31, {64}, at::kLong);
  for (const at::Tensor& img : {doc, rnd})
    for (const at::Tensor& qt : {ones_table(), ijg_luma_table(90), ijg_luma_table(35), qrand}) {
      at::Tensor ours = pixel_dct(img, qt);
      at::Tensor ref = reference_pixel_dct(img, qt);
      ASSERT_EQ(ours.scalar_type(), at::kByte);
      ASSERT_EQ(ours.sizes(), ref.sizes());
      EXPECT_TRUE(at::equal(ours, ref)) << "mismatches: " << (ours != ref).sum().item<int64_t>();
    }
  // Some coefficient must be non-trivial, so the comparison means something.
  EXPECT_GT(pixel_dct(doc, ijg_luma_table(90)).gt(0).sum().item<int64_t>(), 1000);
}

TEST(IoDct, PixelDctRoundsHalfToEven) {
  // Constant luma blocks: DC = 8 (L - 128), every AC is 0. With qt[0] = 16, DC/q = (L - 128) / 2.
  const int lumas[5] = {129, 131, 133, 127, 125};
  const int expect[5] = {0, 2, 2, 0, 2};  // 0.5->0, 1.5->2, 2.5->2, -0.5->0, -1.5->-2 (abs 2)
  at::Tensor qt = at::full({64}, 16, at::kLong);
  for (int k = 0; k < 5; ++k) {
    at::Tensor img = at::full({8, 8, 3}, lumas[k], at::kByte);  // gray: luma equals the value
    at::Tensor d = pixel_dct(img, qt);
    EXPECT_EQ(d[0][0].item<int>(), expect[k]) << "L=" << lumas[k];
    EXPECT_EQ(d.sum().item<int64_t>(), expect[k]) << "AC must be 0";
  }
  // White block, all-ones table: DC = 8*127 = 1016, clipped to 20.
  at::Tensor white = at::full({8, 16, 3}, 255, at::kByte);
  at::Tensor d = pixel_dct(white, ones_table());
  EXPECT_EQ(d[0][0].item<int>(), 20);
  EXPECT_EQ(d[0][8].item<int>(), 20);
  EXPECT_EQ(d.sum().item<int64_t>(), 40);
  // Gray (H, W) input equals the replicated RGB input.
  at::Tensor g = random_rgb(16, 24, 2).select(2, 0).contiguous();
  EXPECT_TRUE(at::equal(pixel_dct(g, ijg_luma_table(70)),
                        pixel_dct(g.unsqueeze(2).expand({16, 24, 3}).contiguous(), ijg_luma_table(70))));
  EXPECT_THROW(pixel_dct(at::zeros({12, 16, 3}, at::kByte), ones_table()), Error);
  EXPECT_THROW(pixel_dct(at::zeros({16, 16, 3}, at::kFloat), ones_table()), Error);
}

TEST(IoDct, ClipCoefficientsHandValues) {
  at::Tensor c = at::tensor({-25, -3, 0, 7, 20, 21}, at::kShort).view({2, 3});
  at::Tensor d = clip_coefficients(c, 3, 4);
  at::Tensor expect = at::tensor({20, 3, 0, 0, 7, 20, 20, 0, 0, 0, 0, 0}, at::kByte).view({3, 4});
  EXPECT_TRUE(at::equal(d, expect)) << d;
  EXPECT_TRUE(at::equal(clip_coefficients(c, 1, 2), at::tensor({20, 3}, at::kByte).view({1, 2})));
  // The int16 extremes (|-32768| does not fit an int16) clip like any other large value.
  at::Tensor ext = at::tensor({-32768, 32767, -32767, -21}, at::kShort).view({1, 4});
  EXPECT_TRUE(at::equal(clip_coefficients(ext, 1, 4), at::tensor({20, 20, 20, 20}, at::kByte).view({1, 4})));
}

// Unmodified 8-aligned JPEGs written by cjpeg: the coefficients from the file and the ones recomputed
// from the decoded pixels with the file's table agree on >= 99 % of clipped values (libjpeg's islow
// forward DCT and the pixel round trip differ slightly from the exact DCT).
TEST(IoDct, FilePathAndPixelPathAgree) {
  for (const char* name : {"io/doc_q90_444.jpg", "io/doc_q80_420.jpg"}) {
    const std::string file = testutil::data_path(name);
    JpegCoefficients c = read_jpeg_coefficients(file);
    ASSERT_EQ(c.coef.size(0), 192);
    ASSERT_EQ(c.coef.size(1), 256);
    at::Tensor from_file = clip_coefficients(c.coef, 192, 256);
    at::Tensor from_pixels = pixel_dct(decode_image(file), c.qt);
    const double agree = from_file.eq(from_pixels).to(at::kDouble).mean().item<double>();
    std::printf("[ info ] %s: file/pixel agreement %.4f %%\n", name, 100 * agree);
    EXPECT_GE(agree, 0.99) << name;
    EXPECT_GT(from_file.gt(0).sum().item<int64_t>(), 2000) << "the image must have non-trivial coefficients";
  }
}

// Measurement, printed: pixel_dct on a 1024x1024 RGB image (`test_io --gtest_filter=IoBench.*`).
// Wall time (median, min) per thread count, and the process CPU time per call (robust to a loaded machine).
TEST(IoBench, PixelDct1024) {
  at::Tensor img = random_rgb(1024, 1024, 1);
  at::Tensor qt = ijg_luma_table(90);
  at::Tensor ref_block = reference_pixel_dct(img.narrow(0, 0, 8).narrow(1, 0, 64).contiguous(), qt);
  const int threads = omp_get_max_threads();
  for (int t : {1, threads}) {
    omp_set_num_threads(t);
    at::Tensor out = pixel_dct(img, qt);  // warm-up
    std::vector<double> ms;
    const int reps = 15;
    const std::clock_t c0 = std::clock();
    for (int r = 0; r < reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      out = pixel_dct(img, qt);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    const double cpu_ms = 1000.0 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC / reps;
    std::sort(ms.begin(), ms.end());
    std::printf("[ info ] pixel_dct 1024x1024, %d thread(s): wall median %.2f ms, min %.2f ms; CPU %.2f ms/call\n", t,
                ms[reps / 2], ms[0], cpu_ms);
    EXPECT_TRUE(at::equal(out.narrow(0, 0, 8).narrow(1, 0, 64), ref_block));
  }
  omp_set_num_threads(threads);
}
