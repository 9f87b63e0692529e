// PNG encoding with libpng: 8-bit gray, RGB or RGBA, into memory.
#include <png.h>

#include <cstring>
#include <string>
#include <vector>

#include "diffnet/common.h"
#include "io/codec.h"

namespace diffnet::io_detail {
namespace {

struct Writer {
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::vector<uint8_t>* out = nullptr;
  char message[256] = {0};
  ~Writer() {
    if (png) png_destroy_write_struct(&png, info ? &info : nullptr);
  }
};

extern "C" void on_error(png_structp png, png_const_charp msg) {
  auto* w = static_cast<Writer*>(png_get_error_ptr(png));
  std::snprintf(w->message, sizeof(w->message), "%s", msg ? msg : "unknown error");
  png_longjmp(png, 1);
}
extern "C" void on_warning(png_structp, png_const_charp) {}

extern "C" void on_write(png_structp png, png_bytep data, png_size_t n) {
  auto* w = static_cast<Writer*>(png_get_io_ptr(png));
  bool ok = true;
  try {
    w->out->insert(w->out->end(), data, data + n);
  } catch (...) {
    ok = false;  // no C++ exception may cross libpng's C frames
  }
  if (!ok) png_error(png, "out of memory");
}
extern "C" void on_flush(png_structp) {}

bool step_write(Writer* w, png_bytepp rows, int width, int height, int color_type) {
  if (setjmp(png_jmpbuf(w->png))) return false;
  png_set_write_fn(w->png, w, on_write, on_flush);
  png_set_IHDR(w->png, w->info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(w->png, w->info);
  png_write_image(w->png, rows);
  png_write_end(w->png, nullptr);
  return true;
}

}  // namespace

std::vector<uint8_t> png_encode(const at::Tensor& image) {
  at::Tensor t = image;
  if (t.dim() == 2) t = t.unsqueeze(2);
  if (t.scalar_type() != at::kByte || t.dim() != 3 || !(t.size(2) == 1 || t.size(2) == 3 || t.size(2) == 4))
    throw Error("encode_png", "expected uint8 (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), got " +
                                  std::string(image.toString()) + " " + c10::str(image.sizes()));
  if (t.size(0) < 1 || t.size(1) < 1 || t.size(0) > (1 << 24) || t.size(1) > (1 << 24))
    throw Error("encode_png", "image size " + c10::str(image.sizes()) + " outside PNG limits");
  t = t.to(at::kCPU).contiguous();
  const int h = static_cast<int>(t.size(0)), w = static_cast<int>(t.size(1)), c = static_cast<int>(t.size(2));
  const int color = c == 1 ? PNG_COLOR_TYPE_GRAY : (c == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_RGB_ALPHA);
  std::vector<png_bytep> rows(h);
  uint8_t* base = t.data_ptr<uint8_t>();
  for (int y = 0; y < h; ++y) rows[y] = base + static_cast<size_t>(y) * w * c;
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(h) * w * c / 4 + 1024);
  Writer wr;
  wr.out = &out;
  wr.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &wr, on_error, on_warning);
  if (!wr.png) throw Error("encode_png", "cannot create encoder");
  wr.info = png_create_info_struct(wr.png);
  if (!wr.info) throw Error("encode_png", "cannot create encoder");
  if (!step_write(&wr, rows.data(), w, h, color)) throw Error("encode_png", std::string("PNG: ") + wr.message);
  return out;
}

}  // namespace diffnet::io_detail
