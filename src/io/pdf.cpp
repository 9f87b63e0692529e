// PDF pages: qpdf finds each page and, where the page is one embedded JPEG, copies that stream as stored;
// poppler renders the other pages. Compiled without them (no DIFFNET_HAVE_PDF), opening a PDF is an error.
#include "io/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "diffnet/common.h"

#if defined(DIFFNET_HAVE_PDF)
#define POINTERHOLDER_TRANSITION 4  // qpdf: std::shared_ptr throughout, no deprecation warning
#include <poppler/cpp/poppler-document.h>
#include <poppler/cpp/poppler-global.h>
#include <poppler/cpp/poppler-page-renderer.h>
#include <poppler/cpp/poppler-page.h>
#include <qpdf/Buffer.hh>
#include <qpdf/QPDF.hh>
#include <qpdf/QPDFExc.hh>
#include <qpdf/QPDFPageDocumentHelper.hh>
#include <qpdf/QPDFPageObjectHelper.hh>
#endif

namespace diffnet {

#if defined(DIFFNET_HAVE_PDF)
bool pdf_supported() { return true; }
#else
bool pdf_supported() { return false; }
#endif

namespace io_detail {

#if defined(DIFFNET_HAVE_PDF)
namespace {

// Poppler reports syntax problems through one global callback; they are not errors of ours (a page that
// cannot be rendered is: render_page returns an invalid image).
void quiet_poppler(const std::string&, void*) {}

// The JPEG bytes of an image XObject whose only filter is DCTDecode, else empty.
std::vector<uint8_t> dct_stream(QPDFObjectHandle image) {
  QPDFObjectHandle filter = image.getDict().getKey("/Filter");
  if (filter.isArray()) {
    if (filter.getArrayNItems() != 1) return {};
    filter = filter.getArrayItem(0);
  }
  if (!filter.isNameAndEquals("/DCTDecode")) return {};
  std::shared_ptr<Buffer> raw = image.getRawStreamData();  // decrypted, not decoded: the JPEG file
  const uint8_t* data = raw->getBuffer();
  return std::vector<uint8_t>(data, data + raw->getSize());
}

// The area that raster images cover in a content stream, in units of its page's default user space:
// each image XObject and inline image paints the unit square under the current transformation, whose area
// is |det| of the CTM (only the determinant is tracked: q/Q save and restore it, cm multiplies it). Form
// XObjects are followed, to a depth of 8, with their /Matrix and resources (the parent's when they have none);
// at most `forms_left` of them in all (a form drawn many times at every depth would be followed
// exponentially often): past that, `forms_left` is negative and the area is incomplete.
class ImageArea final : public QPDFObjectHandle::ParserCallbacks {
 public:
  ImageArea(QPDFObjectHandle resources, double det, int depth, int* forms_left)
      : resources_(resources), det_(det), depth_(depth), forms_left_(forms_left) {}
  double area = 0;

  void handleObject(QPDFObjectHandle obj) override {
    if (obj.isInlineImage()) {
      area += std::abs(det_);
      return;
    }
    if (!obj.isOperator()) {
      operands_.push_back(obj);
      return;
    }
    const std::string op = obj.getOperatorValue();
    if (op == "q") {
      saved_.push_back(det_);
    } else if (op == "Q") {
      if (!saved_.empty()) det_ = saved_.back(), saved_.pop_back();
    } else if (op == "cm" && operands_.size() == 6) {
      det_ *= determinant(operands_);
    } else if (op == "Do" && operands_.size() == 1 && operands_[0].isName()) {
      draw(operands_[0].getName());
    }
    operands_.clear();
  }
  void handleEOF() override {}

 private:
  // a·d − b·c of a matrix [a b c d e f] (0 when its entries are not numbers).
  static double determinant(std::vector<QPDFObjectHandle> v) {
    double m[4];
    for (size_t i = 0; i < 4; ++i) {
      if (!v[i].isNumber()) return 0;
      m[i] = v[i].getNumericValue();
    }
    return m[0] * m[3] - m[1] * m[2];
  }

  void draw(const std::string& name) {
    if (!resources_.isDictionary()) return;
    QPDFObjectHandle xobjects = resources_.getKey("/XObject");
    if (!xobjects.isDictionary()) return;
    QPDFObjectHandle x = xobjects.getKey(name);
    if (!x.isStream()) return;
    QPDFObjectHandle dict = x.getDict();
    if (dict.getKey("/Subtype").isNameAndEquals("/Image")) {
      area += std::abs(det_);
    } else if (dict.getKey("/Subtype").isNameAndEquals("/Form") && depth_ > 0 && --*forms_left_ >= 0) {
      QPDFObjectHandle matrix = dict.getKey("/Matrix");
      double det = det_;
      if (matrix.isArray() && matrix.getArrayNItems() == 6) det *= determinant(matrix.getArrayAsVector());
      QPDFObjectHandle own = dict.getKey("/Resources");
      ImageArea inner(own.isDictionary() ? own : resources_, det, depth_ - 1, forms_left_);
      x.parseAsContents(&inner);
      area += inner.area;
    }
  }

  QPDFObjectHandle resources_;
  double det_;
  int depth_;
  int* forms_left_;
  std::vector<double> saved_;
  std::vector<QPDFObjectHandle> operands_;
};

// True when raster images cover less than half of the page's crop box: text and vector graphics mostly,
// a born-digital page (a scanned page is one image over the whole page). A page whose content cannot be
// parsed, or that draws more than 256 form XObjects, counts as covered.
bool mostly_vector(QPDFPageObjectHelper page) {
  try {
    QPDFObjectHandle::Rectangle box = page.getCropBox().getArrayAsRectangle();
    const double page_area = std::abs((box.urx - box.llx) * (box.ury - box.lly));
    if (!(page_area > 0)) return false;
    int forms_left = 256;
    ImageArea images(page.getAttribute("/Resources", false), 1.0, 8, &forms_left);
    page.parseContents(&images);
    return forms_left >= 0 && images.area < 0.5 * page_area;
  } catch (const std::exception&) {
    return false;
  }
}

class PdfPages final : public PageSource {
 public:
  PdfPages(const std::string& path, std::vector<uint8_t> bytes, const DocumentOptions& opt)
      : path_(path), bytes_(std::move(bytes)), opt_(opt) {
    if (!(opt_.pdf_dpi >= 10 && opt_.pdf_dpi <= 1200)) throw Error("pdf_dpi", "must be in [10, 1200]");
    pdf_.setSuppressWarnings(true);
    try {
      pdf_.processMemoryFile(path_.c_str(), reinterpret_cast<const char*>(bytes_.data()), bytes_.size());
      pages_ = QPDFPageDocumentHelper(pdf_).getAllPages();
    } catch (const QPDFExc& e) {
      if (e.getErrorCode() == qpdf_e_password) throw Error(path_, "the PDF is encrypted: a password is needed to open it");
      throw Error(path_, "not a readable PDF: " + e.getMessageDetail());
    } catch (const std::exception& e) {
      throw Error(path_, std::string("not a readable PDF: ") + e.what());
    }
    if (pages_.empty()) throw Error(path_, "the PDF has no pages");
    if (int64_t(pages_.size()) > opt_.max_pages)
      throw Error(path_, "the PDF has " + std::to_string(pages_.size()) + " pages, over the limit of " +
                             std::to_string(opt_.max_pages));
  }

  int64_t pages() const override { return int64_t(pages_.size()); }

  DocumentPage page(int64_t index) override {
    DocumentPage pg;
    pg.page = index + 1;
    pg.name = page_name(path_, pg.page);
    ImageInfo info;
    try {
      pg.encoded = page_jpeg(pages_.at(size_t(index)), &info);
    } catch (const std::exception&) {
      pg.encoded.clear();  // an unreadable image stream or JPEG header: render the page instead
    }
    if (!pg.encoded.empty()) {
      check_pixel_limit(info.width, info.height, pg.name, DecodeOptions{false, opt_.max_pixels, nullptr});
      pg.source = "pdf-jpeg";
      return pg;
    }
    pg.rgb = render(index, pg.name);
    pg.source = "pdf-render";
    pg.born_digital = mostly_vector(pages_.at(size_t(index)));
    return pg;
  }

 private:
  // The page's JPEG when the page is one: exactly one image XObject in its resources, no form XObjects,
  // the image's only filter DCTDecode, and a JPEG our decoder takes (not CMYK/YCCK). Else empty.
  std::vector<uint8_t> page_jpeg(QPDFPageObjectHelper page, ImageInfo* info) {
    std::map<std::string, QPDFObjectHandle> images = page.getImages();
    if (images.size() != 1 || !page.getFormXObjects().empty()) return {};
    std::vector<uint8_t> jpeg = dct_stream(images.begin()->second);
    if (jpeg.empty() || !is_jpeg_bytes(jpeg.data(), jpeg.size())) return {};
    DecodeOptions no_limit;
    no_limit.max_pixels = 0;  // the caller applies the limit, naming the page
    *info = read_image_info_bytes(jpeg, path_, no_limit);
    // Not luma first (CMYK, YCCK, RGB components): our coefficient reader refuses them; render instead.
    if (info->color_space == "cmyk" || info->color_space == "ycck" || info->color_space == "rgb") return {};
    return jpeg;
  }

  at::Tensor render(int64_t index, const std::string& name) {
    if (!doc_) {
      // Kept only once usable: a locked document (poppler holds no catalog then) must never be asked for
      // a page, also not on the next call after this one threw (found by fuzz_document).
      poppler::set_debug_error_function(quiet_poppler, nullptr);
      std::unique_ptr<poppler::document> doc(poppler::document::load_from_raw_data(
          reinterpret_cast<const char*>(bytes_.data()), int(std::min<size_t>(bytes_.size(), INT32_MAX))));
      if (!doc) throw Error(path_, "poppler cannot open this PDF to render its pages");
      if (doc->is_locked()) throw Error(path_, "the PDF is encrypted: a password is needed to render it");
      doc_ = std::move(doc);
    }
    if (index >= doc_->pages()) throw Error(name, "poppler finds only " + std::to_string(doc_->pages()) + " page(s)");
    std::unique_ptr<poppler::page> page(doc_->create_page(int(index)));
    if (!page) throw Error(name, "poppler cannot read this page");
    const poppler::rectf box = page->page_rect(poppler::crop_box);
    const double scale = opt_.pdf_dpi / 72.0;
    const double w = std::ceil(box.width() * scale), h = std::ceil(box.height() * scale);
    if (!(w >= 1 && h >= 1)) throw Error(name, "the page has no area");
    // A page box of absurd size (fuzz_document found one of 4e95 points) is refused before the sizes are
    // made integers (the conversion would be undefined), whatever the pixel limit.
    constexpr double kMaxSide = double(1 << 30);
    if (!(w <= kMaxSide && h <= kMaxSide))
      throw Error(name, "the page is too large to render at " + std::to_string(int(opt_.pdf_dpi)) + " dpi");
    check_pixel_limit(int64_t(w), int64_t(h), name, DecodeOptions{false, opt_.max_pixels, nullptr});
    poppler::page_renderer renderer;
    renderer.set_render_hint(poppler::page_renderer::antialiasing, true);
    renderer.set_render_hint(poppler::page_renderer::text_antialiasing, true);
    renderer.set_image_format(poppler::image::format_argb32);
    renderer.set_paper_color(0xffffffff);
    poppler::image img = renderer.render_page(page.get(), opt_.pdf_dpi, opt_.pdf_dpi);
    if (!img.is_valid()) throw Error(name, "poppler could not render this page");
    const int64_t H = img.height(), W = img.width();
    at::Tensor rgb = at::empty({H, W, 3}, at::kByte);
    uint8_t* out = rgb.data_ptr<uint8_t>();
    for (int64_t y = 0; y < H; ++y) {
      const char* row = img.const_data() + y * img.bytes_per_row();
      for (int64_t x = 0; x < W; ++x) {
        uint32_t v;  // 0xAARRGGBB in native byte order; the white paper makes every pixel opaque
        std::memcpy(&v, row + 4 * x, 4);
        uint8_t* o = out + (y * W + x) * 3;
        o[0] = uint8_t(v >> 16), o[1] = uint8_t(v >> 8), o[2] = uint8_t(v);
      }
    }
    return rgb;
  }

  std::string path_;
  std::vector<uint8_t> bytes_;  // qpdf and poppler read from this buffer
  DocumentOptions opt_;
  QPDF pdf_;
  std::vector<QPDFPageObjectHelper> pages_;
  std::unique_ptr<poppler::document> doc_;
};

}  // namespace

std::unique_ptr<PageSource> open_pdf(const std::string& path, std::vector<uint8_t> bytes, const DocumentOptions& opt) {
  return std::make_unique<PdfPages>(path, std::move(bytes), opt);
}

#else

std::unique_ptr<PageSource> open_pdf(const std::string& path, std::vector<uint8_t>, const DocumentOptions&) {
  throw Error(path, "this build cannot read PDF files (install libqpdf-dev and libpoppler-cpp-dev, then rebuild)");
}

#endif

}  // namespace io_detail
}  // namespace diffnet
