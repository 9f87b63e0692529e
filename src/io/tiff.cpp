// TIFF pages (every directory of the file) decoded by libtiff's RGBA interface, which takes every
// compression libtiff knows (none, LZW, Deflate, PackBits, CCITT G3/G4, JPEG) and every photometric
// (bilevel, gray, palette, RGB, YCbCr, CMYK). Compiled without libtiff (no DIFFNET_HAVE_TIFF), an error.
#include "io/codec.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "diffnet/common.h"

#if defined(DIFFNET_HAVE_TIFF)
#include <tiffio.h>
#endif

namespace diffnet {

#if defined(DIFFNET_HAVE_TIFF)
bool tiff_supported() { return true; }
#else
bool tiff_supported() { return false; }
#endif

namespace io_detail {

#if defined(DIFFNET_HAVE_TIFF)
namespace {

// libtiff reports through process-wide handlers: the last error of this thread is kept for our message;
// warnings (unknown tags and the like) are dropped.
thread_local std::string t_last_error;
void on_error(const char* module, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  t_last_error = buf;
}
void on_warning(const char*, const char*, va_list) {}

std::string last_error() { return t_last_error.empty() ? "libtiff failed" : t_last_error; }

// The file's bytes as a read-only libtiff stream (memory-mapped for libtiff, which then reads in place).
struct MemStream {
  const std::vector<uint8_t>* bytes;
  uint64_t pos = 0;
};
tmsize_t mem_read(thandle_t h, void* buf, tmsize_t n) {
  auto* m = static_cast<MemStream*>(h);
  const uint64_t size = m->bytes->size();
  const uint64_t k = m->pos >= size ? 0 : std::min<uint64_t>(uint64_t(n), size - m->pos);
  if (k) std::memcpy(buf, m->bytes->data() + m->pos, k);
  m->pos += k;
  return tmsize_t(k);
}
tmsize_t mem_write(thandle_t, void*, tmsize_t) { return 0; }
toff_t mem_seek(thandle_t h, toff_t off, int whence) {
  auto* m = static_cast<MemStream*>(h);
  const uint64_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->bytes->size() : 0;
  m->pos = base + off;
  return m->pos;
}
int mem_close(thandle_t) { return 0; }
toff_t mem_size(thandle_t h) { return static_cast<MemStream*>(h)->bytes->size(); }
int mem_map(thandle_t h, void** base, toff_t* size) {
  auto* m = static_cast<MemStream*>(h);
  *base = const_cast<uint8_t*>(m->bytes->data());
  *size = m->bytes->size();
  return 1;
}
void mem_unmap(thandle_t, void*, toff_t) {}

class TiffPages final : public PageSource {
 public:
  TiffPages(const std::string& path, std::vector<uint8_t> bytes, const DocumentOptions& opt)
      : path_(path), bytes_(std::move(bytes)), stream_{&bytes_}, opt_(opt) {
    TIFFSetErrorHandler(on_error);
    TIFFSetWarningHandler(on_warning);
    t_last_error.clear();
    tif_.reset(TIFFClientOpen(path_.c_str(), "rm", &stream_, mem_read, mem_write, mem_seek, mem_close, mem_size,
                              mem_map, mem_unmap));
    if (!tif_) throw Error(path_, "not a readable TIFF: " + last_error());
    int64_t n = 0;
    do {
      if (++n > opt_.max_pages)
        throw Error(path_, "the TIFF has more than " + std::to_string(opt_.max_pages) + " pages (the limit)");
    } while (TIFFReadDirectory(tif_.get()));
    pages_ = n;
  }

  int64_t pages() const override { return pages_; }

  DocumentPage page(int64_t index) override {
    DocumentPage pg;
    pg.page = index + 1;
    pg.name = page_name(path_, pg.page);
    pg.source = "tiff";
    t_last_error.clear();
    if (!TIFFSetDirectory(tif_.get(), tdir_t(index))) throw Error(pg.name, "cannot read this page: " + last_error());
    uint32_t w = 0, h = 0;
    TIFFGetField(tif_.get(), TIFFTAG_IMAGEWIDTH, &w);
    TIFFGetField(tif_.get(), TIFFTAG_IMAGELENGTH, &h);
    if (w == 0 || h == 0) throw Error(pg.name, "the page has no pixels");
    check_pixel_limit(w, h, pg.name, DecodeOptions{false, opt_.max_pixels, nullptr});
    char emsg[1024] = "";
    if (!TIFFRGBAImageOK(tif_.get(), emsg)) throw Error(pg.name, std::string("cannot decode this page: ") + emsg);
    std::vector<uint32_t> raster(size_t(w) * h);
    if (!TIFFReadRGBAImageOriented(tif_.get(), w, h, raster.data(), ORIENTATION_TOPLEFT, /*stop on error*/ 1))
      throw Error(pg.name, "cannot decode this page: " + last_error());
    // Alpha (premultiplied in the RGBA interface's output) is composited over white, as for PNG.
    pg.rgb = at::empty({int64_t(h), int64_t(w), 3}, at::kByte);
    uint8_t* out = pg.rgb.data_ptr<uint8_t>();
    for (size_t i = 0; i < raster.size(); ++i) {
      const uint32_t v = raster[i];
      const int white = 255 - int(TIFFGetA(v));
      out[3 * i + 0] = uint8_t(std::min(255, int(TIFFGetR(v)) + white));
      out[3 * i + 1] = uint8_t(std::min(255, int(TIFFGetG(v)) + white));
      out[3 * i + 2] = uint8_t(std::min(255, int(TIFFGetB(v)) + white));
    }
    return pg;
  }

 private:
  std::string path_;
  std::vector<uint8_t> bytes_;
  MemStream stream_;
  DocumentOptions opt_;
  std::unique_ptr<TIFF, void (*)(TIFF*)> tif_{nullptr, TIFFClose};
  int64_t pages_ = 0;
};

}  // namespace

std::unique_ptr<PageSource> open_tiff(const std::string& path, std::vector<uint8_t> bytes, const DocumentOptions& opt) {
  return std::make_unique<TiffPages>(path, std::move(bytes), opt);
}

#else

std::unique_ptr<PageSource> open_tiff(const std::string& path, std::vector<uint8_t>, const DocumentOptions&) {
  throw Error(path, "this build cannot read TIFF files (install libtiff-dev, then rebuild)");
}

#endif

}  // namespace io_detail
}  // namespace diffnet
