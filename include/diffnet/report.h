// Hand-off files of `diffnet predict`: one self-contained HTML report (summary table, per page the overlay
// and crops of the largest regions, images inlined as data: URIs) and a CSV of one row per input (RFC 4180).
// Both are appended to temp files page by page (bounded memory) and renamed into place by finish().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "diffnet/common.h"
#include "diffnet/predict.h"
#include "diffnet/regions.h"

namespace diffnet {

struct ReportOptions {
  std::string model;          // weights named in the report's header
  double threshold = 0.5;     // page decision threshold (Predictor::page_threshold()), named in the header
  std::string date;           // "" : the local time when the report is opened
  OverlayOptions overlay;     // the overlay as predict --out draws it
  int64_t overlay_max_side = 1200;  // the overlay is shrunk (area average) to at most this on its long side
  int64_t max_crops = 12;           // crops of the largest regions per page
  int64_t crop_max_side = 320;      // a crop larger than this is shrunk to it
};

// Text for HTML: valid_utf8(s) with & < > " ' as character references.
std::string html_escape(const std::string& s);
// One CSV field (RFC 4180): quoted, quotes doubled, when it holds a comma, a quote, CR or LF. A text that
// is not a number and starts with = + - @ TAB or CR gets a leading ' (spreadsheets would run it as a formula).
std::string csv_field(const std::string& s);
// The region crop of the report: r's box plus a margin of max(8, a quarter of its larger side), inside the image.
Rect crop_rect(const Region& r, int64_t height, int64_t width);
// Area-average shrink of uint8 (H, W, 3) so that its long side is at most max_side (unchanged if it is).
at::Tensor shrink_to(const at::Tensor& rgb, int64_t max_side);

class HtmlReport {
 public:
  // Opens the temp files next to path (Error when it cannot write there).
  HtmlReport(const std::string& path, ReportOptions options);
  ~HtmlReport();  // unfinished: the temp files are removed, path is untouched
  HtmlReport(const HtmlReport&) = delete;
  HtmlReport& operator=(const HtmlReport&) = delete;
  // A summary row and a page section. overlay: render_overlay(p.rgb, p.prob, p.regions, options.overlay)
  // when the caller already has it (undefined: drawn here).
  void add(const Prediction& p, const at::Tensor& overlay = {});
  void add_failure(const std::string& file, const std::string& error);  // a row (and section) with the error
  void finish();  // writes header, summary table, sections; renames into place

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class CsvReport {
 public:
  // Header file,page,decision,image_score,regions,width,height,error,warnings; image_score as in the JSON
  // record, warnings its `warnings` joined by "; ".
  explicit CsvReport(const std::string& path);  // unfinished at destruction: path is untouched
  void add(const Prediction& p);
  void add_failure(const std::string& file, const std::string& error);
  void finish();

 private:
  void row(const std::vector<std::string>& fields);
  AtomicFile file_;
};

}  // namespace diffnet
