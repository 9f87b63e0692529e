// Image decoding/encoding against files made by djpeg/cjpeg/ImageMagick (see tests/data/io/README.md).
#include <zlib.h>

#include <cstring>
#include <fstream>
#include <random>

#include "diffnet/common.h"
#include "diffnet/dct.h"
#include "diffnet/image_io.h"
#include "test_io_util.h"
#include "testing.h"

using namespace diffnet;
using testutil::exif_payload;
using testutil::expect_error;
using testutil::io;
using testutil::jpeg_with_orientation;
using testutil::read_pnm;

namespace {

std::vector<uint8_t> bytes_of(const std::string& path) { return read_file(path); }

void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
}

// Inserts an eXIf chunk right after IHDR (offset 33 = signature 8 + IHDR 25).
std::vector<uint8_t> png_with_orientation(const std::vector<uint8_t>& png, int orientation) {
  auto p = exif_payload(orientation);
  std::vector<uint8_t> chunk;
  put_be32(chunk, static_cast<uint32_t>(p.size()));
  const size_t type_at = chunk.size();
  chunk.insert(chunk.end(), {'e', 'X', 'I', 'f'});
  chunk.insert(chunk.end(), p.begin(), p.end());
  put_be32(chunk, static_cast<uint32_t>(crc32(0, chunk.data() + type_at, static_cast<uInt>(chunk.size() - type_at))));
  std::vector<uint8_t> out(png.size() + chunk.size());
  std::memcpy(out.data(), png.data(), 33);
  std::memcpy(out.data() + 33, chunk.data(), chunk.size());
  std::memcpy(out.data() + 33 + chunk.size(), png.data() + 33, png.size() - 33);
  return out;
}

// Displayed pixel (r, c) of a stored (H, W) image under EXIF orientation o (EXIF 2.3, tag 0x0112).
at::Tensor reference_orient(const at::Tensor& s, int o) {
  const int64_t H = s.size(0), W = s.size(1);
  const bool swap = o >= 5;
  at::Tensor d = at::empty({swap ? W : H, swap ? H : W, s.size(2)}, at::kByte);
  for (int64_t r = 0; r < d.size(0); ++r)
    for (int64_t c = 0; c < d.size(1); ++c) {
      int64_t y = r, x = c;
      switch (o) {
        case 2: x = W - 1 - c; break;
        case 3: y = H - 1 - r, x = W - 1 - c; break;
        case 4: y = H - 1 - r; break;
        case 5: y = c, x = r; break;
        case 6: y = H - 1 - c, x = r; break;
        case 7: y = H - 1 - c, x = W - 1 - r; break;
        case 8: y = c, x = W - 1 - r; break;
        default: break;
      }
      d[r][c] = s[y][x];
    }
  return d;
}

}  // namespace

TEST(IoImage, OrientImageMatchesTheExifDefinitionAndInverts) {
  at::Tensor s = at::arange(5 * 7, at::kByte).view({5, 7});
  for (int o = 1; o <= 8; ++o) {
    const at::Tensor shown = orient_image(s, o);
    EXPECT_TRUE(at::equal(shown, reference_orient(s.unsqueeze(2), o).squeeze(2))) << o;
    EXPECT_TRUE(at::equal(orient_image(shown, inverse_orientation(o)), s)) << o;
  }
  EXPECT_TRUE(at::equal(orient_image(s, 0), s));
  EXPECT_EQ(inverse_orientation(6), 8);
  EXPECT_EQ(inverse_orientation(8), 6);
  EXPECT_EQ(inverse_orientation(7), 7);
}

TEST(IoImage, JpegDecodeMatchesDjpeg) {
  for (const char* f : {"small_420", "small_444", "small_prog"}) {
    at::Tensor ours = decode_image(io(std::string(f) + ".jpg"));
    at::Tensor ref = read_pnm(io(std::string(f) + ".ppm"));
    ASSERT_EQ(ours.sizes(), ref.sizes()) << f;
    EXPECT_LE(testutil::max_abs_diff(ours, ref), 1.0) << f;
  }
  // Gray JPEG: replicated to RGB; as a mask, the gray values.
  at::Tensor g = read_pnm(io("small_gray.pgm"));
  at::Tensor rgb = decode_image(io("small_gray.jpg"));
  ASSERT_EQ(rgb.sizes(), (std::vector<int64_t>{45, 61, 3}));
  for (int k = 0; k < 3; ++k) EXPECT_LE(testutil::max_abs_diff(rgb.select(2, k), g), 1.0);
  EXPECT_LE(testutil::max_abs_diff(decode_mask(io("small_gray.jpg")), g), 1.0);
}

TEST(IoImage, JpegInfo) {
  ImageInfo a = read_image_info(io("small_420.jpg"));
  EXPECT_EQ(a.format, "jpeg");
  EXPECT_EQ(a.width, 61);
  EXPECT_EQ(a.height, 45);
  EXPECT_EQ(a.channels, 3);
  EXPECT_EQ(a.color_space, "ycbcr");
  EXPECT_EQ(a.subsampling, "4:2:0");
  EXPECT_FALSE(a.progressive);
  EXPECT_EQ(a.quality_estimate, 85);
  EXPECT_TRUE(a.quality_exact);
  EXPECT_EQ(read_image_info(io("small_444.jpg")).subsampling, "4:4:4");
  EXPECT_TRUE(read_image_info(io("small_prog.jpg")).progressive);
  ImageInfo g = read_image_info(io("small_gray.jpg"));
  EXPECT_EQ(g.color_space, "gray");
  EXPECT_EQ(g.channels, 1);
  EXPECT_EQ(g.subsampling, "");
  ImageInfo c = read_image_info(io("cmyk.jpg"));  // ImageMagick writes CMYK as YCCK (Adobe transform 2)
  EXPECT_EQ(c.color_space, "ycck");
  EXPECT_EQ(c.channels, 4);
}

TEST(IoImage, JpegCoefficientsGeometry) {
  // 61x45 -> 8x6 blocks of luma; the image size is kept separately.
  JpegCoefficients c = read_jpeg_coefficients(io("small_420.jpg"));
  EXPECT_EQ(c.coef.scalar_type(), at::kShort);
  EXPECT_EQ(c.coef.size(0), 48);
  EXPECT_EQ(c.coef.size(1), 64);
  EXPECT_EQ(c.width, 61);
  EXPECT_EQ(c.height, 45);
  EXPECT_TRUE(at::equal(c.qt, ijg_luma_table(85)));
  // Progressive and gray files give the same kind of data.
  EXPECT_EQ(read_jpeg_coefficients(io("small_prog.jpg")).coef.size(1), 64);
  EXPECT_EQ(read_jpeg_coefficients(io("small_gray.jpg")).coef.size(0), 48);
  // The DC of the top-left block predicts the block's mean luma: DC * q / 8 + 128.
  at::Tensor rgb = decode_image(io("small_444.jpg"));
  JpegCoefficients c4 = read_jpeg_coefficients(io("small_444.jpg"));
  const double mean = rgb_to_luma(rgb).narrow(0, 0, 8).narrow(1, 0, 8).to(at::kDouble).mean().item<double>();
  const double dc = c4.coef[0][0].item<double>() * c4.qt[0].item<double>() / 8 + 128;
  EXPECT_NEAR(dc, mean, 2.0);
}

TEST(IoImage, CmykRefused) {
  expect_error([] { decode_image(io("cmyk.jpg")); }, "cmyk.jpg", "ycck colour space is not supported");
  expect_error([] { read_jpeg_coefficients(io("cmyk.jpg")); }, "cmyk.jpg", "not supported");
  expect_error([] { decode_mask(io("cmyk.jpg")); }, "cmyk.jpg", "not supported");
}

TEST(IoImage, PngDecodeMatchesImageMagick) {
  struct Case {
    const char* png;
    const char* ref;
  };
  for (Case k : {Case{"small.png", "small.ppm"}, Case{"grad16.png", "grad16.ppm"}, Case{"palette.png", "palette.ppm"},
                 Case{"rgba.png", "rgba.ppm"}, Case{"palette_trns.png", "palette_trns.ppm"},
                 Case{"interlaced.png", "small.ppm"}}) {
    at::Tensor ours = decode_image(io(k.png));
    at::Tensor ref = read_pnm(io(k.ref));
    ASSERT_EQ(ours.sizes(), ref.sizes()) << k.png;
    EXPECT_LE(testutil::max_abs_diff(ours, ref), 1.0) << k.png;
  }
  for (Case k : {Case{"gray.png", "gray.pgm"}, Case{"mono.png", "mono.pgm"}, Case{"la16.png", "la16.pgm"}}) {
    at::Tensor ours = decode_image(io(k.png));
    at::Tensor ref = read_pnm(io(k.ref));
    ASSERT_EQ(ours.size(2), 3);
    for (int c = 0; c < 3; ++c) EXPECT_LE(testutil::max_abs_diff(ours.select(2, c), ref), 1.0) << k.png;
  }
  // The alpha fixtures really are partially transparent, and the 16-bit one really uses 16 bits.
  EXPECT_EQ(read_image_info(io("rgba.png")).color_space, "rgba");
  EXPECT_EQ(read_image_info(io("la16.png")).bit_depth, 16);
  EXPECT_EQ(read_image_info(io("grad16.png")).bit_depth, 16);
  EXPECT_EQ(read_image_info(io("palette.png")).color_space, "palette");
  EXPECT_EQ(read_image_info(io("mono.png")).bit_depth, 1);
  EXPECT_EQ(read_image_info(io("small.png")).color_space, "rgb");
  EXPECT_EQ(read_image_info(io("interlaced.png")).color_space, "rgb");
}

// A hand-assembled 16-bit PNG (gray or gray+alpha), one row.
std::vector<uint8_t> png16(const std::vector<uint16_t>& samples, bool alpha) {
  const uint32_t w = static_cast<uint32_t>(samples.size() / (alpha ? 2 : 1));
  std::vector<uint8_t> out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  auto chunk = [&](const char* type, const std::vector<uint8_t>& data) {
    put_be32(out, static_cast<uint32_t>(data.size()));
    const size_t at = out.size();
    out.insert(out.end(), type, type + 4);
    out.insert(out.end(), data.begin(), data.end());
    put_be32(out, static_cast<uint32_t>(crc32(0, out.data() + at, static_cast<uInt>(out.size() - at))));
  };
  std::vector<uint8_t> ihdr;
  put_be32(ihdr, w);
  put_be32(ihdr, 1);
  ihdr.insert(ihdr.end(), {16, static_cast<uint8_t>(alpha ? 4 : 0), 0, 0, 0});
  chunk("IHDR", ihdr);
  std::vector<uint8_t> raw = {0};  // filter type None
  for (uint16_t v : samples) raw.push_back(v >> 8), raw.push_back(v & 0xFF);
  uLongf n = compressBound(raw.size());
  std::vector<uint8_t> z(n);
  compress(z.data(), &n, raw.data(), raw.size());
  z.resize(n);
  chunk("IDAT", z);
  chunk("IEND", {});
  return out;
}

TEST(IoImage, SixteenBitRounding) {
  // round(v / 257): 128 -> 0.498 -> 0, 129 -> 0.502 -> 1, 385 -> 1.498 -> 1, 386 -> 1.502 -> 2, ...
  const std::vector<uint16_t> v = {0, 128, 129, 257, 385, 386, 32767, 32768, 32896, 65535};
  const std::vector<int> expect = {0, 0, 1, 1, 1, 2, 127, 128, 128, 255};
  at::Tensor rgb = decode_image_bytes(png16(v, false), "g16");
  at::Tensor m = decode_mask_bytes(png16(v, false), "g16");
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ(rgb[0][i][1].item<int>(), expect[i]) << v[i];
    EXPECT_EQ(m[0][i].item<int>(), expect[i]) << v[i];
  }
  // 16-bit alpha: black at alpha 32768/65535 over white = 255 * 32767 / 65535 = 127.498 -> 127;
  // value 65535 at any alpha stays 255; value 0 at alpha 0 is white.
  at::Tensor a = decode_image_bytes(png16({0, 32768, 65535, 1000, 0, 0}, true), "ga16");
  EXPECT_EQ(a[0][0][0].item<int>(), 127);
  EXPECT_EQ(a[0][1][2].item<int>(), 255);
  EXPECT_EQ(a[0][2][0].item<int>(), 255);
}

TEST(IoImage, AlphaOverWhiteHandValues) {
  at::Tensor px = at::tensor({0, 0, 0, 0, 0, 0, 0, 255, 0, 0, 0, 128, 200, 100, 50, 64}, at::kByte).view({1, 4, 4});
  at::Tensor rgb = decode_image_bytes(encode_png(px), "rgba");
  // over white: (c*a + 255*(255 - a)) / 255, rounded to nearest.
  EXPECT_EQ(rgb[0][0][0].item<int>(), 255);  // a = 0
  EXPECT_EQ(rgb[0][1][0].item<int>(), 0);    // a = 255
  EXPECT_EQ(rgb[0][2][0].item<int>(), 127);  // 255 * 127 / 255
  EXPECT_EQ(rgb[0][3][0].item<int>(), 241);  // 61505 / 255 = 241.2
  EXPECT_EQ(rgb[0][3][1].item<int>(), 216);  // 55105 / 255 = 216.1
  EXPECT_EQ(rgb[0][3][2].item<int>(), 204);  // 51905 / 255 = 203.55
}

TEST(IoImage, PngEncodeRoundTrips) {
  at::manual_seed(3);
  at::Tensor rgb = at::randint(0, 256, {17, 23, 3}, at::kByte);
  at::Tensor gray = at::randint(0, 256, {17, 23}, at::kByte);
  EXPECT_TRUE(at::equal(decode_image_bytes(encode_png(rgb), "rgb"), rgb));
  EXPECT_TRUE(at::equal(decode_mask_bytes(encode_png(gray), "gray"), gray));
  EXPECT_TRUE(at::equal(decode_mask_bytes(encode_png(gray.unsqueeze(2)), "gray1"), gray));
  // Non-contiguous input is fine.
  at::Tensor t = rgb.transpose(0, 1);
  EXPECT_TRUE(at::equal(decode_image_bytes(encode_png(t), "t"), t.contiguous()));
  std::string dir = testutil::temp_dir("io-png");
  write_png(dir + "/a.png", rgb);
  EXPECT_TRUE(at::equal(decode_image(dir + "/a.png"), rgb));
  ImageInfo info = read_image_info(dir + "/a.png");
  EXPECT_EQ(info.color_space, "rgb");
  EXPECT_THROW(encode_png(at::zeros({4, 4, 2}, at::kByte)), Error);
  EXPECT_THROW(encode_png(at::zeros({4, 4, 3}, at::kFloat)), Error);
}

TEST(IoImage, JpegEncode) {
  at::Tensor doc = decode_image(io("doc.png"));
  std::string dir = testutil::temp_dir("io-jpg");
  write_jpeg(dir + "/d.jpg", doc, 95);
  ImageInfo info = read_image_info(dir + "/d.jpg");
  EXPECT_EQ(info.subsampling, "4:2:0");
  EXPECT_FALSE(info.progressive);
  EXPECT_EQ(info.quality_estimate, 95);
  EXPECT_TRUE(info.quality_exact);
  at::Tensor back = decode_image(dir + "/d.jpg");
  const double mse = (back.to(at::kDouble) - doc.to(at::kDouble)).pow(2).mean().item<double>();
  EXPECT_GT(10 * std::log10(255.0 * 255.0 / mse), 30.0);
  // Gray input makes a one-component JPEG.
  at::Tensor g = rgb_to_luma(doc);
  ImageInfo gi = read_image_info(testutil::write_temp_bytes("io-jpg", "g.jpg", encode_jpeg(g, 90)));
  EXPECT_EQ(gi.channels, 1);
  EXPECT_THROW(encode_jpeg(doc, 0), Error);
  EXPECT_THROW(encode_jpeg(doc, 101), Error);
}

TEST(IoImage, ExifOrientationOnRequestOnly) {
  const std::vector<uint8_t> jpeg = bytes_of(io("small_444.jpg"));
  const std::vector<uint8_t> png = bytes_of(io("small.png"));
  at::Tensor stored_jpeg = decode_image_bytes(jpeg, "j");
  at::Tensor stored_png = decode_image_bytes(png, "p");
  DecodeOptions rotate;
  rotate.apply_exif_orientation = true;
  for (int o = 1; o <= 8; ++o) {
    auto j = jpeg_with_orientation(jpeg, o);
    auto p = png_with_orientation(png, o);
    EXPECT_TRUE(at::equal(decode_image_bytes(j, "j"), stored_jpeg)) << o;  // default: stored orientation
    EXPECT_TRUE(at::equal(decode_image_bytes(p, "p"), stored_png)) << o;
    EXPECT_TRUE(at::equal(decode_image_bytes(j, "j", rotate), reference_orient(stored_jpeg, o))) << o;
    EXPECT_TRUE(at::equal(decode_image_bytes(p, "p", rotate), reference_orient(stored_png, o))) << o;
    const std::string f = testutil::write_temp_bytes("io-exif", "o.jpg", j);
    EXPECT_EQ(read_image_info(f).exif_orientation, o);
    const std::string fp = testutil::write_temp_bytes("io-exif", "o.png", p);
    EXPECT_EQ(read_image_info(fp).exif_orientation, o);
  }
}

TEST(IoImage, MasksTakeTheColourMaximum) {
  at::Tensor rgb = at::tensor({0, 0, 0, 0, 255, 0, 9, 3, 200, 255, 255, 255}, at::kByte).view({2, 2, 3});
  at::Tensor m = decode_mask_bytes(encode_png(rgb), "m");
  EXPECT_TRUE(at::equal(m, at::tensor({0, 255, 200, 255}, at::kByte).view({2, 2})));
  // Palette mask: the palette colours, not the indices.
  at::Tensor pm = decode_mask(io("palette.png"));
  at::Tensor ref = read_pnm(io("palette.ppm"));
  EXPECT_TRUE(at::equal(pm, std::get<0>(ref.max(2))));
  // 16-bit gray + alpha: the gray value rounded to 8 bits, alpha ignored.
  EXPECT_EQ(decode_mask(io("la16.png")).sizes(), (std::vector<int64_t>{45, 61}));
}

TEST(IoImage, BadInputGivesOneLineErrors) {
  const auto jpeg = bytes_of(io("small_420.jpg"));
  const auto prog = bytes_of(io("small_prog.jpg"));
  const auto png = bytes_of(io("small.png"));
  auto half = [](const std::vector<uint8_t>& v) { return std::vector<uint8_t>(v.begin(), v.begin() + v.size() / 2); };
  const std::string empty = testutil::write_temp_bytes("io-bad", "empty.jpg", {});
  expect_error([&] { decode_image(empty); }, "empty.jpg", "empty file");
  const std::string junk = testutil::write_temp_bytes("io-bad", "junk.png", {'h', 'e', 'l', 'l', 'o', 0, 1, 2, 3, 4});
  expect_error([&] { decode_image(junk); }, "junk.png", "not a JPEG or PNG");
  expect_error([&] { decode_image("/nonexistent/none.png"); }, "none.png", "cannot open");
  // Truncated: never a silently grey image.
  const std::string tj = testutil::write_temp_bytes("io-bad", "trunc.jpg", half(jpeg));
  expect_error([&] { decode_image(tj); }, "trunc.jpg", "Premature end");
  expect_error([&] { read_jpeg_coefficients(tj); }, "trunc.jpg", "Premature end");
  const std::string tp = testutil::write_temp_bytes("io-bad", "trunc_prog.jpg", half(prog));
  expect_error([&] { decode_image(tp); }, "trunc_prog.jpg", "JPEG");
  expect_error([&] { read_jpeg_coefficients(tp); }, "trunc_prog.jpg", "JPEG");
  // Only the header: libjpeg must not invent an image.
  const std::string hj = testutil::write_temp_bytes("io-bad", "head.jpg", std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + 4));
  expect_error([&] { decode_image(hj); }, "head.jpg", "JPEG");
  const std::string tpng = testutil::write_temp_bytes("io-bad", "trunc.png", half(png));
  expect_error([&] { decode_image(tpng); }, "trunc.png", "PNG");
  // A corrupted PNG chunk CRC (IHDR is critical).
  auto crc = png;
  crc[29] ^= 0xFF;
  const std::string cp = testutil::write_temp_bytes("io-bad", "crc.png", crc);
  expect_error([&] { decode_image(cp); }, "crc.png", "CRC");
  // Stray markers in the entropy-coded data of a JPEG.
  auto corrupt = jpeg;
  for (size_t i = corrupt.size() / 2; i < corrupt.size() / 2 + 40; i += 2) corrupt[i] = 0xFF, corrupt[i + 1] = 0xD3;
  const std::string cj = testutil::write_temp_bytes("io-bad", "corrupt.jpg", corrupt);
  expect_error([&] { decode_image(cj); }, "corrupt.jpg", "Corrupt JPEG data");
  // Stray bytes between header markers or just before EOI are harmless (libjpeg warns; we accept);
  // a missing EOI is a truncated file.
  auto at_marker = [&](uint8_t m) {
    for (size_t i = 2; i + 1 < jpeg.size(); ++i)
      if (jpeg[i] == 0xFF && jpeg[i + 1] == m) return i;
    return size_t(0);
  };
  const at::Tensor clean = decode_image_bytes(jpeg, "clean");
  for (uint8_t m : {uint8_t(0xDB), uint8_t(0xD9)}) {
    size_t at = m == 0xD9 ? jpeg.size() - 2 : at_marker(m);
    ASSERT_GT(at, 0u);
    auto stray = jpeg;
    stray.insert(stray.begin() + static_cast<std::ptrdiff_t>(at), {0x00, 0x01, 0x02});
    EXPECT_TRUE(at::equal(decode_image_bytes(stray, "stray"), clean)) << int(m);
  }
  const std::vector<uint8_t> no_eoi(jpeg.begin(), jpeg.end() - 2);
  expect_error([&] { decode_image_bytes(no_eoi, "noeoi.jpg"); }, "noeoi.jpg", "Premature end");
  // A PNG has no coefficients.
  expect_error([] { read_jpeg_coefficients(io("small.png")); }, "small.png", "not a JPEG");
}

TEST(IoImage, RecoverableJpegWarningsAreCollectedWhenAsked) {
  // Stray bytes before the second scan of a progressive file (cjpeg -progressive): libjpeg skips them
  // and still decodes every pixel, as viewers do. Strict decoding refuses the file; with a warnings list
  // the pixels and coefficients equal those of the clean file and the warning is reported once.
  const auto prog = bytes_of(io("small_prog.jpg"));
  std::vector<size_t> sos;
  for (size_t i = 2; i + 1 < prog.size(); ++i)
    if (prog[i] == 0xFF && prog[i + 1] == 0xDA) sos.push_back(i);
  ASSERT_GE(sos.size(), 2u) << "a progressive file has several scans";
  auto stray = prog;
  stray.insert(stray.begin() + static_cast<std::ptrdiff_t>(sos[1]), {0x00, 0x01, 0x02});
  expect_error([&] { decode_image_bytes(stray, "stray.jpg"); }, "stray.jpg", "extraneous bytes");
  std::vector<std::string> warnings;
  DecodeOptions lenient;
  lenient.warnings = &warnings;
  EXPECT_TRUE(at::equal(decode_image_bytes(stray, "stray.jpg", lenient), decode_image_bytes(prog, "clean")));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("3 extraneous bytes"), std::string::npos) << warnings[0];
  const JpegCoefficients a = read_jpeg_coefficients_bytes(stray, "stray.jpg", lenient);
  const JpegCoefficients b = read_jpeg_coefficients_bytes(prog, "clean");
  EXPECT_TRUE(at::equal(a.coef, b.coef));
  EXPECT_EQ(warnings.size(), 1u) << "the same warning is not repeated";
  // Missing data stays an error even when warnings are collected.
  const std::vector<uint8_t> half(prog.begin(), prog.begin() + static_cast<std::ptrdiff_t>(prog.size() / 2));
  expect_error([&] { decode_image_bytes(half, "half.jpg", lenient); }, "half.jpg", "JPEG");
  const auto jpeg = bytes_of(io("small_420.jpg"));
  const std::vector<uint8_t> no_eoi(jpeg.begin(), jpeg.end() - 2);
  expect_error([&] { decode_image_bytes(no_eoi, "noeoi.jpg", lenient); }, "noeoi.jpg", "Premature end");
}

TEST(IoImage, MaxPixelsRefusedBeforeDecoding) {
  DecodeOptions small;
  small.max_pixels = 61 * 45 - 1;
  for (const char* f : {"small_420.jpg", "small.png"}) {
    expect_error([&] { decode_image(io(f), small); }, f, "over the limit");
    expect_error([&] { read_image_info(io(f), small); }, f, "over the limit");
  }
  expect_error([&] { read_jpeg_coefficients(io("small_420.jpg"), small); }, "small_420.jpg", "over the limit");
  small.max_pixels = 61 * 45;
  EXPECT_EQ(decode_image(io("small.png"), small).size(1), 61);
  // A header claiming 60000x60000 (3.6 GP) is refused at the default limit, before any allocation.
  auto png = bytes_of(io("small.png"));
  for (int k = 0; k < 2; ++k) {
    png[16 + 4 * k] = 0, png[17 + 4 * k] = 0, png[18 + 4 * k] = 0xEA, png[19 + 4 * k] = 0x60;
  }
  uint32_t c = static_cast<uint32_t>(crc32(0, png.data() + 12, 17));
  png[29] = c >> 24, png[30] = c >> 16, png[31] = c >> 8, png[32] = c;
  expect_error([&] { decode_image_bytes(png, "huge.png"); }, "huge.png", "over the limit of 100.0 MP");
}

// Random byte edits and truncations of every fixture kind: each decode either succeeds or throws
// diffnet::Error; nothing else escapes and nothing crashes (libjpeg/libpng errors longjmp out cleanly).
TEST(IoImage, MutatedInputsNeverCrash) {
  std::mt19937 rng(1234);
  int errors = 0, decoded = 0;
  for (const char* f : {"small_420.jpg", "small_prog.jpg", "small_gray.jpg", "small.png", "palette_trns.png",
                        "la16.png", "interlaced.png"}) {
    const auto original = bytes_of(io(f));
    for (int k = 0; k < 120; ++k) {
      auto b = original;
      if (k % 4 == 3) {
        b.resize(std::uniform_int_distribution<size_t>(0, b.size() - 1)(rng));
      } else {
        const int edits = 1 + k % 4;
        for (int e = 0; e < edits; ++e)
          b[std::uniform_int_distribution<size_t>(0, b.size() - 1)(rng)] = static_cast<uint8_t>(rng());
      }
      for (int what = 0; what < 3; ++what) {
        try {
          if (what == 0) decode_image_bytes(b, f);
          else if (what == 1) decode_mask_bytes(b, f);
          else if (is_jpeg_bytes(b.data(), b.size())) read_jpeg_coefficients_bytes(b, f);
          ++decoded;
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
          ++errors;
        }
      }
    }
  }
  std::printf("[ info ] mutated inputs: %d decoded, %d clean errors\n", decoded, errors);
  EXPECT_GT(errors, 200);
}
