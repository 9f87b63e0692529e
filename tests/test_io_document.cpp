// PDF and TIFF pages against files made by img2pdf, qpdf, PIL and tiffcp (tests/data/io/README.md): a
// scanned PDF's JPEGs come back byte for byte, a rendered page reproduces the image it holds, every TIFF
// compression decodes to the pixels of its source, and bad files are one-line errors.
#include "diffnet/common.h"
#include "diffnet/document.h"
#include "diffnet/image_io.h"
#include "test_io_util.h"
#include "testing.h"

using namespace diffnet;
using testutil::expect_error;
using testutil::io;
using testutil::read_pnm;

namespace {

// Mean and max absolute difference of two uint8 images of one shape.
std::pair<double, int64_t> diff(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor d = (a.to(at::kInt) - b.to(at::kInt)).abs();
  return {d.to(at::kDouble).mean().item<double>(), d.max().item<int64_t>()};
}

at::Tensor gray_to_rgb(const at::Tensor& g) { return g.unsqueeze(2).expand({g.size(0), g.size(1), 3}).contiguous(); }

#define REQUIRE_PDF() \
  if (!pdf_supported()) GTEST_SKIP() << "built without qpdf/poppler-cpp (make's builds require them)"
#define REQUIRE_TIFF() \
  if (!tiff_supported()) GTEST_SKIP() << "built without libtiff (make's builds require it)"

}  // namespace

TEST(Documents, ScannedPdfPagesAreTheirJpegsByteForByte) {
  REQUIRE_PDF();
  DocumentReader doc(io("scan2.pdf"));
  EXPECT_EQ(doc.format(), "pdf");
  ASSERT_EQ(doc.pages(), 2);
  const char* sources[] = {"doc_q80_420.jpg", "doc_q90_444.jpg"};
  for (int i = 0; i < 2; ++i) {
    DocumentPage pg = doc.page(i);
    EXPECT_EQ(pg.page, i + 1);
    EXPECT_EQ(pg.name, io("scan2.pdf") + "#" + std::to_string(i + 1));
    EXPECT_EQ(pg.source, "pdf-jpeg");
    EXPECT_FALSE(pg.rgb.defined());
    EXPECT_TRUE(pg.encoded == read_file(io(sources[i]))) << "page " << i + 1 << " is not its JPEG as stored";
  }
  expect_error([&] { doc.page(2); }, "scan2.pdf", "no page 3");
}

TEST(Documents, PdfPageWithoutAJpegIsRendered) {
  REQUIRE_PDF();
  // img2pdf placed doc.png (256x192, Flate) on a page at 96 dpi: rendered at 96 dpi, the page is the PNG.
  DocumentOptions opt;
  opt.pdf_dpi = 96;
  DocumentReader doc(io("png.pdf"), opt);
  ASSERT_EQ(doc.pages(), 1);
  DocumentPage pg = doc.page(0);
  EXPECT_EQ(pg.source, "pdf-render");
  EXPECT_TRUE(pg.encoded.empty());
  at::Tensor want = decode_image(io("doc.png"));
  ASSERT_EQ(pg.rgb.sizes(), want.sizes());
  // Poppler resamples the image (edges soften), so: exact wherever the PNG is flat (its 3x3 neighbourhood
  // one colour: channel order, placement, paper), and close on average.
  at::Tensor w = want.permute({2, 0, 1}).unsqueeze(0).to(at::kFloat);
  at::Tensor range = at::max_pool2d(w, 3, 1, 1) + at::max_pool2d(-w, 3, 1, 1);
  at::Tensor flat = (range.amax(1).squeeze(0) == 0).unsqueeze(2).expand_as(want);
  ASSERT_GT(flat.to(at::kDouble).mean().item<double>(), 0.5) << "the fixture should be mostly flat";
  EXPECT_TRUE(pg.rgb.masked_select(flat).equal(want.masked_select(flat)));
  auto [mean, mx] = diff(pg.rgb, want);
  EXPECT_LT(mean, 12.0);
  // Twice the dpi: twice the size in each direction.
  opt.pdf_dpi = 192;
  DocumentPage big = DocumentReader(io("png.pdf"), opt).page(0);
  EXPECT_EQ(big.rgb.size(0), 2 * want.size(0));
  EXPECT_EQ(big.rgb.size(1), 2 * want.size(1));
}

// A rendered page is born_digital when raster images cover less than half of it (Ghostscript's PDFs: text
// only; text and an 8x8 inline image drawn 48 pt square, 7 % of the page), not when an image covers it
// (img2pdf's Flate page; Ghostscript's inline image scaled to the whole page under a text layer, and the
// same image inside a form XObject whose /Matrix scales it to the page); a JPEG page never is. A page that
// draws forms 300 times (vector squares only) is past the 256 forms followed, so it counts as covered.
TEST(Documents, PdfPagesMostlyOfTextAndVectorsAreBornDigital) {
  REQUIRE_PDF();
  DocumentOptions opt;
  opt.pdf_dpi = 96;
  DocumentPage text = DocumentReader(io("text.pdf"), opt).page(0);
  EXPECT_EQ(text.source, "pdf-render");
  EXPECT_TRUE(text.born_digital);
  ASSERT_EQ(text.rgb.sizes(), (std::vector<int64_t>{192, 288, 3}));  // 3 x 2 inches at 96 dpi
  EXPECT_LT(text.rgb.min().item<int64_t>(), 64) << "the text should be drawn";
  const std::pair<const char*, bool> want[] = {{"inline.pdf", true},       {"inline_page.pdf", false},
                                               {"form_page.pdf", false},   {"png.pdf", false},
                                               {"many_forms.pdf", false}};
  for (const auto& [file, born_digital] : want) {
    DocumentPage pg = DocumentReader(io(file), opt).page(0);
    EXPECT_EQ(pg.source, "pdf-render") << file;
    EXPECT_EQ(pg.born_digital, born_digital) << file;
  }
  DocumentPage jpeg = DocumentReader(io("scan2.pdf"), opt).page(0);
  EXPECT_EQ(jpeg.source, "pdf-jpeg");
  EXPECT_FALSE(jpeg.born_digital);
}

TEST(Documents, TiffPagesDecodeEveryCompression) {
  REQUIRE_TIFF();
  DocumentReader doc(io("pages.tif"));
  EXPECT_EQ(doc.format(), "tiff");
  ASSERT_EQ(doc.pages(), 4);
  const at::Tensor rgb = decode_image(io("doc.png"));
  struct Want {
    at::Tensor pixels;
    double max_mean;
    int64_t max_abs;
  };
  const Want want[] = {
      {rgb, 0, 0},                                       // LZW RGB: lossless
      {gray_to_rgb(read_pnm(io("gray.pgm"))), 0, 0},     // Deflate gray: lossless
      {gray_to_rgb(read_pnm(io("mono.pgm"))), 0, 0},     // CCITT G4 bilevel: lossless
      {read_pnm(io("pages_p4.ppm")), 0, 0},             // JPEG (YCbCr, quality 95): PIL's decode
  };
  for (int i = 0; i < 4; ++i) {
    DocumentPage pg = doc.page(i);
    EXPECT_EQ(pg.name, io("pages.tif") + "#" + std::to_string(i + 1));
    EXPECT_EQ(pg.source, "tiff");
    ASSERT_EQ(pg.rgb.sizes(), want[i].pixels.sizes()) << "page " << i + 1;
    auto [mean, mx] = diff(pg.rgb, want[i].pixels);
    EXPECT_LE(mean, want[i].max_mean) << "page " << i + 1;
    EXPECT_LE(mx, want[i].max_abs) << "page " << i + 1;
  }
}

TEST(Documents, PlainImagesAreOnePageOfBytes) {
  DocumentReader doc(io("doc_q80_420.jpg"));
  EXPECT_EQ(doc.format(), "image");
  ASSERT_EQ(doc.pages(), 1);
  DocumentPage pg = doc.page(0);
  EXPECT_EQ(pg.page, 0);
  EXPECT_EQ(pg.name, io("doc_q80_420.jpg"));
  EXPECT_TRUE(pg.encoded == read_file(io("doc_q80_420.jpg")));
  // The sniff DocumentReader and the service share: by bytes, not by name.
  auto sniff = [](const std::vector<uint8_t>& b) { return sniff_document_format(b.data(), b.size()); };
  EXPECT_EQ(sniff(read_file(io("scan2.pdf"))), "pdf");
  EXPECT_EQ(sniff(read_file(io("pages.tif"))), "tiff");
  EXPECT_EQ(sniff(read_file(io("doc_q80_420.jpg"))), "image");
  const std::string junk_pdf = "garbage before the header\n%PDF-1.4\n", big_tiff("MM\0+\0\x08", 6);
  EXPECT_EQ(sniff(std::vector<uint8_t>(junk_pdf.begin(), junk_pdf.end())), "pdf");
  EXPECT_EQ(sniff(std::vector<uint8_t>(big_tiff.begin(), big_tiff.end())), "tiff");
  EXPECT_EQ(page_name("a/x.pdf", 3), "a/x.pdf#3");
  EXPECT_TRUE(is_input_document_name("a/B.PDF") && is_input_document_name("x.tiff") && is_input_document_name("y.Tif"));
  EXPECT_FALSE(is_input_document_name("notes.txt") || is_input_document_name("pdf"));
}

TEST(Documents, BadFilesAreOneLineErrors) {
  REQUIRE_PDF();
  REQUIRE_TIFF();
  expect_error([] { DocumentReader d(io("encrypted.pdf")); }, "encrypted.pdf", "encrypted");
  DocumentOptions one_page;
  one_page.max_pages = 1;
  expect_error([&] { DocumentReader d(io("scan2.pdf"), one_page); }, "scan2.pdf", "over the limit of 1");
  expect_error([&] { DocumentReader d(io("pages.tif"), one_page); }, "pages.tif", "more than 1 pages");
  DocumentOptions small;
  small.max_pixels = 1000;  // doc_q80_420.jpg is 256x192
  expect_error([&] { DocumentReader(io("scan2.pdf"), small).page(0); }, "scan2.pdf#1", "limit");
  expect_error([&] { DocumentReader(io("pages.tif"), small).page(0); }, "pages.tif#1", "limit");
  small.pdf_dpi = 96;
  expect_error([&] { DocumentReader(io("png.pdf"), small).page(0); }, "png.pdf#1", "limit");
  // Truncated files: the first 400 bytes of each.
  std::vector<uint8_t> pdf = read_file(io("scan2.pdf")), tif = read_file(io("pages.tif"));
  pdf.resize(400);
  tif.resize(400);
  const std::string bad_pdf = testutil::write_temp_bytes("doc", "cut.pdf", pdf);
  const std::string bad_tif = testutil::write_temp_bytes("doc", "cut.tif", tif);
  expect_error([&] { DocumentReader d(bad_pdf); }, "cut.pdf", "PDF");
  expect_error(
      [&] {
        DocumentReader d(bad_tif);
        for (int64_t i = 0; i < d.pages(); ++i) d.page(i);
      },
      "cut.tif", "");
  expect_error([] { DocumentReader d(io("no-such-file.pdf")); }, "no-such-file.pdf", "cannot open");
  expect_error([] { DocumentReader d(std::vector<uint8_t>{}, "empty.pdf"); }, "empty.pdf", "the file is empty");
}

TEST(Documents, AbsurdPageBoxIsRefusedBeforeItsSizeIsComputed) {
  REQUIRE_PDF();
  // fuzz_document's input: a page box of 4e95 pixels at 200 dpi (its conversion to an integer was
  // undefined behaviour). Reading the pages gives that page as a one-line error, nothing else.
  DocumentReader d(testutil::source_path("fuzz/crashes/document/huge-page-box.pdf"));
  int too_large = 0;
  for (int64_t i = 0; i < d.pages(); ++i) {
    try {
      d.page(i);
    } catch (const Error& e) {
      too_large += std::string(e.what()).find("too large to render at 200 dpi") != std::string::npos;
    }
  }
  EXPECT_EQ(too_large, 1);
}
