// `diffnet predict --report/--csv`: the CSV parsed here (RFC 4180) against the JSON records of the same run;
// the HTML's rows, escaping and inlined images decoded here (base64 decoder of this file); a failed input
// listed with its error; nothing half-written left behind (random-init model: plumbing, not accuracy).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "diffnet/common.h"
#include "diffnet/image_io.h"
#include "diffnet/prediction_writer.h"
#include "diffnet/report.h"
#include "eval_testing.h"
#include "testing.h"

using namespace diffnet;

namespace {

using Rows = std::vector<std::vector<std::string>>;

// RFC 4180: fields separated by commas, records by CRLF (a lone LF accepted), quoted fields may hold
// commas, CR/LF and doubled quotes.
Rows parse_csv(const std::string& text) {
  Rows rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c != '"') {
        field += c;
      } else if (i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else {
        quoted = false;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
    } else if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      row.push_back(field);
      field.clear();
      rows.push_back(row);
      row.clear();
    } else {
      field += c;
    }
  }
  if (!field.empty() || !row.empty()) {
    row.push_back(field);
    rows.push_back(row);
  }
  return rows;
}

std::vector<uint8_t> base64_decode(const std::string& s) {
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const size_t v = alphabet.find(c);
    EXPECT_NE(v, std::string::npos) << "not base64: " << c;
    if (v == std::string::npos) return {};
    acc = (acc << 6 | uint32_t(v)) & 0xFFFFFF;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(uint8_t(acc >> bits));
    }
  }
  return out;
}

std::string text_of(const std::string& path) {
  std::vector<uint8_t> b = read_file(path);
  return std::string(b.begin(), b.end());
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// The report's rule, written out again: long side at most `max_side`, the other rounded.
std::pair<int64_t, int64_t> shrunk(int64_t h, int64_t w, int64_t max_side) {
  const int64_t side = std::max(h, w);
  if (side <= max_side) return {h, w};
  return {std::llround(double(h) * max_side / side), std::llround(double(w) * max_side / side)};
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

}  // namespace

TEST(EvalReport, FieldRules) {
  EXPECT_EQ(csv_field("plain name.png"), "plain name.png");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field("cr\r"), "\"cr\r\"");
  // Formula injection (a file named like a formula): neutralised with a leading quote; numbers kept.
  EXPECT_EQ(csv_field("=HYPERLINK(\"http://x\")"), "\"'=HYPERLINK(\"\"http://x\"\")\"");
  EXPECT_EQ(csv_field("+1-2.png"), "'+1-2.png");
  EXPECT_EQ(csv_field("-cmd|' /C calc'!A0"), "'-cmd|' /C calc'!A0");
  EXPECT_EQ(csv_field("@SUM(A1)"), "'@SUM(A1)");
  EXPECT_EQ(csv_field("\tx"), "'\tx");
  EXPECT_EQ(csv_field("\rx"), "\"'\rx\"");
  EXPECT_EQ(csv_field("-0.25"), "-0.25");
  EXPECT_EQ(csv_field("1e-05"), "1e-05");
  EXPECT_EQ(csv_field("a=b"), "a=b");
  EXPECT_EQ(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  EXPECT_EQ(html_escape("odd\xFF"), "odd\xEF\xBF\xBD");
  // Margin max(8, larger side / 4), clamped to the image.
  Region r;
  r.x = 10, r.y = 20, r.w = 40, r.h = 8;
  Rect c = crop_rect(r, 100, 100);
  EXPECT_EQ(std::vector<int64_t>({c.x0, c.y0, c.x1, c.y1}), std::vector<int64_t>({0, 10, 60, 38}));
  r.x = 90, r.y = 95, r.w = 8, r.h = 3;
  c = crop_rect(r, 100, 100);
  EXPECT_EQ(std::vector<int64_t>({c.x0, c.y0, c.x1, c.y1}), std::vector<int64_t>({82, 87, 100, 100}));
  // Shrinking averages areas: a 4 x 6 image of two colour halves becomes 2 x 3 with the same halves.
  at::Tensor img = at::zeros({4, 6, 3}, at::kByte);
  img.slice(1, 3, 6).fill_(200);
  at::Tensor s = shrink_to(img, 3);
  ASSERT_EQ(s.sizes(), (std::vector<int64_t>{2, 3, 3}));
  EXPECT_EQ(s[0][0][0].item<int>(), 0);
  EXPECT_EQ(s[0][1][0].item<int>(), 100);  // straddles the edge: half of each
  EXPECT_EQ(s[1][2][2].item<int>(), 200);
  EXPECT_TRUE(shrink_to(img, 6).equal(img));
}

TEST(EvalReport, CliWritesHtmlReportAndCsv) {
  const std::string in = testutil::temp_dir("report-in"), out = testutil::temp_dir("report-out");
  const std::string weird = "we<ird> & \"co,mma\".png", odd = "odd\xFF.jpg";
  write_png(in + "/" + weird, testutil::test_page(70, 100, 1));
  write_jpeg(in + "/" + odd, testutil::test_page(48, 64, 2), 90);
  write_png(in + "/wide.png", testutil::test_page(72, 1250, 3));  // overlay shrunk to 1200 wide
  std::vector<uint8_t> jpeg = encode_jpeg(testutil::test_page(64, 64, 4), 90);
  jpeg.resize(jpeg.size() / 2);
  write_file_atomic(in + "/zz-truncated.jpg", jpeg);
  const std::string html_path = out + "/report.html", csv_path = out + "/report.csv";
  // Threshold 0: every page is one region, the whole image, so every page has a crop.
  testutil::CliResult r = testutil::run_cli("predict '" + in + "' --weights '" + testutil::tiny_model().path +
                                            "' --threshold 0 --json -q --report '" + html_path + "' --csv '" +
                                            csv_path + "'");
  ASSERT_EQ(r.exit_code, 2) << "the truncated JPEG fails: " << r.err;
  const std::string bad = in + "/zz-truncated.jpg";
  const size_t e = r.err.find("error: " + bad);
  ASSERT_NE(e, std::string::npos) << r.err;
  const std::string message = r.err.substr(e + 7, r.err.find('\n', e) - e - 7);
  std::map<std::string, nlohmann::json> records;  // by "file"
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) {
    nlohmann::json j = nlohmann::json::parse(l);
    records[j["file"].get<std::string>()] = j;
  }
  ASSERT_EQ(records.size(), 3u) << r.out;
  ASSERT_TRUE(records.count(in + "/" + weird));
  ASSERT_TRUE(records.count(valid_utf8(in + "/" + odd)));

  // CSV: a header and one row per input, fields equal to the JSON records'.
  const std::string csv_text = text_of(csv_path);
  EXPECT_NE(csv_text.find("\"" + in + "/we<ird> & \"\"co,mma\"\".png\","), std::string::npos) << csv_text;
  Rows rows = parse_csv(csv_text);
  ASSERT_EQ(rows.size(), 5u) << csv_text;
  EXPECT_EQ(rows[0], (std::vector<std::string>{"file", "page", "decision", "image_score", "regions", "width",
                                               "height", "error", "warnings"}));
  int failed_rows = 0;
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    ASSERT_EQ(row.size(), 9u) << i;
    EXPECT_EQ(row[1], "");
    if (row[0] == bad) {
      ++failed_rows;
      for (size_t k = 2; k < 9; ++k) EXPECT_EQ(row[k], k == 7 ? message : "") << k;  // only the error column
      continue;
    }
    ASSERT_TRUE(records.count(row[0])) << row[0];
    const nlohmann::json& j = records[row[0]];
    EXPECT_EQ(row[2], j["decision"].get<std::string>());
    EXPECT_EQ(std::stod(row[3]), j["image_score"].get<double>()) << "the same double";
    EXPECT_EQ(row[4], std::to_string(j["regions"].size()));
    EXPECT_EQ(row[5], std::to_string(j["width"].get<int64_t>()));
    EXPECT_EQ(row[6], std::to_string(j["height"].get<int64_t>()));
    EXPECT_EQ(row[7], "");
    // The test pages (pale noise, black lines) are black and white, so each holds that warning and no other.
    ASSERT_EQ(j["warnings"].size(), 1u) << j.dump();
    EXPECT_EQ(j["warnings"][0].get<std::string>().rfind("black-and-white page", 0), 0u);
    EXPECT_EQ(row[8], j["warnings"][0].get<std::string>());
  }
  EXPECT_EQ(failed_rows, 1);

  // HTML: one summary row per input (+ the header row), names escaped, valid UTF-8, the failure listed.
  const std::string html = text_of(html_path);
  EXPECT_EQ(count(html, "<tr>"), 5u);
  EXPECT_TRUE(is_valid_utf8(html));
  EXPECT_NE(html.find("we&lt;ird&gt; &amp; &quot;co,mma&quot;.png"), std::string::npos);
  EXPECT_EQ(html.find("<ird>"), std::string::npos);
  EXPECT_EQ(html.find("\"co,mma\""), std::string::npos);
  EXPECT_NE(html.find("odd\xEF\xBF\xBD.jpg"), std::string::npos);
  EXPECT_NE(html.find(escape(testutil::tiny_model().path)), std::string::npos) << "the model is named";
  EXPECT_GE(count(html, "error: " + escape(message)), 2u) << "in the table and in its section";
  EXPECT_EQ(html.find("http://"), std::string::npos) << "self-contained";
  EXPECT_EQ(html.find("https://"), std::string::npos) << "self-contained";
  // Each page's section: its overlay (page size, plus the legend's strip below a page wide enough for it:
  // the 1250-wide one; shrunk to 1200) and its crop (region box + margin, shrunk to 320), decoded here.
  int sections = 0;
  for (size_t at = html.find("<section"); at != std::string::npos; at = html.find("<section", at + 1)) {
    const std::string sec = html.substr(at, html.find("</section>", at) - at);
    const nlohmann::json* j = nullptr;
    for (const auto& [file, rec] : records)
      if (sec.find("<h2>" + std::to_string(sections + 1) + ". " + escape(file) + "</h2>") != std::string::npos) j = &rec;
    ++sections;
    if (!j) {
      EXPECT_NE(sec.find(escape(bad)), std::string::npos) << sec;
      EXPECT_EQ(sec.find("data:"), std::string::npos);
      continue;
    }
    const int64_t H = (*j)["height"], W = (*j)["width"];
    std::vector<std::pair<int64_t, int64_t>> want = {shrunk(H + (W == 1250 ? 38 : 0), W, 1200)};
    for (const auto& reg : (*j)["regions"]) {
      const int64_t x = reg["bbox"][0], y = reg["bbox"][1], w = reg["bbox"][2], h = reg["bbox"][3];
      const int64_t m = std::max<int64_t>(8, std::max(w, h) / 4);
      const int64_t cw = std::min(W, x + w + m) - std::max<int64_t>(0, x - m);
      const int64_t ch = std::min(H, y + h + m) - std::max<int64_t>(0, y - m);
      want.push_back(shrunk(ch, cw, 320));
    }
    ASSERT_EQ(want.size(), 2u) << "threshold 0: one region";
    std::vector<std::pair<int64_t, int64_t>> got;
    const std::string prefix = "src=\"data:image/";
    for (size_t d = sec.find(prefix); d != std::string::npos; d = sec.find(prefix, d + 1)) {
      const size_t comma = sec.find(";base64,", d), end = sec.find('"', comma);
      const std::string mime = sec.substr(d + prefix.size(), comma - d - prefix.size());
      std::vector<uint8_t> bytes = base64_decode(sec.substr(comma + 8, end - comma - 8));
      ASSERT_GE(bytes.size(), 8u);
      if (mime == "png") EXPECT_TRUE(is_png_bytes(bytes.data(), bytes.size()));
      else EXPECT_TRUE(mime == "jpeg" && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) << mime;
      at::Tensor img = decode_image_bytes(bytes, "inlined");
      got.push_back({img.size(0), img.size(1)});
    }
    EXPECT_EQ(got, want) << (*j)["file"];
  }
  EXPECT_EQ(sections, 4);
  for (auto& f : std::filesystem::directory_iterator(out))
    EXPECT_EQ(f.path().string().find(".tmp."), std::string::npos) << f.path();

  // One input in table mode; a report that cannot be written fails before any inference.
  testutil::CliResult one = testutil::run_cli("predict '" + in + "/" + weird + "' --weights '" +
                                              testutil::tiny_model().path + "' --table --csv '" + out +
                                              "/one.csv' --report '" + out + "/one.html'");
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("regions"), std::string::npos) << one.out;
  EXPECT_EQ(parse_csv(text_of(out + "/one.csv")).size(), 2u);
  EXPECT_EQ(count(text_of(out + "/one.html"), "<tr>"), 2u);
  testutil::CliResult no = testutil::run_cli("predict '" + in + "/" + weird + "' --weights '" +
                                             testutil::tiny_model().path + "' --table --report '" + out +
                                             "/missing/r.html'");
  EXPECT_EQ(no.exit_code, 2);
  EXPECT_NE(no.err.find("missing/r.html: cannot write"), std::string::npos) << no.err;
  EXPECT_EQ(no.out.find("regions"), std::string::npos) << "stopped before the table";
}

// A write that fails (here: past the file-size limit, as on a full disk) fails that input, as any other
// per-input error does: the command goes on, exits 2, the CSV/report name the error, no partial map or
// temporary file remains.
TEST(EvalReport, FailedWritesLeaveNoPartialFiles) {
  const std::string in = testutil::temp_dir("full-in"), out = testutil::temp_dir("full-out");
  write_png(in + "/page.png", testutil::test_page(384, 384, 5));
  std::filesystem::create_directories(out + "/maps");
  // ulimit -f counts 1024-byte blocks: 8 KB is less than the maps of a 384 x 384 page.
  const testutil::CliResult r = testutil::run_command(
      "ulimit -f 8; exec '" + std::string(DIFFNET_CLI) + "' predict '" + in + "/page.png' --weights '" +
      testutil::tiny_model().path + "' --out '" + out + "/maps' --report '" + out + "/r.html' --csv '" + out +
      "/r.csv' -q");
  ASSERT_NE(r.exit_code, -1) << "killed by a signal (SIGXFSZ not ignored?)";
  EXPECT_EQ(r.exit_code, 2);
  const std::string& err = r.err;
  EXPECT_NE(err.find("page.prob.png: write failed: File too large"), std::string::npos) << err;
  Rows rows = parse_csv(text_of(out + "/r.csv"));
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(rows[1].size(), 9u);
  EXPECT_NE(rows[1][7].find("write failed: File too large"), std::string::npos) << rows[1][7];  // the error column
  EXPECT_EQ(rows[1][2], "");  // no decision for a failed input
  EXPECT_FALSE(std::filesystem::exists(out + "/maps/page.prob.png"));
  for (const auto& e : std::filesystem::recursive_directory_iterator(out))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

// An overlay the caller already drew (predict draws it once for --out and --report) is the one written:
// a solid colour given in place of the drawn overlay comes back from overlay.png (PNG: exactly) and from
// the report's inlined overlay (JPEG: within a few levels).
TEST(EvalReport, GivenOverlayIsUsed) {
  Predictor pred(load_weights(testutil::tiny_model().path), PredictOptions{});
  Prediction p = pred.predict_rgb(testutil::test_page(96, 80, 5), {}, "page.png");
  at::Tensor solid = at::zeros({96, 80, 3}, at::kByte);
  solid.select(2, 1).fill_(200);
  const std::string dir = testutil::temp_dir("given-overlay");
  {
    PredictionWriter w(dir + "/out");
    w.write(p, prediction_to_json(p), "page", {}, solid);
  }
  EXPECT_TRUE(decode_image(dir + "/out/page.overlay.png").equal(solid));
  HtmlReport report(dir + "/report.html", ReportOptions{});
  report.add(p, solid);
  report.finish();
  const std::string html = text_of(dir + "/report.html");
  const size_t img = html.find("alt=\"overlay\"");
  ASSERT_NE(img, std::string::npos);
  const size_t comma = html.find(";base64,", img), end = html.find('"', comma);
  at::Tensor got = decode_image_bytes(base64_decode(html.substr(comma + 8, end - comma - 8)), "inlined");
  ASSERT_EQ(got.sizes(), solid.sizes());
  EXPECT_LE((got.to(at::kInt) - solid.to(at::kInt)).abs().max().item<int>(), 4);
}

// A page the model ran smaller says so in its section: by the automatic rule (a page whose shorter side
// reaches 3,500 px) or as asked; a page at full size says nothing of it.
TEST(EvalReport, SaysWhenAPageRanSmaller) {
  const std::string dir = testutil::temp_dir("report-scale");
  HtmlReport report(dir + "/report.html", ReportOptions{});
  PredictOptions half;
  half.downscale = 2;
  const at::Tensor small = testutil::test_page(96, 80, 5);
  report.add(Predictor(load_weights(testutil::tiny_model().path), half).predict_rgb(small, {}, "half.png"));
  report.add(Predictor(load_weights(testutil::tiny_model().path), PredictOptions{}).predict_rgb(small, {}, "full.png"));
  report.add(Predictor(load_weights(testutil::tiny_model().path), PredictOptions{})
                 .predict_rgb(testutil::test_page(3500, 3504, 6), {}, "fine.png"));
  report.finish();
  const std::string html = text_of(dir + "/report.html");
  const size_t a = html.find("half.png</h2>"), b = html.find("full.png</h2>"), c = html.find("fine.png</h2>");
  ASSERT_TRUE(a != std::string::npos && b != std::string::npos && c != std::string::npos) << html.substr(0, 2000);
  EXPECT_NE(html.substr(a, b - a).find("analysed at 1/2 of its size (as asked)"), std::string::npos);
  EXPECT_EQ(html.substr(b, c - b).find("analysed at"), std::string::npos);
  EXPECT_NE(html.substr(c).find("analysed at 1/4 of its size (a scan finer than the model's 150-300 dpi)"),
            std::string::npos);
}
