// DocumentReader: sniffs a file's format and hands out its pages (PDF and TIFF through their page sources,
// a JPEG/PNG file as one page of bytes).
#include "diffnet/document.h"

#include <algorithm>
#include <cstring>

#include "diffnet/common.h"
#include "io/codec.h"

namespace diffnet {
namespace {

bool starts(const uint8_t* data, size_t size, const char* magic, size_t n) {
  return size >= n && std::memcmp(data, magic, n) == 0;
}

}  // namespace

std::string sniff_document_format(const uint8_t* data, size_t size) {
  const size_t head = std::min<size_t>(size, 1024);
  // A PDF may have bytes before its header (readers accept "%PDF-" within the first 1 KiB).
  const char* pdf_magic = "%PDF-";
  if (std::search(data, data + head, pdf_magic, pdf_magic + 5) != data + head && !is_jpeg_bytes(data, head) &&
      !is_png_bytes(data, head))
    return "pdf";
  if (starts(data, size, "II*\0", 4) || starts(data, size, "MM\0*", 4) || starts(data, size, "II+\0", 4) ||
      starts(data, size, "MM\0+", 4))
    return "tiff";
  return "image";
}

std::string page_name(const std::string& file, int64_t page) { return file + "#" + std::to_string(page); }

struct DocumentReader::Impl {
  std::string path, format;
  std::unique_ptr<io_detail::PageSource> pages;  // PDF, TIFF
  std::vector<uint8_t> image;                    // a JPEG/PNG (or unknown) file's bytes
};

DocumentReader::DocumentReader(const std::string& path, const DocumentOptions& opt)
    : DocumentReader(read_file(path), path, opt) {}

DocumentReader::DocumentReader(std::vector<uint8_t> bytes, const std::string& name, const DocumentOptions& opt)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = name;
  if (opt.max_pages < 1) throw Error("max_pages", "must be >= 1");
  if (bytes.empty()) throw Error(name, "the file is empty");
  impl_->format = sniff_document_format(bytes.data(), bytes.size());
  if (impl_->format == "pdf")
    impl_->pages = io_detail::open_pdf(name, std::move(bytes), opt);
  else if (impl_->format == "tiff")
    impl_->pages = io_detail::open_tiff(name, std::move(bytes), opt);
  else
    impl_->image = std::move(bytes);
}

DocumentReader::~DocumentReader() = default;
const std::string& DocumentReader::path() const { return impl_->path; }
const std::string& DocumentReader::format() const { return impl_->format; }
int64_t DocumentReader::pages() const { return impl_->pages ? impl_->pages->pages() : 1; }

DocumentPage DocumentReader::page(int64_t index) {
  if (index < 0 || index >= pages())
    throw Error(impl_->path, "no page " + std::to_string(index + 1) + " (it has " + std::to_string(pages()) + ")");
  if (impl_->pages) return impl_->pages->page(index);
  DocumentPage pg;
  pg.name = impl_->path;
  pg.encoded = impl_->image;
  pg.source = "image";
  return pg;
}

bool is_input_document_name(const std::string& name) {
  const std::string ext = file_extension(name);
  for (const char* e : {".jpg", ".jpeg", ".png", ".pdf", ".tif", ".tiff"})
    if (ext == e) return true;
  return false;
}

}  // namespace diffnet
