// Format dispatch of include/diffnet/image_io.h: sniffing, limits, orientation, masks, file wrappers.
#include "diffnet/image_io.h"

#include <png.h>

#include <cstdio>
#include <cstring>

#include "diffnet/common.h"
#include "io/codec.h"

namespace diffnet {
namespace io_detail {

void check_pixel_limit(int64_t width, int64_t height, const std::string& name, const DecodeOptions& opt) {
  if (width <= 0 || height <= 0)
    throw Error(name, "invalid image size " + std::to_string(width) + "x" + std::to_string(height));
  if (opt.max_pixels > 0 && width * height > opt.max_pixels) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "image is %lldx%lld = %.1f MP, over the limit of %.1f MP (max_pixels)",
                  static_cast<long long>(width), static_cast<long long>(height), width * height / 1e6,
                  opt.max_pixels / 1e6);
    throw Error(name, buf);
  }
}

}  // namespace io_detail

namespace {

enum class Format { kJpeg, kPng };

Format sniff(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (bytes.empty()) throw Error(name, "empty file");
  if (is_jpeg_bytes(bytes.data(), bytes.size())) return Format::kJpeg;
  if (is_png_bytes(bytes.data(), bytes.size())) return Format::kPng;
  throw Error(name, "not a JPEG or PNG file (unrecognised signature)");
}

at::Tensor decode(const std::vector<uint8_t>& bytes, const std::string& name, const DecodeOptions& opt,
                  io_detail::DecodeMode mode, int* exif) {
  return sniff(bytes, name) == Format::kJpeg
             ? io_detail::jpeg_decode(bytes.data(), bytes.size(), name, opt, mode, exif)
             : io_detail::png_decode(bytes.data(), bytes.size(), name, opt, mode, exif);
}

}  // namespace

bool is_jpeg_bytes(const uint8_t* data, size_t size) {
  return size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
}

bool is_png_bytes(const uint8_t* data, size_t size) {
  return size >= 8 && png_sig_cmp(const_cast<png_bytep>(data), 0, 8) == 0;
}

ImageInfo read_image_info(const std::string& path, const DecodeOptions& opt) {
  return read_image_info_bytes(read_file(path), path, opt);
}

ImageInfo read_image_info_bytes(const std::vector<uint8_t>& bytes, const std::string& name, const DecodeOptions& opt) {
  return sniff(bytes, name) == Format::kJpeg ? io_detail::jpeg_info(bytes.data(), bytes.size(), name, opt)
                                             : io_detail::png_info(bytes.data(), bytes.size(), name, opt);
}

at::Tensor decode_image_bytes(const std::vector<uint8_t>& bytes, const std::string& name, const DecodeOptions& opt) {
  int orientation = 1;
  at::Tensor rgb = decode(bytes, name, opt, io_detail::DecodeMode::kRgb, &orientation);
  if (opt.apply_exif_orientation && orientation != 1) rgb = io_detail::apply_orientation(rgb, orientation);
  return rgb;
}

at::Tensor orient_image(const at::Tensor& image, int o) { return io_detail::apply_orientation(image, o); }

int inverse_orientation(int o) { return o == 6 ? 8 : o == 8 ? 6 : o; }

at::Tensor decode_image(const std::string& path, const DecodeOptions& opt) {
  return decode_image_bytes(read_file(path), path, opt);
}

at::Tensor decode_mask_bytes(const std::vector<uint8_t>& bytes, const std::string& name) {
  at::Tensor m = decode(bytes, name, DecodeOptions{}, io_detail::DecodeMode::kMask, nullptr);
  if (m.size(2) == 1) return m.squeeze(2).contiguous();
  return std::get<0>(m.max(2)).contiguous();
}

at::Tensor decode_mask(const std::string& path) { return decode_mask_bytes(read_file(path), path); }

JpegCoefficients read_jpeg_coefficients_bytes(const std::vector<uint8_t>& bytes, const std::string& name,
                                              const DecodeOptions& opt) {
  if (sniff(bytes, name) != Format::kJpeg) throw Error(name, "not a JPEG file: it has no DCT coefficients");
  return io_detail::jpeg_coefficients(bytes.data(), bytes.size(), name, opt);
}

JpegCoefficients read_jpeg_coefficients(const std::string& path, const DecodeOptions& opt) {
  return read_jpeg_coefficients_bytes(read_file(path), path, opt);
}

std::vector<uint8_t> encode_jpeg(const at::Tensor& rgb, int quality) { return io_detail::jpeg_encode(rgb, quality); }
std::vector<uint8_t> encode_png(const at::Tensor& image) { return io_detail::png_encode(image); }

void write_png(const std::string& path, const at::Tensor& image) {
  std::vector<uint8_t> bytes;
  try {
    bytes = encode_png(image);
  } catch (const Error& e) {
    throw Error(path, e.what());
  }
  write_file_atomic(path, bytes);
}

void write_jpeg(const std::string& path, const at::Tensor& rgb, int quality) {
  std::vector<uint8_t> bytes;
  try {
    bytes = encode_jpeg(rgb, quality);
  } catch (const Error& e) {
    throw Error(path, e.what());
  }
  write_file_atomic(path, bytes);
}

}  // namespace diffnet
