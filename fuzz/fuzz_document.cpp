// PDF and TIFF pages as `predict` and `serve` read them (DocumentReader from an upload's bytes), under
// small limits (8 pages, 4 MP per page, PDF pages rendered at 20 dpi): every page is its JPEG/PNG bytes
// or an RGB image within the limit, named "<name>#<page>".
#include "diffnet/common.h"
#include "diffnet/document.h"
#include "fuzz/fuzz_target.h"

DIFFNET_FUZZ_TARGET(document) {
  diffnet::DocumentOptions opt;
  opt.max_pages = 8;
  opt.max_pixels = 4'000'000;
  opt.pdf_dpi = 20;
  diffnet::DocumentReader doc(std::vector<uint8_t>(data, data + size), "fuzz", opt);
  if (doc.pages() < 1 || doc.pages() > opt.max_pages) __builtin_trap();
  for (int64_t i = 0; i < doc.pages(); ++i) {
    diffnet::DocumentPage page;
    try {
      page = doc.page(i);
    } catch (const diffnet::Error&) {
      continue;  // one bad page: the next is still readable
    }
    if (doc.format() != "image" && page.name != "fuzz#" + std::to_string(i + 1)) __builtin_trap();
    if (page.encoded.empty()) {
      const at::Tensor& rgb = page.rgb;
      if (!rgb.defined() || rgb.dim() != 3 || rgb.size(2) != 3 || rgb.scalar_type() != at::kByte ||
          !rgb.is_contiguous() || rgb.size(0) * rgb.size(1) > opt.max_pixels)
        __builtin_trap();
    }
  }
}
