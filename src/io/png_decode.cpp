// PNG reading with libpng: header facts and decoding to 8-bit RGB (or the mask's own channels).
// libpng errors longjmp to the step functions' setjmp; no C++ object is alive across libpng calls.
#include <png.h>

#include <cstring>
#include <string>
#include <vector>

#include "diffnet/common.h"
#include "io/codec.h"

namespace diffnet::io_detail {
namespace {

struct Reader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  png_infop end_info = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  char message[256] = {0};
  ~Reader() {
    if (png) png_destroy_read_struct(&png, info ? &info : nullptr, end_info ? &end_info : nullptr);
  }
};

extern "C" void on_png_error(png_structp png, png_const_charp msg) {
  auto* r = static_cast<Reader*>(png_get_error_ptr(png));
  std::snprintf(r->message, sizeof(r->message), "%s", msg ? msg : "unknown error");
  png_longjmp(png, 1);
}
extern "C" void on_png_warning(png_structp, png_const_charp) {}  // ancillary-chunk problems: ignored

extern "C" void on_png_read(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "truncated file (unexpected end of data)");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

// Reads IHDR and every chunk up to the image data.
bool step_header(Reader* r) {
  if (setjmp(png_jmpbuf(r->png))) return false;
  png_set_read_fn(r->png, r, on_png_read);
  png_set_user_limits(r->png, 1u << 24, 1u << 24);
  png_read_info(r->png, r->info);
  return true;
}

// Sets the transforms of `mode`: 8/16-bit gray, gray+alpha, RGB or RGBA rows come out.
bool step_transforms(Reader* r, DecodeMode mode) {
  if (setjmp(png_jmpbuf(r->png))) return false;
  const int color = png_get_color_type(r->png, r->info);
  const int depth = png_get_bit_depth(r->png, r->info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(r->png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(r->png);
  if (png_get_valid(r->png, r->info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(r->png);
  if (mode == DecodeMode::kRgb && (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA))
    png_set_gray_to_rgb(r->png);
  png_set_interlace_handling(r->png);
  png_read_update_info(r->png, r->info);
  return true;
}

bool step_read(Reader* r, png_bytepp rows) {
  if (setjmp(png_jmpbuf(r->png))) return false;
  png_read_image(r->png, rows);
  png_read_end(r->png, r->end_info);
  return true;
}

[[noreturn]] void fail(const Reader& r, const std::string& name) {
  throw Error(name, std::string("PNG: ") + (r.message[0] ? r.message : "decoding failed"));
}

void open(Reader& r, const uint8_t* data, size_t size, const std::string& name, const DecodeOptions& opt) {
  if (size == 0) throw Error(name, "empty file");
  r.data = data;
  r.size = size;
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &r, on_png_error, on_png_warning);
  if (!r.png) throw Error(name, "PNG: cannot create decoder");
  r.info = png_create_info_struct(r.png);
  r.end_info = png_create_info_struct(r.png);
  if (!r.info || !r.end_info) throw Error(name, "PNG: cannot create decoder");
  if (!step_header(&r)) fail(r, name);
  check_pixel_limit(png_get_image_width(r.png, r.info), png_get_image_height(r.png, r.info), name, opt);
}

int orientation(const Reader& r, png_infop info) {
  png_uint_32 n = 0;
  png_bytep exif = nullptr;
  if (png_get_eXIf_1(r.png, info, &n, &exif) && exif && n > 0) return exif_orientation(exif, n);
  return 1;
}

std::string color_name(int color) {
  switch (color) {
    case PNG_COLOR_TYPE_GRAY: return "gray";
    case PNG_COLOR_TYPE_GRAY_ALPHA: return "gray+alpha";
    case PNG_COLOR_TYPE_RGB: return "rgb";
    case PNG_COLOR_TYPE_RGB_ALPHA: return "rgba";
    case PNG_COLOR_TYPE_PALETTE: return "palette";
    default: return "unknown";
  }
}

// 16-bit -> 8-bit: round(v * 255 / 65535) = round(v / 257).
inline uint32_t to8(uint32_t v16) { return (v16 * 255u + 32767u) / 65535u; }

// Composites colour c over white with alpha a, both in 0..m; returns 8-bit, rounded to nearest.
inline uint8_t over_white(uint64_t c, uint64_t a, uint64_t m) {
  const uint64_t num = (c * a + m * (m - a)) * 255u, den = m * m;
  return static_cast<uint8_t>((num + den / 2) / den);
}

}  // namespace

ImageInfo png_info(const uint8_t* data, size_t size, const std::string& name, const DecodeOptions& opt) {
  Reader r;
  open(r, data, size, name, opt);
  ImageInfo info;
  info.format = "png";
  info.width = png_get_image_width(r.png, r.info);
  info.height = png_get_image_height(r.png, r.info);
  const int color = png_get_color_type(r.png, r.info);
  info.color_space = color_name(color);
  info.channels = png_get_channels(r.png, r.info);
  info.bit_depth = png_get_bit_depth(r.png, r.info);
  info.exif_orientation = orientation(r, r.info);
  return info;
}

at::Tensor png_decode(const uint8_t* data, size_t size, const std::string& name, const DecodeOptions& opt,
                      DecodeMode mode, int* exif) {
  Reader r;
  open(r, data, size, name, opt);  // checks the pixel limit from IHDR before anything is allocated
  if (!step_transforms(&r, mode)) fail(r, name);
  const int64_t w = png_get_image_width(r.png, r.info), h = png_get_image_height(r.png, r.info);
  const int channels = png_get_channels(r.png, r.info);  // after transforms
  const int depth = png_get_bit_depth(r.png, r.info);    // 8 or 16 after transforms
  const size_t rowbytes = png_get_rowbytes(r.png, r.info);
  if (rowbytes != static_cast<size_t>(w) * channels * (depth / 8)) throw Error(name, "PNG: unexpected row layout");
  const bool has_alpha = channels == 2 || channels == 4;
  const int colour = has_alpha ? channels - 1 : channels;
  const int out_c = mode == DecodeMode::kRgb ? 3 : colour;
  at::Tensor out = at::empty({h, w, out_c}, at::kByte);
  const bool direct = depth == 8 && !has_alpha && channels == out_c;
  std::vector<uint8_t> raw;
  if (!direct) raw.resize(rowbytes * static_cast<size_t>(h));
  uint8_t* base = direct ? out.data_ptr<uint8_t>() : raw.data();
  std::vector<png_bytep> rows(static_cast<size_t>(h));
  for (int64_t y = 0; y < h; ++y) rows[y] = base + static_cast<size_t>(y) * rowbytes;
  if (!step_read(&r, rows.data())) fail(r, name);
  if (exif) {
    *exif = orientation(r, r.info);
    if (*exif == 1) *exif = orientation(r, r.end_info);
  }
  if (direct) return out;

  uint8_t* o = out.data_ptr<uint8_t>();
  const uint64_t m = depth == 16 ? 65535 : 255;
  const int64_t n = w * h;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t px[4];
    for (int k = 0; k < channels; ++k)
      px[k] = depth == 16 ? (static_cast<uint32_t>(raw[(i * channels + k) * 2]) << 8) | raw[(i * channels + k) * 2 + 1]
                          : raw[i * channels + k];
    for (int k = 0; k < out_c; ++k) {
      const uint32_t c = px[k < colour ? k : 0];
      if (mode == DecodeMode::kRgb && has_alpha)
        o[i * out_c + k] = over_white(c, px[channels - 1], m);
      else
        o[i * out_c + k] = static_cast<uint8_t>(depth == 16 ? to8(c) : c);
    }
  }
  return out;
}

}  // namespace diffnet::io_detail
