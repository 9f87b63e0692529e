// Tests of the data module: dataset listing (folders, lists, LMDB written with liblmdb directly),
// validation errors, image ops against hand-computed / ATen references, crops, JPEG pass counts,
// determinism of samples and of the multi-threaded loader, source mixing.
#include <ATen/Parallel.h>
#include <lmdb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "data/image_ops.h"
#include "diffnet/common.h"
#include "diffnet/data.h"
#include "diffnet/dataset.h"
#include "diffnet/dct.h"
#include "diffnet/image_io.h"
#include "testing.h"

namespace diffnet {
namespace {
namespace fs = std::filesystem;
using testutil::temp_dir;

// A document-like RGB image: light background, dark "text" bars, mild noise (deterministic in seed).
at::Tensor make_page(int64_t h, int64_t w, uint64_t seed) {
  Rng rng(seed);
  at::Tensor img = at::empty({h, w, 3}, at::kByte);
  uint8_t* p = img.data_ptr<uint8_t>();
  for (int64_t i = 0; i < h * w * 3; ++i) p[i] = static_cast<uint8_t>(235 + rng.randint(0, 15));
  for (int bar = 0; bar < h / 6; ++bar) {
    int64_t y = rng.randint(0, h - 4), x = rng.randint(0, std::max<int64_t>(0, w - 20));
    int64_t len = rng.randint(5, std::max<int64_t>(6, w / 3)), th = rng.randint(1, 3);
    uint8_t v = static_cast<uint8_t>(rng.randint(10, 80));
    for (int64_t yy = y; yy < std::min(h, y + th); ++yy)
      for (int64_t xx = x; xx < std::min(w, x + len); ++xx)
        for (int c = 0; c < 3; ++c) p[(yy * w + xx) * 3 + c] = v;
  }
  return img;
}

at::Tensor rect_mask(int64_t h, int64_t w, int64_t y0, int64_t x0, int64_t y1, int64_t x1, uint8_t v = 255) {
  at::Tensor m = at::zeros({h, w}, at::kByte);
  m.slice(0, y0, y1).slice(1, x0, x1).fill_(v);
  return m;
}

// images/ + masks/ folder: a.jpg (tampered), b.png (tampered), c.jpg (pristine, no mask).
std::string make_folder_dataset(int64_t h = 96, int64_t w = 128) {
  std::string dir = temp_dir("folder");
  fs::create_directories(dir + "/images");
  fs::create_directories(dir + "/masks");
  write_jpeg(dir + "/images/a.jpg", make_page(h, w, 1), 90);
  write_png(dir + "/masks/a.png", rect_mask(h, w, 10, 20, 40, 60));
  write_png(dir + "/images/b.png", make_page(h, w, 2));
  write_png(dir + "/masks/b.png", rect_mask(h, w, 50, 50, 70, 100));
  write_jpeg(dir + "/images/c.jpg", make_page(h, w, 3), 80);
  std::ofstream(dir + "/images/notes.txt") << "not an image";
  return dir;
}

TEST(Rng, DeterministicAndUniform) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next_u64(), b.next_u64());
  EXPECT_NE(Rng(42).next_u64(), c.next_u64());
  EXPECT_NE(Rng::derive(1, 2, 3).next_u64(), Rng::derive(1, 2, 4).next_u64());
  EXPECT_NE(Rng::derive(1, 2, 3).next_u64(), Rng::derive(1, 3, 3).next_u64());
  Rng r(7);
  const int n = 60000;
  std::vector<int> counts(6, 0);
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    int64_t k = r.randint(-2, 3);
    ASSERT_GE(k, -2);
    ASSERT_LE(k, 3);
    ++counts[k + 2];
    double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sq += u * u;
  }
  for (int c : counts) EXPECT_NEAR(c / double(n), 1.0 / 6, 0.01);
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(sq / n - (sum / n) * (sum / n), 1.0 / 12, 0.003);
}

TEST(Dataset, FolderListingAndLoading) {
  std::string dir = make_folder_dataset();
  auto items = list_dataset(dir);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].id, "a");
  EXPECT_EQ(items[1].id, "b");
  EXPECT_EQ(items[2].id, "c");
  EXPECT_FALSE(items[0].mask_path.empty());
  EXPECT_TRUE(items[2].mask_path.empty());
  validate_dataset(items);
  LoadedItem a = load_item(items[0]);
  EXPECT_TRUE(a.is_jpeg);
  EXPECT_EQ(a.rgb.sizes(), (std::vector<int64_t>{96, 128, 3}));
  EXPECT_EQ(a.mask.sum().item<int64_t>(), 30 * 40);  // 255 -> 1
  EXPECT_EQ(a.mask.max().item<int64_t>(), 1);
  LoadedItem c = load_item(items[2]);
  EXPECT_EQ(c.mask.sum().item<int64_t>(), 0);
  EXPECT_FALSE(load_item(items[1]).is_jpeg);
}

TEST(Dataset, ListFile) {
  std::string dir = make_folder_dataset();
  std::string list = dir + "/train.txt";
  std::ofstream(list) << "# comment\n\nimages/a.jpg masks/a.png\n" << dir << "/images/c.jpg\n"
                      << "images/b.png\tmasks/b.png\n";
  auto items = list_dataset(list);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].image_path, (fs::path(dir) / "images/a.jpg").string());
  EXPECT_EQ(items[0].mask_path, (fs::path(dir) / "masks/a.png").string());
  EXPECT_TRUE(items[1].mask_path.empty());
  EXPECT_EQ(items[2].id, "b");
  validate_dataset(items);
}

// Writes a DocTamper-layout LMDB with liblmdb's C API directly (independent of the reader).
void write_lmdb(const std::string& dir, const std::vector<std::pair<std::string, std::vector<uint8_t>>>& kv) {
  fs::create_directories(dir);
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_mapsize(env, 64 << 20), 0);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0644), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  for (const auto& [k, v] : kv) {
    MDB_val key{k.size(), const_cast<char*>(k.data())};
    MDB_val val{v.size(), const_cast<uint8_t*>(v.data())};
    ASSERT_EQ(mdb_put(txn, dbi, &key, &val, 0), 0);
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

std::vector<uint8_t> bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

TEST(Dataset, Lmdb) {
  std::string dir = temp_dir("lmdb") + "/db";
  auto img0 = encode_jpeg(make_page(64, 80, 5), 85), img1 = encode_png(make_page(64, 80, 6));
  auto lab0 = encode_png(rect_mask(64, 80, 8, 8, 24, 40));
  write_lmdb(dir, {{"num-samples", bytes_of("2")},
                   {"image-000000000", img0},
                   {"label-000000000", lab0},
                   {"image-000000001", img1}});
  auto items = list_dataset(dir);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].id, "image-000000000");
  EXPECT_EQ(items[1].lmdb_index, 1);
  validate_dataset(items);
  LoadedItem a = load_item(items[0]);
  EXPECT_TRUE(a.is_jpeg);
  EXPECT_EQ(a.image_bytes, img0);
  EXPECT_TRUE(a.rgb.equal(decode_image_bytes(img0, "x")));
  EXPECT_EQ(a.mask.sum().item<int64_t>(), 16 * 32);
  LoadedItem b = load_item(items[1]);
  EXPECT_FALSE(b.is_jpeg);
  EXPECT_EQ(b.mask.sum().item<int64_t>(), 0);  // no label record: pristine

  // 1-based store (some exports number from 1): detected.
  std::string dir1 = temp_dir("lmdb1") + "/db";
  write_lmdb(dir1, {{"num-samples", bytes_of("1")}, {"image-000000001", img1}});
  auto items1 = list_dataset(dir1);
  ASSERT_EQ(items1.size(), 1u);
  EXPECT_EQ(items1[0].lmdb_index, 1);
  EXPECT_TRUE(load_item(items1[0]).rgb.equal(decode_image_bytes(img1, "x")));

  // Bad stores name the LMDB.
  std::string bad = temp_dir("lmdb2") + "/db";
  write_lmdb(bad, {{"image-000000000", img1}});
  try {
    list_dataset(bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("num-samples"), std::string::npos);
  }
}

void expect_error_naming(const std::function<void()>& fn, const std::string& name) {
  try {
    fn();
    FAIL() << "expected an error naming " << name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(Dataset, ValidationErrorsNameTheFile) {
  std::string dir = make_folder_dataset();
  // Mask of the wrong size.
  write_png(dir + "/masks/b.png", rect_mask(50, 50, 0, 0, 10, 10));
  auto items = list_dataset(dir);
  expect_error_naming([&] { validate_dataset(items); }, dir + "/masks/b.png");
  expect_error_naming([&] { load_item(items[1]); }, dir + "/masks/b.png");
  // Unreadable image.
  write_png(dir + "/masks/b.png", rect_mask(96, 128, 0, 0, 10, 10));
  std::ofstream(dir + "/images/c.jpg", std::ios::trunc) << "garbage, not a jpeg";
  items = list_dataset(dir);
  expect_error_naming([&] { validate_dataset(items); }, dir + "/images/c.jpg");
  // Empty and missing datasets.
  std::string empty = temp_dir("empty");
  fs::create_directories(empty + "/images");
  expect_error_naming([&] { list_dataset(empty); }, empty);
  expect_error_naming([&] { list_dataset(empty + "/nope"); }, empty + "/nope");
  expect_error_naming([&] { list_dataset(temp_dir("plain")); }, "not a dataset");
  expect_error_naming([&] { open_source(dir + ":-1"); }, "weight");
}

TEST(ImageOps, ResizeHandComputed) {
  // A ramp 0,10,...,150 (16 px) halved with the antialiased triangle filter: interior taps are
  // (2x-1, 2x, 2x+1, 2x+2) with weights (1,3,3,1)/8, so out = 10*(2x + 0.5); at x = 0 the left tap is
  // outside and the weights are (3,3,1)/7.
  at::Tensor ramp = at::empty({1, 16}, at::kByte);
  for (int i = 0; i < 16; ++i) ramp[0][i] = 10 * i;
  at::Tensor out = data::resize(ramp, 1, 8, data::Filter::Bilinear);
  EXPECT_EQ(out[0][0].item<int>(), static_cast<int>(std::nearbyint(10.0 * (0 * 3 + 1 * 3 + 2 * 1) / 7.0)));
  for (int x = 1; x < 7; ++x) EXPECT_EQ(out[0][x].item<int>(), static_cast<int>(std::nearbyint(10.0 * (2 * x + 0.5))));
  // Constant images stay constant with every filter, up- and down-scaling.
  at::Tensor flat = at::full({20, 30, 3}, 77, at::kByte);
  for (auto f : {data::Filter::Nearest, data::Filter::Bilinear, data::Filter::Bicubic, data::Filter::Lanczos}) {
    EXPECT_TRUE(data::resize(flat, 41, 13, f).eq(77).all().item<bool>());
    EXPECT_TRUE(data::resize(flat, 7, 61, f).eq(77).all().item<bool>());
  }
  // Nearest 2x upscaling duplicates pixels.
  at::Tensor small = make_page(5, 7, 9);
  at::Tensor big = data::resize(small, 10, 14, data::Filter::Nearest);
  EXPECT_TRUE(big.slice(0, 0, 10, 2).slice(1, 0, 14, 2).equal(small));
  EXPECT_TRUE(big.slice(0, 1, 10, 2).slice(1, 1, 14, 2).equal(small));
}

TEST(ImageOps, GeometryAgainstAten) {
  at::Tensor sq = make_page(24, 24, 11);
  at::Tensor ccw = at::rot90(sq, 1, {0, 1}).contiguous();
  EXPECT_TRUE(data::rotate_quarter(sq, 1, 255).equal(ccw));
  EXPECT_TRUE(data::rotate_nearest(sq, 90.0, 255).equal(ccw));
  EXPECT_TRUE(data::rotate_quarter(sq, 3, 255).equal(at::rot90(sq, -1, {0, 1}).contiguous()));
  EXPECT_TRUE(data::rotate_quarter(sq, 2, 255).equal(at::rot90(sq, 2, {0, 1}).contiguous()));
  EXPECT_TRUE(data::rotate_nearest(sq, 0.0, 255).equal(sq));
  EXPECT_TRUE(data::flip_horizontal(sq).equal(sq.flip({1})));
  EXPECT_TRUE(data::flip_vertical(sq).equal(sq.flip({0})));
  // Non-square quarter turn: the rotated (W, H) picture is centred on an (H, W) canvas, white outside.
  at::Tensor tall = make_page(16, 8, 12);
  at::Tensor r = data::rotate_quarter(tall, 1, 255);
  ASSERT_EQ(r.sizes(), tall.sizes());
  at::Tensor rot = at::rot90(tall, 1, {0, 1});  // (8, 16)
  EXPECT_TRUE(r.slice(0, 4, 12).equal(rot.slice(1, 4, 12)));
  EXPECT_TRUE(r.slice(0, 0, 4).eq(255).all().item<bool>());
  EXPECT_TRUE(r.slice(0, 12, 16).eq(255).all().item<bool>());
  // Small rotation keeps the centre pixel and fills corners.
  at::Tensor rot5 = data::rotate_nearest(sq, 30.0, 255);
  EXPECT_TRUE(rot5[12][12].equal(sq[12][12]));
  EXPECT_TRUE(rot5[0][0].eq(255).all().item<bool>());
}

TEST(ImageOps, ColourAndBlurFloat64Reference) {
  at::Tensor img = make_page(12, 10, 13);
  auto ref_u8 = [](double v) { return static_cast<int>(std::min(255.0, std::max(0.0, std::nearbyint(v)))); };
  auto acc = img.accessor<uint8_t, 3>();
  at::Tensor b = data::adjust_brightness(img, 1.37), c = data::adjust_contrast(img, 0.6),
             s = data::adjust_saturation(img, 1.8);
  double mean = 0;
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 10; ++x)
      mean += (19595 * acc[y][x][0] + 38470 * acc[y][x][1] + 7471 * acc[y][x][2] + 32768) >> 16;
  mean = std::floor(mean / 120 + 0.5);
  for (int y = 0; y < 12; ++y)
    for (int x = 0; x < 10; ++x) {
      int l = (19595 * acc[y][x][0] + 38470 * acc[y][x][1] + 7471 * acc[y][x][2] + 32768) >> 16;
      for (int k = 0; k < 3; ++k) {
        double v = acc[y][x][k];
        EXPECT_EQ(b[y][x][k].item<int>(), ref_u8(1.37 * v));
        EXPECT_EQ(c[y][x][k].item<int>(), ref_u8(mean + 0.6 * (v - mean)));
        EXPECT_EQ(s[y][x][k].item<int>(), ref_u8(l + 1.8 * (v - l)));
      }
    }
  // Gaussian blur == reflect-padded float64 convolution with the normalised kernel (ATen conv2d).
  for (int k : {3, 5, 7}) {
    double sigma = 0.15 * k + 0.35;
    at::Tensor w1 = at::empty({k}, at::kDouble);
    for (int i = 0; i < k; ++i) w1[i] = std::exp(-0.5 * std::pow((i - (k - 1) / 2.0) / sigma, 2));
    w1 = w1 / w1.sum();
    at::Tensor w2 = (w1.unsqueeze(1) * w1.unsqueeze(0)).view({1, 1, k, k}).repeat({3, 1, 1, 1});
    at::Tensor x = img.permute({2, 0, 1}).unsqueeze(0).to(at::kDouble);
    at::Tensor ref = at::conv2d(at::reflection_pad2d(x, {k / 2, k / 2, k / 2, k / 2}), w2, at::Tensor(),
                                at::IntArrayRef{1, 1}, at::IntArrayRef{0, 0}, at::IntArrayRef{1, 1}, 3);
    ref = ref.squeeze(0).permute({1, 2, 0}).round().clamp(0, 255);
    at::Tensor got = data::gaussian_blur(img, k, sigma).to(at::kDouble);
    EXPECT_LE((got - ref).abs().max().item<double>(), 1.0);  // float32 intermediate: ties may round apart
    EXPECT_LE((got - ref).abs().mean().item<double>(), 0.02);
  }
}

TEST(ImageOps, Homography) {
  std::array<std::array<double, 2>, 4> src{{{0, 0}, {0, 64}, {64, 64}, {64, 0}}};
  std::array<std::array<double, 2>, 4> dst{{{7, 12}, {0, 64}, {64, 50}, {55, 0}}};
  auto h = data::homography_from_points(src, dst);
  for (int i = 0; i < 4; ++i) {
    double x = src[i][0], y = src[i][1], w = h[6] * x + h[7] * y + h[8];
    EXPECT_NEAR((h[0] * x + h[1] * y + h[2]) / w, dst[i][0], 1e-9);
    EXPECT_NEAR((h[3] * x + h[4] * y + h[5]) / w, dst[i][1], 1e-9);
  }
  at::Tensor img = make_page(16, 16, 14);
  EXPECT_TRUE(data::warp_perspective(img, {1, 0, 0, 0, 1, 0, 0, 0, 1}).equal(img.to(at::kFloat)));
  at::Tensor moved = data::warp_perspective(img, {1, 0, 2, 0, 1, 3, 0, 0, 1});  // shift by (x+2, y+3)
  EXPECT_TRUE(moved.slice(0, 3).slice(1, 2).equal(img.slice(0, 0, 13).slice(1, 0, 14).to(at::kFloat)));
  EXPECT_TRUE(moved.slice(0, 0, 3).eq(0).all().item<bool>());
}

TEST(Augment, CropOffsetsAlignedAndTamperAware) {
  AugmentConfig cfg;
  at::Tensor mask = rect_mask(300, 400, 200, 330, 210, 345, 1);  // 150 positives near a corner
  Rng rng(3);
  int with_pos = 0;
  const int n = 400;
  for (int i = 0; i < n; ++i) {
    auto yx = choose_crop(mask, 96, 128, cfg, rng);
    ASSERT_EQ(yx[0] % 8, 0);
    ASSERT_EQ(yx[1] % 8, 0);
    ASSERT_LE(yx[0] + 96, 300);
    ASSERT_LE(yx[1] + 128, 400);
    with_pos += mask.slice(0, yx[0], yx[0] + 96).slice(1, yx[1], yx[1] + 128).sum().item<int64_t>() >= 32;
  }
  // 75% tamper-aware (always succeeds thanks to the fallback) + uniform crops that happen to hit.
  EXPECT_GE(with_pos, n * 0.72);
  cfg.p_uniform_crop = 0;
  for (int i = 0; i < 50; ++i) {
    auto yx = choose_crop(mask, 96, 128, cfg, rng);
    EXPECT_GT(mask.slice(0, yx[0], yx[0] + 96).slice(1, yx[1], yx[1] + 128).sum().item<int64_t>(), 0);
  }
  // Uniform placement covers the aligned offsets.
  cfg.tamper_aware_crop = false;
  std::set<int64_t> ys;
  for (int i = 0; i < 400; ++i) ys.insert(choose_crop(mask, 96, 128, cfg, rng)[0]);
  EXPECT_EQ(ys.size(), static_cast<size_t>((300 - 96) / 8 + 1));
}

TEST(Augment, JpegPassDistribution) {
  AugmentConfig cfg;
  Rng rng(11);
  const int n = 40000;
  std::vector<int> c(4, 0);
  for (int i = 0; i < n; ++i) ++c[draw_jpeg_passes(cfg, rng)];
  // P(0) = .33, P(1) = .67 * (.33 + .67/3), P(2) = P(3) = .67 * .67 / 3.
  EXPECT_NEAR(c[0] / double(n), 0.33, 0.01);
  EXPECT_NEAR(c[1] / double(n), 0.67 * (0.33 + 0.67 / 3), 0.01);
  EXPECT_NEAR(c[2] / double(n), 0.67 * 0.67 / 3, 0.01);
  EXPECT_NEAR(c[3] / double(n), 0.67 * 0.67 / 3, 0.01);
}

TEST(Augment, SampleDeterminismAndInvariants) {
  std::string dir = make_folder_dataset(200, 240);
  auto items = list_dataset(dir);
  LoadedItem a = load_item(items[0]);
  AugmentConfig cfg;
  cfg.p_spatial = cfg.p_visual = cfg.p_flip = cfg.p_homography = 0.5;  // exercise every op
  int passes_seen = 0, ones_seen = 0, ops_seen = 0;
  for (uint64_t seed = 0; seed < 24; ++seed) {
    Rng r1(seed), r2(seed);
    TrainSample s1 = make_train_sample(a, 128, cfg, r1), s2 = make_train_sample(a, 128, cfg, r2);
    ASSERT_TRUE(s1.rgb.equal(s2.rgb));
    ASSERT_TRUE(s1.mask.equal(s2.mask));
    ASSERT_TRUE(s1.dct.equal(s2.dct));
    ASSERT_TRUE(s1.qt.equal(s2.qt));
    EXPECT_EQ(s1.rgb.sizes(), (std::vector<int64_t>{128, 128, 3}));
    EXPECT_EQ(s1.mask.sizes(), (std::vector<int64_t>{128, 128}));
    EXPECT_LE(s1.dct.max().item<int>(), 20);
    EXPECT_LE(s1.mask.max().item<int>(), 1);
    EXPECT_EQ(s1.label, s1.mask.any().item<bool>() ? 1 : 0);
    EXPECT_EQ(s1.crop_y % 8, 0);
    EXPECT_EQ(s1.crop_x % 8, 0);
    // The table is the last pass's IJG table, or all ones without a pass; the DCT follows the pixels.
    at::Tensor want_qt = s1.jpeg_passes > 0 ? ijg_luma_table(s1.last_quality) : ones_table();
    EXPECT_TRUE(s1.qt.equal(want_qt));
    EXPECT_TRUE(s1.dct.equal(pixel_dct(s1.rgb, s1.qt)));
    passes_seen += s1.jpeg_passes > 0;
    ones_seen += s1.jpeg_passes == 0;
    ops_seen += !s1.ops.empty();
  }
  EXPECT_GT(passes_seen, 0);
  EXPECT_GT(ones_seen, 0);
  EXPECT_GT(ops_seen, 10);
  Rng r3(100), r4(101);
  EXPECT_FALSE(make_train_sample(a, 128, cfg, r3).rgb.equal(make_train_sample(a, 128, cfg, r4).rgb));
}

TEST(Augment, DctFromFileWhenNotAugmented) {
  std::string dir = make_folder_dataset(200, 240);
  auto items = list_dataset(dir);
  LoadedItem a = load_item(items[0]);  // a.jpg, quality 90
  AugmentConfig cfg;
  cfg.enabled = false;
  JpegCoefficients jc = read_jpeg_coefficients(items[0].image_path);
  for (uint64_t seed = 0; seed < 6; ++seed) {
    Rng rng(seed);
    TrainSample s = make_train_sample(a, 128, cfg, rng);
    EXPECT_FALSE(s.augmented);
    EXPECT_EQ(s.jpeg_passes, 0);
    EXPECT_TRUE(s.qt.equal(ijg_luma_table(90)));
    at::Tensor want = jc.coef.slice(0, s.crop_y, s.crop_y + 128).slice(1, s.crop_x, s.crop_x + 128).abs().clamp_max(20);
    EXPECT_TRUE(s.dct.to(at::kLong).equal(want.to(at::kLong)));
    EXPECT_TRUE(s.rgb.equal(a.rgb.slice(0, s.crop_y, s.crop_y + 128).slice(1, s.crop_x, s.crop_x + 128)));
  }
  // Pixel path with the file's table (TDoc): close to the file's coefficients, not identical in general.
  cfg.dct_from_file = false;
  Rng rng(0);
  TrainSample p = make_train_sample(a, 128, cfg, rng);
  EXPECT_TRUE(p.qt.equal(ijg_luma_table(90)));
  EXPECT_TRUE(p.dct.equal(pixel_dct(p.rgb, p.qt)));
  // Small images are padded white at 8-aligned offsets; the mask padding is 0.
  LoadedItem small = load_item(list_dataset(make_folder_dataset(40, 52))[1]);
  Rng r2(0);
  TrainSample ps = make_train_sample(small, 64, cfg, r2);
  EXPECT_TRUE(ps.rgb.slice(0, 8, 48).slice(1, 0, 52).equal(small.rgb));  // top = floor8(12) = 8, left = floor8(6) = 0
  EXPECT_TRUE(ps.rgb.slice(0, 0, 8).eq(255).all().item<bool>());
  EXPECT_EQ(ps.mask.sum().item<int64_t>(), small.mask.sum().item<int64_t>());
}

TEST(Loader, MixtureSampler) {
  MixtureSampler s({5, 20}, {0.7, 0.3}, 9);
  std::vector<int> per_source(2, 0);
  std::vector<std::vector<int>> seen(2);
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    auto p = s.next();
    ASSERT_EQ(p.index, i);
    ++per_source[p.source];
    seen[p.source].push_back(static_cast<int>(p.item));
  }
  EXPECT_NEAR(per_source[0] / double(n), 0.7, 0.025);
  // Each epoch of a source is a permutation of its items.
  for (int src = 0; src < 2; ++src) {
    int size = src == 0 ? 5 : 20;
    for (size_t e = 0; (e + 1) * size <= seen[src].size(); ++e) {
      std::set<int> ep(seen[src].begin() + e * size, seen[src].begin() + (e + 1) * size);
      ASSERT_EQ(ep.size(), static_cast<size_t>(size));
    }
  }
  MixtureSampler t({5, 20}, {0.7, 0.3}, 9);
  t.seek(1234);
  MixtureSampler u({5, 20}, {0.7, 0.3}, 9);
  for (int i = 0; i < 1234; ++i) u.next();
  for (int i = 0; i < 50; ++i) {
    auto a = t.next(), b = u.next();
    ASSERT_EQ(a.source, b.source);
    ASSERT_EQ(a.item, b.item);
  }
}

TEST(Loader, ThreadedBatchesEqualSynchronousAndResume) {
  std::string dir = make_folder_dataset(160, 200);
  auto make = [&](int workers, uint64_t seed, int64_t start) {
    LoaderConfig cfg;
    cfg.size = 64;
    cfg.batch = 3;
    cfg.seed = seed;
    cfg.workers = workers;
    cfg.augment.p_spatial = cfg.augment.p_visual = 0.5;
    return std::make_unique<DataLoader>(std::vector<DataSource>{open_source(dir)}, cfg, start);
  };
  const int threads_before = at::get_num_threads();
  auto sync = make(0, 5, 0), threaded = make(2, 5, 0), other = make(2, 6, 0);
  std::vector<Batch> first;
  for (int i = 0; i < 4; ++i) {
    Batch a = sync->next_batch(), b = threaded->next_batch(), c = other->next_batch();
    ASSERT_EQ(a.rgb.sizes(), (std::vector<int64_t>{3, 64, 64, 3}));
    ASSERT_EQ(a.qt.sizes(), (std::vector<int64_t>{3, 64}));
    EXPECT_TRUE(a.rgb.equal(b.rgb));
    EXPECT_TRUE(a.dct.equal(b.dct));
    EXPECT_TRUE(a.mask.equal(b.mask));
    EXPECT_TRUE(a.qt.equal(b.qt));
    EXPECT_EQ(a.ids, b.ids);
    EXPECT_FALSE(a.rgb.equal(c.rgb));
    first.push_back(a);
  }
  EXPECT_EQ(threaded->position(), 12);
  EXPECT_EQ(at::get_num_threads(), threads_before);  // workers' single-thread setting is per thread
  auto resumed = make(2, 5, 6);  // from sample 6 = batch 2
  Batch r = resumed->next_batch();
  EXPECT_EQ(r.first_index, 6);
  EXPECT_TRUE(r.rgb.equal(first[2].rgb));
  EXPECT_TRUE(r.dct.equal(first[2].dct));
}

TEST(Loader, UnreadableSamplesAreReplacedAndCounted) {
  std::string dir = make_folder_dataset(96, 128);
  std::ofstream(dir + "/images/c.jpg", std::ios::trunc) << "truncated";
  LoaderConfig cfg;
  cfg.size = 64;
  cfg.batch = 6;
  cfg.workers = 1;
  cfg.quiet = true;
  DataLoader loader({open_source(dir)}, cfg);
  Batch b = loader.next_batch();
  EXPECT_EQ(b.rgb.size(0), 6);
  EXPECT_EQ(std::count(b.ids.begin(), b.ids.end(), "c"), 0);
  EXPECT_GE(loader.stats().bad_samples, 1);
}

TEST(Config, AugmentJson) {
  AugmentConfig c;
  c.prob_disable = 0.5;
  c.quality_min = 80;
  AugmentConfig d = augment_config_from_json(to_json(c));
  EXPECT_EQ(to_json(d), to_json(c));
  expect_error_naming([] { augment_config_from_json({{"p_spatal", 0.1}}); }, "p_spatal");
  expect_error_naming([] { augment_config_from_json({{"quality_min", "x"}}); }, "quality_min");
}

}  // namespace
}  // namespace diffnet
