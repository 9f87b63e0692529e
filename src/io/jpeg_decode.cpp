// JPEG reading with libjpeg-turbo: header facts, RGB/gray decode, quantized luma coefficients.
// Every libjpeg call runs inside a step function that owns the setjmp and has no C++ objects alive
// across the calls, so a longjmp out of libjpeg never skips a destructor.
#include <cstring>
#include <string>

#include "diffnet/common.h"
#include "diffnet/dct.h"
#include "io/codec.h"
#include "io/jpeg_error.h"

namespace diffnet::io_detail {
namespace {

// Scans beyond this are refused (a progressive file with thousands of scans is a decoding bomb).
constexpr int kMaxScans = 1000;

struct Decoder {
  jpeg_decompress_struct cinfo;
  JpegErrorMgr err;
  jpeg_progress_mgr progress;
  bool created = false;
  explicit Decoder(const DecodeOptions& opt) {
    std::memset(&cinfo, 0, sizeof(cinfo));
    std::memset(&progress, 0, sizeof(progress));
    jpeg_install_error_handler(&err, reinterpret_cast<jpeg_common_struct*>(&cinfo));
    err.warnings = opt.warnings;  // recoverable warnings collected, or errors
  }
  ~Decoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
};

extern "C" void on_progress(j_common_ptr c) {
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  if (d->input_scan_number > kMaxScans) {
    auto* e = reinterpret_cast<JpegErrorMgr*>(c->err);
    std::snprintf(e->message, sizeof(e->message), "more than %d scans (refused)", kMaxScans);
    std::longjmp(e->jump, 1);
  }
}

bool step_header(Decoder* d, const uint8_t* data, size_t size) {
  if (setjmp(d->err.jump)) return false;
  jpeg_create_decompress(&d->cinfo);
  d->created = true;
  d->progress.progress_monitor = on_progress;
  d->cinfo.progress = &d->progress;
  jpeg_mem_src(&d->cinfo, data, static_cast<unsigned long>(size));
  jpeg_save_markers(&d->cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&d->cinfo, TRUE);
  return true;
}

bool step_decode(Decoder* d, uint8_t* out, J_COLOR_SPACE space, int channels) {
  if (setjmp(d->err.jump)) return false;
  j_decompress_ptr c = &d->cinfo;
  c->out_color_space = space;
  jpeg_start_decompress(c);
  if (c->output_width != c->image_width || c->output_height != c->image_height ||
      c->output_components != channels) {
    std::snprintf(d->err.message, sizeof(d->err.message), "unexpected output geometry");
    return false;
  }
  const size_t stride = static_cast<size_t>(c->output_width) * channels;
  while (c->output_scanline < c->output_height) {
    JSAMPROW row = out + static_cast<size_t>(c->output_scanline) * stride;
    if (jpeg_read_scanlines(c, &row, 1) != 1) {
      std::snprintf(d->err.message, sizeof(d->err.message), "decoder returned no scanline");
      return false;
    }
  }
  jpeg_finish_decompress(c);
  return true;
}

bool step_coefficients(Decoder* d, int16_t* out, int64_t rows, int64_t cols, int64_t* qt) {
  if (setjmp(d->err.jump)) return false;
  j_decompress_ptr c = &d->cinfo;
  jvirt_barray_ptr* arrays = jpeg_read_coefficients(c);
  jpeg_component_info* y = &c->comp_info[0];
  if (static_cast<int64_t>(y->height_in_blocks) != rows || static_cast<int64_t>(y->width_in_blocks) != cols) {
    std::snprintf(d->err.message, sizeof(d->err.message), "unexpected block grid");
    return false;
  }
  const int64_t width = cols * 8;
  for (int64_t by = 0; by < rows; ++by) {
    JBLOCKARRAY row = (*c->mem->access_virt_barray)(reinterpret_cast<j_common_ptr>(c), arrays[0],
                                                     static_cast<JDIMENSION>(by), 1, FALSE);
    for (int64_t bx = 0; bx < cols; ++bx) {
      const JCOEF* blk = row[0][bx];
      for (int u = 0; u < 8; ++u)
        for (int v = 0; v < 8; ++v) out[(by * 8 + u) * width + bx * 8 + v] = blk[u * 8 + v];
    }
  }
  // quant_table is set only when the luma component appeared in a scan; otherwise the frame header's table
  // number is unchecked by libjpeg (0..255: an out-of-bounds read, found by fuzz_coefficients).
  const int tno = y->quant_tbl_no;
  const JQUANT_TBL* tbl = y->quant_table                             ? y->quant_table
                          : (tno >= 0 && tno < NUM_QUANT_TBLS) ? c->quant_tbl_ptrs[tno]
                                                               : nullptr;
  if (!tbl) {
    std::snprintf(d->err.message, sizeof(d->err.message), "no quantization table for the luma component");
    return false;
  }
  for (int i = 0; i < 64; ++i) qt[i] = tbl->quantval[i];  // natural order in libjpeg
  jpeg_finish_decompress(c);
  return true;
}

[[noreturn]] void fail(const Decoder& d, const std::string& name) {
  std::string msg = d.err.message[0] ? d.err.message : "JPEG decoding failed";
  throw Error(name, "JPEG: " + msg);
}

void header(Decoder& d, const uint8_t* data, size_t size, const std::string& name) {
  if (size == 0) throw Error(name, "empty file");
  if (!step_header(&d, data, size)) fail(d, name);
}

std::string color_space_name(J_COLOR_SPACE s) {
  switch (s) {
    case JCS_GRAYSCALE: return "gray";
    case JCS_YCbCr: return "ycbcr";
    case JCS_RGB: return "rgb";
    case JCS_CMYK: return "cmyk";
    case JCS_YCCK: return "ycck";
    default: return "unknown";
  }
}

std::string subsampling_name(const jpeg_decompress_struct& c) {
  if (c.num_components < 3) return "";
  const auto& y = c.comp_info[0];
  const auto& cb = c.comp_info[1];
  const auto& cr = c.comp_info[2];
  if (cb.h_samp_factor != cr.h_samp_factor || cb.v_samp_factor != cr.v_samp_factor) return "other";
  if (y.h_samp_factor % cb.h_samp_factor != 0 || y.v_samp_factor % cb.v_samp_factor != 0) return "other";
  const int h = y.h_samp_factor / cb.h_samp_factor, v = y.v_samp_factor / cb.v_samp_factor;
  if (h == 1 && v == 1) return "4:4:4";
  if (h == 2 && v == 1) return "4:2:2";
  if (h == 2 && v == 2) return "4:2:0";
  if (h == 1 && v == 2) return "4:4:0";
  if (h == 4 && v == 1) return "4:1:1";
  return "other";
}

int orientation_from_markers(const jpeg_decompress_struct& c) {
  for (jpeg_saved_marker_ptr m = c.marker_list; m; m = m->next) {
    if (m->marker != JPEG_APP0 + 1 || m->data_length < 6) continue;
    if (std::memcmp(m->data, "Exif\0\0", 6) != 0) continue;
    return exif_orientation(m->data, m->data_length);
  }
  return 1;
}

// Refuses colour spaces whose component 0 is not luma / that we do not convert.
void require_luma_first(const Decoder& d, const std::string& name) {
  const J_COLOR_SPACE s = d.cinfo.jpeg_color_space;
  if (s == JCS_CMYK || s == JCS_YCCK)
    throw Error(name, "JPEG: " + color_space_name(s) +
                          " colour space is not supported (convert the image to RGB/YCbCr first)");
  if (s != JCS_GRAYSCALE && s != JCS_YCbCr && s != JCS_RGB)
    throw Error(name, "JPEG: unsupported colour space with " + std::to_string(d.cinfo.num_components) +
                          " components");
}

}  // namespace

ImageInfo jpeg_info(const uint8_t* data, size_t size, const std::string& name, const DecodeOptions& opt) {
  Decoder d(opt);
  header(d, data, size, name);
  const jpeg_decompress_struct& c = d.cinfo;
  check_pixel_limit(c.image_width, c.image_height, name, opt);
  ImageInfo info;
  info.format = "jpeg";
  info.width = c.image_width;
  info.height = c.image_height;
  info.channels = c.num_components;
  info.color_space = color_space_name(c.jpeg_color_space);
  info.bit_depth = c.data_precision;
  info.subsampling = subsampling_name(c);
  info.progressive = c.progressive_mode != 0;
  info.exif_orientation = orientation_from_markers(c);
  const int tno = c.comp_info[0].quant_tbl_no;
  const JQUANT_TBL* tbl = (tno >= 0 && tno < NUM_QUANT_TBLS) ? c.quant_tbl_ptrs[tno] : nullptr;
  if (tbl) {
    info.luma_qtable.resize(64);
    for (int i = 0; i < 64; ++i) info.luma_qtable[i] = std::min<int64_t>(255, std::max<int64_t>(1, tbl->quantval[i]));
    bool exact = false;
    info.quality_estimate = estimate_jpeg_quality(at::tensor(info.luma_qtable, at::kLong), &exact);
    info.quality_exact = exact;
  }
  return info;
}

at::Tensor jpeg_decode(const uint8_t* data, size_t size, const std::string& name, const DecodeOptions& opt,
                       DecodeMode mode, int* exif) {
  Decoder d(opt);
  header(d, data, size, name);
  require_luma_first(d, name);
  const int64_t w = d.cinfo.image_width, h = d.cinfo.image_height;
  check_pixel_limit(w, h, name, opt);
  if (exif) *exif = orientation_from_markers(d.cinfo);
  const bool gray_out = mode == DecodeMode::kMask && d.cinfo.jpeg_color_space == JCS_GRAYSCALE;
  const int channels = gray_out ? 1 : 3;
  at::Tensor out = at::empty({h, w, channels}, at::kByte);
  if (!step_decode(&d, out.data_ptr<uint8_t>(), gray_out ? JCS_GRAYSCALE : JCS_RGB, channels)) fail(d, name);
  return out;
}

JpegCoefficients jpeg_coefficients(const uint8_t* data, size_t size, const std::string& name,
                                   const DecodeOptions& opt) {
  Decoder d(opt);
  header(d, data, size, name);
  require_luma_first(d, name);
  if (d.cinfo.jpeg_color_space == JCS_RGB)
    throw Error(name, "JPEG: the file stores RGB components (no YCbCr transform), so it has no luma coefficients");
  // Luma sampled below the frame's maximum (e.g. Y 2x2 beside a 1x4 chroma) has fewer blocks than the
  // image has 8x8 cells: its blocks would not lie on the pixel grid (found by fuzz_coefficients).
  const jpeg_component_info& y = d.cinfo.comp_info[0];
  if (y.h_samp_factor != d.cinfo.max_h_samp_factor || y.v_samp_factor != d.cinfo.max_v_samp_factor)
    throw Error(name, "JPEG: the luma component is subsampled (" + std::to_string(y.h_samp_factor) + "x" +
                          std::to_string(y.v_samp_factor) + " of " + std::to_string(d.cinfo.max_h_samp_factor) + "x" +
                          std::to_string(d.cinfo.max_v_samp_factor) + "), so its blocks do not cover the image's 8x8 grid");
  check_pixel_limit(d.cinfo.image_width, d.cinfo.image_height, name, opt);
  const int64_t rows = d.cinfo.comp_info[0].height_in_blocks, cols = d.cinfo.comp_info[0].width_in_blocks;
  JpegCoefficients r;
  r.width = d.cinfo.image_width;
  r.height = d.cinfo.image_height;
  r.coef = at::empty({rows * 8, cols * 8}, at::kShort);
  r.qt = at::empty({64}, at::kLong);
  if (!step_coefficients(&d, r.coef.data_ptr<int16_t>(), rows, cols, r.qt.data_ptr<int64_t>())) fail(d, name);
  r.qt.clamp_(1, 255);
  return r;
}

}  // namespace diffnet::io_detail
