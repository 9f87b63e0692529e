// Internal interface of the io module: per-format codecs behind include/diffnet/image_io.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "diffnet/document.h"
#include "diffnet/image_io.h"

namespace diffnet::io_detail {

// What a decode produces: RGB (H, W, 3) for images; for masks the file's own channels (H, W, C) with
// C = 1 for gray files (palette/RGB files give 3), alpha never included. 8-bit, contiguous.
enum class DecodeMode { kRgb, kMask };

ImageInfo jpeg_info(const uint8_t* data, size_t size, const std::string& name, const DecodeOptions& opt);
at::Tensor jpeg_decode(const uint8_t* data, size_t size, const std::string& name, const DecodeOptions& opt,
                       DecodeMode mode, int* exif_orientation);
JpegCoefficients jpeg_coefficients(const uint8_t* data, size_t size, const std::string& name,
                                   const DecodeOptions& opt);
std::vector<uint8_t> jpeg_encode(const at::Tensor& image, int quality);

ImageInfo png_info(const uint8_t* data, size_t size, const std::string& name, const DecodeOptions& opt);
at::Tensor png_decode(const uint8_t* data, size_t size, const std::string& name, const DecodeOptions& opt,
                      DecodeMode mode, int* exif_orientation);
std::vector<uint8_t> png_encode(const at::Tensor& image);

// EXIF orientation (1..8) from a TIFF-structured EXIF payload ("II*\0..." or "MM\0*..."), optionally
// preceded by "Exif\0\0". Returns 1 when absent or malformed.
int exif_orientation(const uint8_t* data, size_t size);
// Applies EXIF orientation o to an (H, W, C) image so that it displays upright. Returns contiguous.
at::Tensor apply_orientation(const at::Tensor& hwc, int o);

// "W x H = N MP over the limit" check shared by the codecs; max_pixels <= 0 disables it.
void check_pixel_limit(int64_t width, int64_t height, const std::string& name, const DecodeOptions& opt);

// The pages of a multi-page file (document.cpp's DocumentReader dispatches to these by sniffed format).
class PageSource {
 public:
  virtual ~PageSource() = default;
  virtual int64_t pages() const = 0;
  virtual DocumentPage page(int64_t index) = 0;  // 0-based; names "<path>#<index + 1>"
};
// PDF (pdf.cpp) and TIFF (tiff.cpp) from the whole file's bytes, kept for the parsers; `name` names the
// file in records and errors. Both throw Error(name, ...) for unreadable, encrypted or over-limit files,
// or when built without the library.
std::unique_ptr<PageSource> open_pdf(const std::string& name, std::vector<uint8_t> bytes, const DocumentOptions& opt);
std::unique_ptr<PageSource> open_tiff(const std::string& name, std::vector<uint8_t> bytes, const DocumentOptions& opt);

}  // namespace diffnet::io_detail
