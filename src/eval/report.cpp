// HTML report and CSV of `diffnet predict` (include/diffnet/report.h).
#include "diffnet/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <utility>
#include <fstream>

#include <nlohmann/json.hpp>

#include "diffnet/image_io.h"

namespace diffnet {

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : valid_utf8(s)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

// A decimal number as we write them (digits, one sign, point, exponent): left as it is.
bool is_number(const std::string& s) {
  char* end = nullptr;
  if (s.empty()) return false;
  (void)std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && s.find_first_not_of("0123456789+-.eE") == std::string::npos;
}

}  // namespace

std::string csv_field(const std::string& s_in) {
  // A text that a spreadsheet would run as a formula (=, +, -, @, tab, CR first) gets a leading ' .
  const bool formula = !s_in.empty() && std::string("=+-@\t\r").find(s_in[0]) != std::string::npos &&
                       !is_number(s_in);
  const std::string s = formula ? "'" + s_in : s_in;
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

Rect crop_rect(const Region& r, int64_t height, int64_t width) {
  const int64_t m = std::max<int64_t>(8, std::max(r.w, r.h) / 4);
  return {std::max<int64_t>(0, r.x - m), std::max<int64_t>(0, r.y - m), std::min(width, r.x + r.w + m),
          std::min(height, r.y + r.h + m)};
}

at::Tensor shrink_to(const at::Tensor& rgb, int64_t max_side) {
  const int64_t H = rgb.size(0), W = rgb.size(1), side = std::max(H, W);
  if (side <= max_side) return rgb;
  const double f = double(max_side) / double(side);
  const int64_t h = std::max<int64_t>(1, std::llround(double(H) * f)), w = std::max<int64_t>(1, std::llround(double(W) * f));
  at::Tensor x = rgb.permute({2, 0, 1}).unsqueeze(0).to(at::kFloat);
  at::Tensor y = at::adaptive_avg_pool2d(x, {h, w});
  return (y + 0.5f).floor().clamp(0, 255).to(at::kByte).squeeze(0).permute({1, 2, 0}).contiguous();
}

namespace {

std::string data_uri(const char* mime, const std::vector<uint8_t>& bytes) {
  return std::string("data:") + mime + ";base64," + base64_encode(bytes);
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string local_time() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M %Z", &tm);
  return buf;
}

const char* kStyle =
    "body{font:14px/1.4 sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    "td.num{text-align:right}.tampered{color:#b00;font-weight:bold}.pristine{color:#070}"
    ".error{color:#b00}section{border-top:2px solid #ddd;margin-top:2em;padding-top:.5em}"
    "img.overlay{max-width:100%;height:auto;border:1px solid #ccc}"
    ".crops{display:flex;flex-wrap:wrap;gap:10px;margin-top:.5em}"
    "figure{margin:0;font-size:12px}figure img{max-height:160px;max-width:320px;border:1px solid #36f}";

}  // namespace

struct HtmlReport::Impl {
  std::string path;
  ReportOptions opt;
  AtomicFile sections;  // page sections, in input order, until finish()
  std::string rows;     // the summary table's rows (a few hundred bytes each)
  int64_t count = 0, tampered = 0, failed = 0;
  bool finished = false;
  // The report's own temp file is tried first (so that an unwritable path is named as given), then the sections'.
  Impl(const std::string& p, ReportOptions o) : path(probed(p)), opt(std::move(o)), sections(p + ".sections") {}
  static std::string probed(const std::string& p) {
    AtomicFile probe(p);
    return p;
  }

  std::string anchor() const { return "p" + std::to_string(count); }
  std::string title(const std::string& file) const {
    return "<h2>" + std::to_string(count) + ". " + html_escape(file) + "</h2>\n";
  }
};

namespace {

// The file and the page column of a prediction: "x.pdf#3" of page 3 gives ("x.pdf", "3"); a plain image
// its name and "".
std::pair<std::string, std::string> file_and_page(const Prediction& p) {
  const std::string suffix = "#" + std::to_string(p.page);
  if (p.page > 0 && p.file.size() > suffix.size() && p.file.compare(p.file.size() - suffix.size(), suffix.size(), suffix) == 0)
    return {p.file.substr(0, p.file.size() - suffix.size()), std::to_string(p.page)};
  return {p.file, p.page > 0 ? std::to_string(p.page) : ""};
}

}  // namespace

HtmlReport::HtmlReport(const std::string& path, ReportOptions options)
    : impl_(std::make_unique<Impl>(path, std::move(options))) {
  if (impl_->opt.date.empty()) impl_->opt.date = local_time();
}

HtmlReport::~HtmlReport() = default;

void HtmlReport::add(const Prediction& p, const at::Tensor& full_overlay) {
  Impl& m = *impl_;
  ++m.count;
  if (p.decision == "tampered") ++m.tampered;
  const auto [file, page] = file_and_page(p);
  const std::string a = m.anchor(), name = html_escape(file), verdict = html_escape(p.decision);
  m.rows += "<tr><td class=\"num\">" + std::to_string(m.count) + "</td><td><a href=\"#" + a + "\">" + name +
            "</a></td><td class=\"num\">" + page + "</td><td class=\"" + verdict + "\">" + verdict + "</td><td class=\"num\">" +
            fmt("%.4f", p.image_score) + "</td><td class=\"num\">" + std::to_string(p.regions.size()) + "</td></tr>\n";

  std::string s = "<section id=\"" + a + "\">\n" + m.title(p.file);
  s += "<p>verdict <span class=\"" + verdict + "\">" + verdict + "</span> &middot; score " + fmt("%.4f", p.image_score) +
       " (" + html_escape(p.score_kind) + ") &middot; " + std::to_string(p.regions.size()) + " region(s) &middot; " +
       std::to_string(p.width) + " &times; " + std::to_string(p.height) + " px" +
       (p.downscale > 1 ? " &middot; analysed at 1/" + std::to_string(p.downscale) + " of its size (" +
                              (p.downscale_auto ? "a scan finer than the model's 150-300 dpi" : "as asked") + ")"
                        : std::string()) +
       "</p>\n";
  for (const std::string& w : p.warnings) s += "<p class=\"error\">warning: " + html_escape(w) + "</p>\n";
  at::Tensor overlay = shrink_to(full_overlay.defined() ? full_overlay : render_overlay(p.rgb, p.prob, p.regions, m.opt.overlay),
                                 m.opt.overlay_max_side);
  s += "<img class=\"overlay\" alt=\"overlay\" width=\"" + std::to_string(overlay.size(1)) + "\" height=\"" +
       std::to_string(overlay.size(0)) + "\" src=\"" + data_uri("image/jpeg", encode_jpeg(overlay, 85)) + "\">\n";
  overlay = at::Tensor();
  const int64_t shown = std::min<int64_t>(int64_t(p.regions.size()), std::max<int64_t>(0, m.opt.max_crops));
  if (shown > 0) s += "<div class=\"crops\">\n";
  for (int64_t i = 0; i < shown; ++i) {
    const Region& r = p.regions[size_t(i)];
    const Rect c = crop_rect(r, p.height, p.width);
    at::Tensor crop = shrink_to(p.rgb.slice(0, c.y0, c.y1).slice(1, c.x0, c.x1).contiguous(), m.opt.crop_max_side);
    s += "<figure><img alt=\"region " + std::to_string(i + 1) + "\" src=\"" + data_uri("image/png", encode_png(crop)) +
         "\"><figcaption>#" + std::to_string(i + 1) + " peak " + fmt("%.2f", r.peak) + " &middot; " +
         std::to_string(r.w) + "&times;" + std::to_string(r.h) + " at " + std::to_string(r.x) + "," + std::to_string(r.y) +
         "</figcaption></figure>\n";
  }
  if (shown > 0) s += "</div>\n";
  if (int64_t(p.regions.size()) > shown)
    s += "<p>" + std::to_string(int64_t(p.regions.size()) - shown) + " smaller region(s) not shown</p>\n";
  s += "<p><a href=\"#top\">summary</a></p>\n</section>\n";
  m.sections.write(s);
}

void HtmlReport::add_failure(const std::string& file, const std::string& error) {
  Impl& m = *impl_;
  ++m.count;
  ++m.failed;
  const std::string a = m.anchor(), err = html_escape(error);
  m.rows += "<tr><td class=\"num\">" + std::to_string(m.count) + "</td><td><a href=\"#" + a + "\">" +
            html_escape(file) + "</a></td><td></td><td colspan=\"3\" class=\"error\">error: " + err + "</td></tr>\n";
  m.sections.write("<section id=\"" + a + "\">\n" + m.title(file) + "<p class=\"error\">error: " + err +
                   "</p>\n<p><a href=\"#top\">summary</a></p>\n</section>\n");
}

void HtmlReport::finish() {
  Impl& m = *impl_;
  if (m.finished) return;
  AtomicFile out(m.path);
  out.write(std::string("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>DiffNet report</title>\n"
                        "<style>") + kStyle + "</style>\n</head>\n<body>\n<h1 id=\"top\">DiffNet tampering report</h1>\n");
  out.write("<p>model <code>" + html_escape(m.opt.model) + "</code> &middot; decision threshold " + fmt("%.3g", m.opt.threshold) +
            " &middot; " + html_escape(m.opt.date) + " &middot; " + std::to_string(m.count) + " input(s): " +
            std::to_string(m.tampered) + " tampered, " + std::to_string(m.count - m.tampered - m.failed) +
            " pristine, " + std::to_string(m.failed) + " failed</p>\n");
  out.write("<p>Verdict: tampered when the score (the page probability) is above the threshold. Overlay: the page "
            "unchanged below the overlay floor, amber to red above it, a blue box labelled with its peak "
            "probability around each region; crops: the largest regions from the original image.</p>\n");
  out.write("<table>\n<tr><th>#</th><th>file</th><th>page</th><th>verdict</th><th>score</th><th>regions</th></tr>\n" +
            m.rows + "</table>\n");
  {
    std::ifstream in(m.sections.temp_path(), std::ios::binary);
    if (!in) throw Error(m.path, "cannot read back its page sections");
    std::vector<char> buf(1 << 20);
    while (in) {
      in.read(buf.data(), std::streamsize(buf.size()));
      if (in.gcount() > 0) out.write(buf.data(), size_t(in.gcount()));
    }
    if (in.bad()) throw Error(m.path, "cannot read back its page sections");
  }
  out.write("</body>\n</html>\n");
  out.commit();
  m.finished = true;
}

CsvReport::CsvReport(const std::string& path) : file_(path) {
  row({"file", "page", "decision", "image_score", "regions", "width", "height", "error", "warnings"});
}

void CsvReport::row(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + csv_field(fields[i]);
  file_.write(line + "\r\n");
}

void CsvReport::add(const Prediction& p) {
  const auto [file, page] = file_and_page(p);
  std::string warnings;
  for (const std::string& w : p.warnings) warnings += (warnings.empty() ? "" : "; ") + w;
  row({valid_utf8(file), page, p.decision, nlohmann::json(p.image_score).dump(), std::to_string(p.regions.size()),
       std::to_string(p.width), std::to_string(p.height), "", valid_utf8(warnings)});
}

void CsvReport::add_failure(const std::string& file, const std::string& error) {
  row({valid_utf8(file), "", "", "", "", "", "", valid_utf8(error), ""});
}

void CsvReport::finish() { file_.commit(); }

}  // namespace diffnet
