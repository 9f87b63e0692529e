// JPEG encoding with libjpeg-turbo: IJG tables at a quality, 4:2:0 chroma (PIL's default), baseline.
#include <cstdlib>
#include <cstring>
#include <string>

#include "diffnet/common.h"
#include "io/codec.h"
#include "io/jpeg_error.h"

namespace diffnet::io_detail {
namespace {

struct Encoder {
  jpeg_compress_struct cinfo;
  JpegErrorMgr err;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  bool created = false;
  Encoder() {
    std::memset(&cinfo, 0, sizeof(cinfo));
    jpeg_install_error_handler(&err, reinterpret_cast<jpeg_common_struct*>(&cinfo));
  }
  ~Encoder() {
    if (created) jpeg_destroy_compress(&cinfo);
    std::free(buffer);
  }
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;
};

bool step_encode(Encoder* e, const uint8_t* pixels, int width, int height, int channels, int quality) {
  if (setjmp(e->err.jump)) return false;
  jpeg_create_compress(&e->cinfo);
  e->created = true;
  jpeg_mem_dest(&e->cinfo, &e->buffer, &e->size);
  e->cinfo.image_width = static_cast<JDIMENSION>(width);
  e->cinfo.image_height = static_cast<JDIMENSION>(height);
  e->cinfo.input_components = channels;
  e->cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&e->cinfo);  // YCbCr with 2x2 luma sampling (4:2:0), islow DCT, no optimisation
  jpeg_set_quality(&e->cinfo, quality, TRUE);
  jpeg_start_compress(&e->cinfo, TRUE);
  const size_t stride = static_cast<size_t>(width) * channels;
  while (e->cinfo.next_scanline < e->cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels) + e->cinfo.next_scanline * stride;
    jpeg_write_scanlines(&e->cinfo, &row, 1);
  }
  jpeg_finish_compress(&e->cinfo);
  return true;
}

}  // namespace

std::vector<uint8_t> jpeg_encode(const at::Tensor& image, int quality) {
  if (quality < 1 || quality > 100)
    throw Error("encode_jpeg", "quality must be 1..100, got " + std::to_string(quality));
  at::Tensor t = image;
  if (t.dim() == 3 && t.size(2) == 1) t = t.squeeze(2);
  const bool ok_shape = t.dim() == 2 || (t.dim() == 3 && t.size(2) == 3);
  if (t.scalar_type() != at::kByte || !ok_shape)
    throw Error("encode_jpeg", "expected uint8 (H, W, 3) or (H, W), got " + std::string(t.toString()) + " " +
                                   c10::str(t.sizes()));
  if (t.size(0) < 1 || t.size(1) < 1 || t.size(0) > 65500 || t.size(1) > 65500)
    throw Error("encode_jpeg", "image size " + c10::str(t.sizes()) + " outside JPEG limits (1..65500)");
  t = t.to(at::kCPU).contiguous();
  const int channels = t.dim() == 2 ? 1 : 3;
  Encoder e;
  if (!step_encode(&e, t.data_ptr<uint8_t>(), static_cast<int>(t.size(1)), static_cast<int>(t.size(0)), channels,
                   quality))
    throw Error("encode_jpeg", std::string("JPEG: ") + e.err.message);
  return std::vector<uint8_t>(e.buffer, e.buffer + e.size);
}

}  // namespace diffnet::io_detail
