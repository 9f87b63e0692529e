// The JPEG coefficient reader (read_jpeg_coefficients_bytes, the DCT input from a JPEG file) and the
// clipped DCT map and quality estimate built from it, under a 4 MP limit.
#include "diffnet/dct.h"
#include "diffnet/image_io.h"
#include "fuzz/fuzz_target.h"

DIFFNET_FUZZ_TARGET(coefficients) {
  const std::vector<uint8_t> bytes(data, data + size);
  diffnet::DecodeOptions opt;
  opt.max_pixels = 4'000'000;
  std::vector<std::string> warnings;
  opt.warnings = &warnings;
  diffnet::JpegCoefficients jc = diffnet::read_jpeg_coefficients_bytes(bytes, "fuzz", opt);
  if (jc.coef.dim() != 2 || jc.coef.size(0) < jc.height || jc.coef.size(1) < jc.width || jc.qt.numel() != 64 ||
      jc.qt.min().item<int64_t>() < 1 || jc.qt.max().item<int64_t>() > 255)
    __builtin_trap();
  const int64_t h8 = (jc.height + 7) / 8 * 8, w8 = (jc.width + 7) / 8 * 8;
  at::Tensor map = diffnet::clip_coefficients(jc.coef, h8, w8);
  if (map.size(0) != h8 || map.size(1) != w8) __builtin_trap();
  diffnet::estimate_jpeg_quality(jc.qt);
}
