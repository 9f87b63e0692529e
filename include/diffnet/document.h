// Inputs of several pages: PDF (qpdf + poppler) and TIFF (libtiff), beside plain JPEG/PNG files, read page
// by page. A PDF page that is one embedded JPEG is handed on as that JPEG's bytes exactly as stored, so its
// DCT traces are the scanner's; other PDF pages are rendered; TIFF pages are decoded to pixels.
// Errors are diffnet::Error("<file>: <reason>"): broken or encrypted files, too many pages or pixels,
// a build without PDF/TIFF support. Policies and limits: docs/io.md ("Documents").
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace diffnet {

struct DocumentOptions {
  double pdf_dpi = 200;              // resolution of rendered PDF pages (pages without one embedded JPEG)
  int64_t max_pages = 500;           // a file with more pages is refused
  int64_t max_pixels = 100'000'000;  // per page, checked before decoding or rendering; <= 0: no limit
};

struct DocumentPage {
  std::string name;               // "<file>#<page>" for pages of PDF/TIFF files; the file itself for JPEG/PNG
  int64_t page = 0;               // 1-based page of a PDF/TIFF file; 0 for a JPEG/PNG file
  std::vector<uint8_t> encoded;   // a JPEG/PNG to analyse as stored: the file itself, or a PDF page's JPEG
  at::Tensor rgb;                 // else: the page's pixels, uint8 (H, W, 3)
  std::string source;             // "image" | "pdf-jpeg" | "pdf-render" | "tiff"
  // A "pdf-render" page whose raster images (image XObjects, also inside forms, and inline images) cover
  // less than half of its area: text and vector graphics mostly, a page that was never printed and scanned.
  bool born_digital = false;
};

// Opens a file and says how many pages it has; pages are read one at a time (bounded memory). The format
// is sniffed from the bytes: PDF ("%PDF-" in the first 1 KiB), TIFF ("II*\0", "MM\0*", BigTIFF), else the
// file is one page of bytes for the JPEG/PNG decoder (which names what it cannot read).
class DocumentReader {
 public:
  explicit DocumentReader(const std::string& path, const DocumentOptions& opt = {});
  // The same from a file's bytes (an upload); `name` stands for the path in page names and errors.
  DocumentReader(std::vector<uint8_t> bytes, const std::string& name, const DocumentOptions& opt = {});
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  const std::string& path() const;   // the path, or the name given with the bytes
  const std::string& format() const;  // "pdf" | "tiff" | "image"
  int64_t pages() const;
  DocumentPage page(int64_t index);   // 0-based

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The format DocumentReader gives a file from its first bytes: "pdf" ("%PDF-" within the first 1 KiB,
// unless the bytes start as a JPEG or PNG), "tiff" ("II*\0", "MM\0*", BigTIFF "II+\0", "MM\0+"), else "image".
std::string sniff_document_format(const uint8_t* data, size_t size);

// The name of page `page` (1-based) of `file` in records, outputs and errors: "<file>#<page>".
std::string page_name(const std::string& file, int64_t page);

// Whether this build reads PDF / TIFF files (CMake found qpdf and poppler-cpp / libtiff).
bool pdf_supported();
bool tiff_supported();

// True for the extensions of files a directory listing hands to DocumentReader: .jpg .jpeg .png .pdf
// .tif .tiff (case-insensitive).
bool is_input_document_name(const std::string& name);

}  // namespace diffnet
