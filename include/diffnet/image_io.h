// Image decoding/encoding (JPEG via libjpeg-turbo, PNG via libpng) and JPEG coefficient access.
// Pixels are at::Tensor uint8 (H, W, 3) RGB, contiguous; masks are uint8 (H, W).
// Every failure throws diffnet::Error("<file>: <reason>") — never a crash, never a partial image:
// libjpeg/libpng errors and libjpeg's corrupt-data warnings (premature end, bad Huffman code, stray
// markers) are errors, unless DecodeOptions::warnings collects the recoverable ones (stray bytes, lost
// restart markers: every pixel is still decoded). Policies (EXIF, CMYK, alpha, 16-bit): docs/io.md.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace diffnet {

struct DecodeOptions {
  // Apply the EXIF orientation tag to the pixels. Off by default: JPEG DCT traces live in the
  // stored orientation, so a rotated decode would no longer line up with the file's 8x8 grid.
  bool apply_exif_orientation = false;
  // Refuse images with more pixels than this before allocating anything (default 100 MP; <= 0: no limit).
  int64_t max_pixels = 100'000'000;
  // When set, recoverable JPEG corrupt-data warnings (extraneous bytes before a marker, a resynchronised
  // restart marker, an inconsistent scan sequence) are appended here, one line per kind, and decoding goes
  // on as an image viewer would; when null they are errors. Missing or undecodable data is always an error.
  std::vector<std::string>* warnings = nullptr;
};

// Facts about an image file, read from its header (cheap; no full decode).
struct ImageInfo {
  std::string format;        // "jpeg" | "png"
  int64_t width = 0, height = 0;
  int channels = 0;          // components in the file (1, 3, 4)
  std::string color_space;   // jpeg: "gray"|"ycbcr"|"rgb"|"cmyk"|"ycck"; png: "gray"|"gray+alpha"|"rgb"|"rgba"|"palette"
  int bit_depth = 8;
  std::string subsampling;   // jpeg: "4:4:4"|"4:2:2"|"4:2:0"|"4:4:0"|"4:1:1"|"other"|"" (gray); png: ""
  bool progressive = false;  // jpeg only
  int exif_orientation = 1;  // 1..8 (1 when absent)
  std::vector<int64_t> luma_qtable;  // jpeg: 64 entries, natural order; empty for png
  int quality_estimate = -1;         // jpeg: IJG quality whose table best matches; -1 for png
  bool quality_exact = false;        // the luma table equals the IJG table at quality_estimate
};

// Sniffs the format from the bytes (not the extension). Refuses images over opt.max_pixels too.
ImageInfo read_image_info(const std::string& path, const DecodeOptions& opt = {});
ImageInfo read_image_info_bytes(const std::vector<uint8_t>& bytes, const std::string& name,
                                const DecodeOptions& opt = {});

// Decodes JPEG or PNG to RGB uint8 (H, W, 3). Gray is replicated, alpha is composited over white,
// 16-bit is rounded to 8-bit (round(v / 257)), palettes are expanded, PNG gamma/ICC are ignored.
// CMYK/YCCK JPEGs are refused with a clear message. JPEG uses libjpeg's default (islow) IDCT.
at::Tensor decode_image(const std::string& path, const DecodeOptions& opt = {});
at::Tensor decode_image_bytes(const std::vector<uint8_t>& bytes, const std::string& name,
                              const DecodeOptions& opt = {});

// Decodes a mask PNG/JPEG to uint8 (H, W): gray files give their values as stored (16-bit rounded);
// colour and palette files give max(R, G, B) of each pixel (so any non-black colour is non-zero).
// Alpha is ignored; EXIF orientation is never applied; no pixel limit.
at::Tensor decode_mask(const std::string& path);
at::Tensor decode_mask_bytes(const std::vector<uint8_t>& bytes, const std::string& name);

// The image (H, W) or (H, W, C) as a viewer shows it under EXIF orientation o (1..8; anything else: as is).
at::Tensor orient_image(const at::Tensor& image, int o);
// The orientation that undoes o: orient_image(orient_image(x, o), inverse_orientation(o)) == x.
int inverse_orientation(int o);

// Quantized luma DCT coefficients exactly as stored in a JPEG file (jpeg_read_coefficients).
struct JpegCoefficients {
  at::Tensor coef;  // int16 (Hb*8, Wb*8): block (by,bx) holds its 64 coefficients in natural (u,v) order
  at::Tensor qt;    // int64 (64), natural order, entries clamped to 1..255
  int64_t width = 0, height = 0;  // image size in pixels (coef may be larger: whole blocks)
};
// Refuses CMYK/YCCK and RGB-component JPEGs (component 0 is not luma). opt: max_pixels only.
JpegCoefficients read_jpeg_coefficients(const std::string& path, const DecodeOptions& opt = {});
JpegCoefficients read_jpeg_coefficients_bytes(const std::vector<uint8_t>& bytes, const std::string& name,
                                              const DecodeOptions& opt = {});

// Encoders. rgb: uint8 (H, W, 3), (H, W, 1) or (H, W) gray (one-component JPEG). JPEG uses the IJG
// tables at `quality` (1..100), 4:2:0 chroma like PIL's default, baseline, islow DCT, no optimisation.
// Inputs may be non-contiguous. Errors: Error("encode_jpeg"/"encode_png" or the path, reason).
std::vector<uint8_t> encode_jpeg(const at::Tensor& rgb, int quality);
std::vector<uint8_t> encode_png(const at::Tensor& image);  // (H,W), (H,W,1), (H,W,3) or (H,W,4) uint8
void write_png(const std::string& path, const at::Tensor& image);    // atomic
void write_jpeg(const std::string& path, const at::Tensor& rgb, int quality);  // atomic

// True when the bytes start like a JPEG / PNG file.
bool is_jpeg_bytes(const uint8_t* data, size_t size);
bool is_png_bytes(const uint8_t* data, size_t size);

}  // namespace diffnet
