#include "synth/layouts.h"

#include <pango/pangocairo.h>

#include <cmath>
#include <cstdio>

#include "diffnet/common.h"
#include "synth/content.h"

namespace diffnet::synth {

const std::vector<std::string>& layout_names() {
  static const std::vector<std::string> names = {"receipt", "invoice", "payslip", "statement", "form", "letter"};
  return names;
}

LayoutKind parse_layout(const std::string& name) {
  const auto& n = layout_names();
  for (size_t i = 0; i < n.size(); ++i)
    if (n[i] == name) return static_cast<LayoutKind>(i);
  throw Error("layouts", "unknown layout '" + name + "' (receipt, invoice, payslip, statement, form, letter)");
}

const char* layout_name(LayoutKind k) { return layout_names()[static_cast<size_t>(k)].c_str(); }

namespace {

enum class Align { Left, Right, Center };

struct Style {
  std::string family;
  double pt = 10;
  bool bold = false;
  bool italic = false;
  Color color{20, 20, 20};
};

// Drawing surface in page pixels with helpers in millimetres and points; records every word drawn.
class Canvas {
 public:
  Canvas(int w, int h, const Color& paper, double dpi) : dpi_(dpi), w_(w), h_(h) {
    surf_ = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    cr_ = cairo_create(surf_);
    cairo_set_antialias(cr_, CAIRO_ANTIALIAS_GRAY);
    set_color(paper);
    cairo_paint(cr_);
  }
  ~Canvas() {
    std::lock_guard<std::recursive_mutex> lock(text_mutex());  // releases the fonts the page used
    cairo_destroy(cr_);
    cairo_surface_destroy(surf_);
  }
  double mm(double v) const { return v * dpi_ / 25.4; }
  double px_of_pt(double p) const { return p * dpi_ / 72.0; }
  int width() const { return w_; }
  int height() const { return h_; }
  double line_height(const Style& s) const { return px_of_pt(s.pt) * 1.32; }

  // Sizes are quantised to 1/4 px: fewer distinct Cairo scaled fonts to create and cache.
  FontSpec spec(const Style& s) const { return {s.family, s.bold, s.italic, std::round(px_of_pt(s.pt) * 4) / 4}; }

  double text_width(const std::string& text, const Style& s) {
    auto& eng = text_engine();
    FontSpec f = spec(s);
    double space = eng.measure(" ", f).advance;
    double w = 0;
    bool first = true;
    for (auto& word : split(text)) {
      if (!first) w += space;
      w += eng.measure(word, f).advance;
      first = false;
    }
    return w;
  }

  // Draws text word by word with its baseline at `base`; returns the drawn width.
  double text(double x, double base, const std::string& text, const Style& s, Align align = Align::Left) {
    double w = text_width(text, s);
    if (align == Align::Right) x -= w;
    if (align == Align::Center) x -= w / 2;
    auto& eng = text_engine();
    FontSpec f = spec(s);
    double space = eng.measure(" ", f).advance;
    set_color(s.color);
    double pen = x;
    for (auto& word : split(text)) {
      TextExtents e = eng.measure(word, f);
      eng.draw(cr_, word, f, pen, base);
      double top = base - e.baseline;
      Box b{static_cast<int>(std::floor(pen + e.ink_x)), static_cast<int>(std::floor(top + e.ink_y)),
            static_cast<int>(std::ceil(pen + e.ink_x + e.ink_w)), static_cast<int>(std::ceil(top + e.ink_y + e.ink_h))};
      b = b.expand(1).clip(w_, h_);
      if (!b.empty() && e.ink_w > 0) {
        Word wd;
        wd.box = b;
        wd.text = word;
        wd.style.known = true;
        wd.style.family = s.family;
        wd.style.bold = s.bold;
        wd.style.italic = s.italic;
        wd.style.size_px = f.size_px;
        wd.style.color = s.color;
        wd.style.origin_x = pen;
        wd.style.baseline_y = base;
        words_.push_back(std::move(wd));
      }
      pen += e.advance + space;
    }
    return w;
  }

  // Greedy word wrap into `width`; returns the baseline after the last line.
  double paragraph(double x, double base, double width, const std::string& text, const Style& s) {
    std::string line;
    for (auto& word : split(text)) {
      std::string cand = line.empty() ? word : line + " " + word;
      if (!line.empty() && text_width(cand, s) > width) {
        this->text(x, base, line, s);
        base += line_height(s);
        line = word;
      } else {
        line = cand;
      }
    }
    if (!line.empty()) this->text(x, base, line, s), base += line_height(s);
    return base;
  }

  void fill(double x, double y, double w, double h, const Color& c) {
    set_color(c);
    cairo_rectangle(cr_, x, y, w, h);
    cairo_fill(cr_);
  }
  void hline(double x0, double x1, double y, double th, const Color& c) { fill(x0, y, x1 - x0, th, c); }
  void vline(double x, double y0, double y1, double th, const Color& c) { fill(x, y0, th, y1 - y0, c); }
  void outline(double x, double y, double w, double h, double th, const Color& c) {
    hline(x, x + w, y, th, c), hline(x, x + w, y + h - th, th, c);
    vline(x, y, y + h, th, c), vline(x + w - th, y, y + h, th, c);
  }

  // Pixels of rows [0, height) as an RGB raster.
  RenderedPage finish(int height = -1) {
    if (height < 0 || height > h_) height = h_;
    cairo_surface_flush(surf_);
    const uint8_t* p = cairo_image_surface_get_data(surf_);
    int stride = cairo_image_surface_get_stride(surf_);
    RenderedPage page;
    page.image = Raster(w_, height, 3);
    for (int y = 0; y < height; ++y) {
      const uint32_t* row = reinterpret_cast<const uint32_t*>(p + size_t(y) * stride);
      uint8_t* o = page.image.px(0, y);
      for (int x = 0; x < w_; ++x) {
        uint32_t v = row[x];
        o[3 * x] = (v >> 16) & 255, o[3 * x + 1] = (v >> 8) & 255, o[3 * x + 2] = v & 255;
      }
    }
    for (auto& wd : words_)
      if (wd.box.y1 <= height) page.words.push_back(wd);
    return page;
  }

 private:
  static std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
      if (c == ' ') {
        if (!cur.empty()) out.push_back(cur), cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
  }
  void set_color(const Color& c) { cairo_set_source_rgb(cr_, c[0] / 255.0, c[1] / 255.0, c[2] / 255.0); }

  double dpi_;
  int w_, h_;
  cairo_surface_t* surf_;
  cairo_t* cr_;
  std::vector<Word> words_;
};

Color ink_color(Rng& r) {
  double u = r.uniform();
  if (u < 0.7) {
    double g = r.uniform(0, 45);
    return {g, g, g};
  }
  if (u < 0.88) return {r.uniform(10, 30), r.uniform(20, 45), r.uniform(70, 120)};  // blue-black
  return {r.uniform(40, 70), r.uniform(40, 70), r.uniform(40, 70)};                   // grey
}

Color paper_color(Rng& r) {
  if (r.bernoulli(0.6)) return {255, 255, 255};
  double base = r.uniform(238, 252);
  return {base + r.uniform(0, 3), base + r.uniform(-1, 2), base - r.uniform(0, 8)};
}

Color accent_fill(Rng& r) {
  static const std::vector<Color> fills = {{228, 228, 228}, {220, 232, 245}, {235, 242, 228},
                                           {245, 236, 220}, {236, 236, 244}, {242, 242, 242}};
  return r.pick(fills);
}

struct Ctx {
  Canvas& cv;
  Rng& r;
  Style body, bold, small, title;
  bool euro;
  std::string cur;  // currency label
};

Ctx make_ctx(Canvas& cv, Rng& r, const FontFace& font, double body_pt) {
  Color ink = ink_color(r);
  Style body{font.family, body_pt, false, false, ink};
  Style bold = body;
  bold.bold = true;
  Style small = body;
  small.pt = body_pt * r.uniform(0.75, 0.88);
  Style title = body;
  title.bold = r.bernoulli(0.8);
  title.pt = body_pt * r.uniform(1.5, 2.3);
  static const std::vector<std::string> currencies = {"EUR", "USD", "GBP", "CHF", "RM", ""};
  return Ctx{cv, r, body, bold, small, title, r.bernoulli(0.35), r.pick(currencies)};
}

std::string money(Ctx& c, double v) { return content::format_amount(v, c.euro); }

// Label/value block; returns the baseline after it.
double kv_block(Ctx& c, double x, double base, double label_w, const std::vector<std::pair<std::string, std::string>>& kv,
                const Style& ls, const Style& vs) {
  for (auto& p : kv) {
    c.cv.text(x, base, p.first, ls);
    c.cv.text(x + label_w, base, p.second, vs);
    base += c.cv.line_height(vs) * 1.1;
  }
  return base;
}

RenderedPage receipt(const FontFace& font, double dpi, Rng& r) {
  double width_mm = r.uniform(58, 80);
  int W = static_cast<int>(std::lround(width_mm * dpi / 25.4)), H = static_cast<int>(std::lround(320 * dpi / 25.4));
  Canvas cv(W, H, paper_color(r), dpi);
  Ctx c = make_ctx(cv, r, font, r.uniform(7.5, 9.5));
  double m = cv.mm(r.uniform(3, 5)), right = W - m, mid = W / 2.0;
  double base = cv.mm(r.uniform(6, 12));
  auto nl = [&](const Style& s, double k = 1.0) { base += cv.line_height(s) * k; };
  Style head = c.title;
  head.pt = c.body.pt * r.uniform(1.2, 1.6);
  cv.text(mid, base, content::company_name(r), head, Align::Center), nl(head, 1.2);
  cv.text(mid, base, content::street_line(r), c.body, Align::Center), nl(c.body);
  cv.text(mid, base, content::city_line(r), c.body, Align::Center), nl(c.body);
  cv.text(mid, base, "Tel " + content::phone(r), c.body, Align::Center), nl(c.body);
  if (r.bernoulli(0.6)) cv.text(mid, base, "VAT No " + std::to_string(r.randint(100000000, 999999999)), c.small, Align::Center), nl(c.small);
  nl(c.body, 0.6);
  std::string dash(static_cast<size_t>(std::max(8.0, (right - m) / cv.text_width("-", c.body))) - 1, '-');
  bool dashes = r.bernoulli(0.5);
  auto sep = [&] {
    if (dashes) cv.text(m, base, dash, c.body), nl(c.body);
    else cv.hline(m, right, base - cv.line_height(c.body) * 0.4, std::max(1.0, cv.mm(0.25)), c.body.color), nl(c.body, 0.7);
  };
  cv.text(m, base, content::date(r), c.body);
  char tm[16];
  std::snprintf(tm, sizeof tm, "%02d:%02d", int(r.randint(7, 22)), int(r.randint(0, 59)));
  cv.text(right, base, tm, c.body, Align::Right), nl(c.body);
  cv.text(m, base, "Receipt " + content::reference(r, "R"), c.body), nl(c.body);
  if (r.bernoulli(0.5)) cv.text(m, base, "Cashier: " + content::person_name(r), c.body), nl(c.body);
  sep();
  int items = static_cast<int>(r.randint(3, 14));
  double total = 0;
  for (int i = 0; i < items; ++i) {
    int q = r.bernoulli(0.7) ? 1 : static_cast<int>(r.randint(2, 6));
    double unit = std::exp(r.uniform(std::log(0.5), std::log(80.0)));
    double line = std::round(q * unit * 100) / 100;
    total += line;
    std::string name = content::item_name(r);
    if (q > 1) {
      cv.text(m, base, name, c.body), nl(c.body);
      cv.text(m + cv.mm(4), base, std::to_string(q) + " x " + money(c, unit), c.body);
    } else {
      cv.text(m, base, name, c.body);
    }
    cv.text(right, base, money(c, line), c.body, Align::Right), nl(c.body);
  }
  sep();
  double tax_rate = r.pick(std::vector<double>{0, 6, 7, 10, 19, 20, 21});
  double tax = std::round(total * tax_rate / (100 + tax_rate) * 100) / 100;
  cv.text(m, base, "Subtotal", c.body), cv.text(right, base, money(c, total - tax), c.body, Align::Right), nl(c.body);
  char tl[32];
  std::snprintf(tl, sizeof tl, "Tax %.0f%%", tax_rate);
  cv.text(m, base, tl, c.body), cv.text(right, base, money(c, tax), c.body, Align::Right), nl(c.body);
  Style tot = c.bold;
  tot.pt = c.body.pt * r.uniform(1.0, 1.3);
  cv.text(m, base, "TOTAL " + c.cur, tot), cv.text(right, base, money(c, total), tot, Align::Right), nl(tot, 1.2);
  if (r.bernoulli(0.5)) {
    cv.text(m, base, "CARD **** " + std::to_string(r.randint(1000, 9999)), c.body), nl(c.body);
    cv.text(m, base, "AUTH " + std::to_string(r.randint(100000, 999999)), c.body), nl(c.body);
  } else {
    double cash = std::ceil(total / 10) * 10;
    cv.text(m, base, "Cash", c.body), cv.text(right, base, money(c, cash), c.body, Align::Right), nl(c.body);
    cv.text(m, base, "Change", c.body), cv.text(right, base, money(c, cash - total), c.body, Align::Right), nl(c.body);
  }
  sep();
  cv.text(mid, base, r.bernoulli(0.5) ? "Thank you for your visit!" : "Goods sold are not returnable", c.small,
          Align::Center);
  nl(c.body, 2.0);
  return cv.finish(static_cast<int>(std::min<double>(H, base + cv.mm(4))));
}

// Shared A4 header: company block left, document title right. Returns the baseline below it.
double a4_header(Ctx& c, const std::string& title, double m, double right) {
  auto& cv = c.cv;
  double base = cv.mm(c.r.uniform(14, 22));
  if (c.r.bernoulli(0.3)) cv.fill(0, 0, cv.width(), cv.mm(c.r.uniform(6, 10)), accent_fill(c.r));
  Style comp = c.title;
  comp.pt = c.body.pt * c.r.uniform(1.4, 2.0);
  cv.text(m, base, content::company_name(c.r), comp);
  cv.text(right, base, title, c.title, Align::Right);
  base += cv.line_height(comp);
  cv.text(m, base, content::street_line(c.r), c.small), base += cv.line_height(c.small);
  cv.text(m, base, content::city_line(c.r), c.small), base += cv.line_height(c.small);
  cv.text(m, base, content::phone(c.r), c.small), base += cv.line_height(c.small);
  return base + cv.mm(6);
}

// Table with a shaded header; columns given by right edges for numeric columns.
struct Column {
  std::string name;
  double x;  // left edge (Left) or right edge (Right)
  Align align;
};
double table_header(Ctx& c, double base, double m, double right, const std::vector<Column>& cols) {
  auto& cv = c.cv;
  double lh = cv.line_height(c.bold);
  if (c.r.bernoulli(0.6)) cv.fill(m - cv.mm(1), base - lh * 0.85, right - m + cv.mm(2), lh * 1.2, accent_fill(c.r));
  else cv.hline(m, right, base + lh * 0.3, std::max(1.0, cv.mm(0.3)), c.body.color);
  for (auto& col : cols) cv.text(col.x, base, col.name, c.bold, col.align);
  return base + lh * 1.3;
}

RenderedPage invoice(const FontFace& font, double dpi, Rng& r) {
  int W = static_cast<int>(std::lround(210 * dpi / 25.4)), H = static_cast<int>(std::lround(297 * dpi / 25.4));
  Canvas cv(W, H, paper_color(r), dpi);
  Ctx c = make_ctx(cv, r, font, r.uniform(9, 11));
  double m = cv.mm(r.uniform(15, 22)), right = W - m;
  double base = a4_header(c, r.bernoulli(0.8) ? "INVOICE" : "Invoice", m, right);
  double top = base;
  cv.text(m, base, "Bill to:", c.bold), base += cv.line_height(c.body);
  cv.text(m, base, content::person_name(r), c.body), base += cv.line_height(c.body);
  cv.text(m, base, content::company_name(r), c.body), base += cv.line_height(c.body);
  cv.text(m, base, content::street_line(r), c.body), base += cv.line_height(c.body);
  cv.text(m, base, content::city_line(r), c.body), base += cv.line_height(c.body);
  double lx = W * 0.58;
  double b2 = kv_block(c, lx, top, cv.mm(30),
                       {{"Invoice no.", content::reference(r, "INV")},
                        {"Date", content::date(r)},
                        {"Due date", content::date(r)},
                        {"Customer", std::to_string(r.randint(10000, 99999))}},
                       c.body, c.body);
  base = std::max(base, b2) + cv.mm(8);
  std::vector<Column> cols = {{"Description", m, Align::Left},
                              {"Qty", W * 0.60, Align::Right},
                              {"Unit price", W * 0.75, Align::Right},
                              {"Amount", right, Align::Right}};
  base = table_header(c, base, m, right, cols);
  int rows = static_cast<int>(r.randint(3, 16));
  double sub = 0;
  bool grid = r.bernoulli(0.4);
  for (int i = 0; i < rows; ++i) {
    int q = static_cast<int>(r.randint(1, 20));
    double unit = std::exp(r.uniform(std::log(2.0), std::log(900.0)));
    double amt = std::round(q * unit * 100) / 100;
    sub += amt;
    cv.text(m, base, content::item_name(r), c.body);
    cv.text(cols[1].x, base, std::to_string(q), c.body, Align::Right);
    cv.text(cols[2].x, base, money(c, unit), c.body, Align::Right);
    cv.text(right, base, money(c, amt), c.body, Align::Right);
    if (grid) cv.hline(m, right, base + cv.line_height(c.body) * 0.35, 1, {200, 200, 200});
    base += cv.line_height(c.body) * 1.25;
  }
  base += cv.mm(3);
  double vat = r.pick(std::vector<double>{5, 7, 10, 19, 20, 21});
  double tax = std::round(sub * vat) / 100;
  char vl[32];
  std::snprintf(vl, sizeof vl, "VAT %.0f%%", vat);
  base = kv_block(c, W * 0.58, base, W * 0.17, {{"Subtotal", ""}, {vl, ""}}, c.body, c.body) - 2 * cv.line_height(c.body) * 1.1;
  cv.text(right, base, money(c, sub), c.body, Align::Right), base += cv.line_height(c.body) * 1.1;
  cv.text(right, base, money(c, tax), c.body, Align::Right), base += cv.line_height(c.body) * 1.1;
  cv.hline(W * 0.58, right, base - cv.line_height(c.body) * 0.7, std::max(1.0, cv.mm(0.3)), c.body.color);
  cv.text(W * 0.58, base + cv.mm(1), "Total " + c.cur, c.bold);
  cv.text(right, base + cv.mm(1), money(c, sub + tax), c.bold, Align::Right);
  base += cv.mm(14);
  base = cv.paragraph(m, base, right - m, "Payment terms: " + content::sentence(r), c.body) + cv.mm(4);
  cv.text(m, base, "Bank: " + content::bank_name(r), c.body), base += cv.line_height(c.body);
  cv.text(m, base, "IBAN: " + content::iban(r), c.body), base += cv.line_height(c.body);
  cv.text(m, base, "BIC: " + content::randomize_like(r, "ABCDDEFFXXX"), c.body);
  double fy = H - cv.mm(15);
  cv.hline(m, right, fy - cv.mm(5), 1, {180, 180, 180});
  cv.text(W / 2.0, fy, content::company_name(r) + " - Registered office " + content::city_line(r), c.small,
          Align::Center);
  return cv.finish();
}

RenderedPage payslip(const FontFace& font, double dpi, Rng& r) {
  int W = static_cast<int>(std::lround(210 * dpi / 25.4)), H = static_cast<int>(std::lround(297 * dpi / 25.4));
  Canvas cv(W, H, paper_color(r), dpi);
  Ctx c = make_ctx(cv, r, font, r.uniform(8.5, 10.5));
  double m = cv.mm(r.uniform(14, 20)), right = W - m;
  double base = a4_header(c, r.bernoulli(0.5) ? "PAYSLIP" : "Pay statement", m, right);
  double top = base;
  double b1 = kv_block(c, m, base, cv.mm(36),
                       {{"Employee", content::person_name(r)},
                        {"Employee ID", std::to_string(r.randint(100000, 999999))},
                        {"Position", content::job_title(r)},
                        {"Tax code", content::randomize_like(r, "1257L")}},
                       c.body, c.body);
  double b2 = kv_block(c, W * 0.55, top, cv.mm(32),
                       {{"Pay period", content::date(r, 1)},
                        {"Pay date", content::date(r, 1)},
                        {"Department", r.bernoulli(0.5) ? "Operations" : "Finance"}},
                       c.body, c.body);
  base = std::max(b1, b2) + cv.mm(8);
  static const std::vector<std::string> earn = {"Basic salary", "Overtime", "Bonus", "Holiday pay", "Allowance", "Commission"};
  static const std::vector<std::string> ded = {"Income tax", "Social security", "Pension", "Health insurance", "Union fee"};
  std::vector<Column> cols = {{"Earnings", m, Align::Left}, {"Amount", W * 0.45, Align::Right},
                              {"Deductions", W * 0.52, Align::Left}, {"Amount", right, Align::Right}};
  base = table_header(c, base, m, right, cols);
  double gross = 0, dsum = 0;
  int ne = static_cast<int>(r.randint(2, 6)), nd = static_cast<int>(r.randint(2, 5));
  double salary = r.uniform(1500, 9000);
  for (int i = 0; i < std::max(ne, nd); ++i) {
    if (i < ne) {
      double v = i == 0 ? salary : salary * r.uniform(0.02, 0.2);
      v = std::round(v * 100) / 100;
      gross += v;
      cv.text(m, base, earn[i], c.body), cv.text(cols[1].x, base, money(c, v), c.body, Align::Right);
    }
    if (i < nd) {
      double v = std::round(salary * r.uniform(0.01, 0.18) * 100) / 100;
      dsum += v;
      cv.text(cols[2].x, base, ded[i], c.body), cv.text(right, base, money(c, v), c.body, Align::Right);
    }
    base += cv.line_height(c.body) * 1.25;
  }
  cv.hline(m, right, base - cv.line_height(c.body) * 0.5, 1, c.body.color);
  base += cv.mm(2);
  cv.text(m, base, "Gross pay", c.bold), cv.text(cols[1].x, base, money(c, gross), c.bold, Align::Right);
  cv.text(cols[2].x, base, "Total deductions", c.bold), cv.text(right, base, money(c, dsum), c.bold, Align::Right);
  base += cv.mm(12);
  Style net = c.bold;
  net.pt = c.body.pt * 1.4;
  if (r.bernoulli(0.5)) cv.outline(W * 0.5, base - cv.line_height(net), right - W * 0.5 + cv.mm(2), cv.line_height(net) * 1.6, 2, c.body.color);
  cv.text(W * 0.52, base, "NET PAY " + c.cur, net), cv.text(right - cv.mm(2), base, money(c, gross - dsum), net, Align::Right);
  base += cv.mm(14);
  cv.text(m, base, "Paid to account: " + content::iban(r), c.body), base += cv.line_height(c.body) * 1.5;
  base = table_header(c, base, m, right, {{"Year to date", m, Align::Left}, {"Gross", W * 0.5, Align::Right},
                                          {"Tax", W * 0.7, Align::Right}, {"Net", right, Align::Right}});
  double yg = gross * r.randint(1, 11);
  cv.text(m, base, content::date(r, 3), c.body);
  cv.text(W * 0.5, base, money(c, yg), c.body, Align::Right);
  cv.text(W * 0.7, base, money(c, yg * 0.2), c.body, Align::Right);
  cv.text(right, base, money(c, yg * 0.8), c.body, Align::Right);
  cv.text(W / 2.0, H - cv.mm(15), "This payslip was generated electronically and is valid without signature.",
          c.small, Align::Center);
  return cv.finish();
}

RenderedPage statement(const FontFace& font, double dpi, Rng& r) {
  int W = static_cast<int>(std::lround(210 * dpi / 25.4)), H = static_cast<int>(std::lround(297 * dpi / 25.4));
  Canvas cv(W, H, paper_color(r), dpi);
  Ctx c = make_ctx(cv, r, font, r.uniform(8, 10));
  double m = cv.mm(r.uniform(12, 18)), right = W - m;
  double base = cv.mm(r.uniform(14, 20));
  Style bank = c.title;
  cv.text(m, base, content::bank_name(r), bank);
  cv.text(right, base, "Account statement", c.bold, Align::Right);
  base += cv.line_height(bank) + cv.mm(4);
  double top = base;
  std::string holder = content::person_name(r);
  cv.text(m, base, holder, c.body), base += cv.line_height(c.body);
  cv.text(m, base, content::street_line(r), c.body), base += cv.line_height(c.body);
  cv.text(m, base, content::city_line(r), c.body), base += cv.line_height(c.body);
  double b2 = kv_block(c, W * 0.5, top, cv.mm(28),
                       {{"IBAN", content::iban(r)},
                        {"Statement no.", std::to_string(r.randint(1, 120))},
                        {"Period", content::date(r, 1) + " - " + content::date(r, 1)}},
                       c.body, c.body);
  base = std::max(base, b2) + cv.mm(8);
  std::vector<Column> cols = {{"Date", m, Align::Left}, {"Description", m + cv.mm(24), Align::Left},
                              {"Debit", W * 0.66, Align::Right}, {"Credit", W * 0.80, Align::Right},
                              {"Balance", right, Align::Right}};
  double bal = r.uniform(100, 20000);
  cv.text(m, base, "Opening balance", c.bold), cv.text(right, base, money(c, bal), c.bold, Align::Right);
  base += cv.line_height(c.body) * 1.5;
  base = table_header(c, base, m, right, cols);
  int rows = static_cast<int>(r.randint(10, 32));
  bool zebra = r.bernoulli(0.4);
  Color zc = accent_fill(r);
  for (int i = 0; i < rows && base < H - cv.mm(30); ++i) {
    double lh = cv.line_height(c.body) * 1.2;
    if (zebra && i % 2 == 1) cv.fill(m - cv.mm(1), base - lh * 0.75, right - m + cv.mm(2), lh, zc);
    bool credit = r.bernoulli(0.25);
    double v = std::round(std::exp(r.uniform(std::log(3.0), std::log(credit ? 5000.0 : 1500.0))) * 100) / 100;
    bal += credit ? v : -v;
    cv.text(m, base, content::date(r, 1), c.body);
    cv.text(cols[1].x, base, content::transaction_text(r), c.body);
    cv.text(credit ? cols[3].x : cols[2].x, base, money(c, v), c.body, Align::Right);
    cv.text(right, base, money(c, bal), c.body, Align::Right);
    base += lh;
  }
  base += cv.mm(3);
  cv.text(m, base, "Closing balance", c.bold), cv.text(right, base, money(c, bal), c.bold, Align::Right);
  cv.text(m, H - cv.mm(14), content::bank_name(r) + " - " + content::street_line(r) + ", " + content::city_line(r),
          c.small);
  return cv.finish();
}

RenderedPage form(const FontFace& font, double dpi, Rng& r) {
  int W = static_cast<int>(std::lround(210 * dpi / 25.4)), H = static_cast<int>(std::lround(297 * dpi / 25.4));
  Canvas cv(W, H, paper_color(r), dpi);
  Ctx c = make_ctx(cv, r, font, r.uniform(9, 11));
  double m = cv.mm(r.uniform(15, 22)), right = W - m;
  static const std::vector<std::string> titles = {"Application Form", "Expense Claim", "Change of Address",
                                                  "Account Opening Form", "Reimbursement Request"};
  double base = cv.mm(r.uniform(18, 26));
  cv.text(W / 2.0, base, r.pick(titles), c.title, Align::Center);
  base += cv.line_height(c.title) + cv.mm(6);
  // Filled-in values: another ink (blue pen-like or typed in the same font).
  Style val = c.body;
  if (r.bernoulli(0.5)) val.color = {r.uniform(10, 40), r.uniform(30, 60), r.uniform(110, 170)};
  bool boxes = r.bernoulli(0.5);
  auto field = [&](const std::string& label, const std::string& value, double x, double w) {
    cv.text(x, base, label, c.small);
    double fb = base + cv.line_height(val) * 1.15;
    if (boxes) cv.outline(x, fb - cv.line_height(val) * 0.95, w, cv.line_height(val) * 1.3, 1, {120, 120, 120});
    else cv.hline(x, x + w, fb + cv.mm(1), 1, {120, 120, 120});
    cv.text(x + cv.mm(2), fb, value, val);
  };
  std::string name = content::person_name(r);
  double half = (right - m - cv.mm(6)) / 2;
  auto row = [&] { base += cv.line_height(val) * 2.6; };
  for (int section = 0; section < 2; ++section) {
    cv.text(m, base, section == 0 ? "1. Personal details" : "2. Payment details", c.bold);
    base += cv.line_height(c.bold) * 1.4;
    if (section == 0) {
      field("Surname, first name", name, m, half), field("Date of birth", content::date(r), m + half + cv.mm(6), half), row();
      field("Address", content::street_line(r), m, half), field("Postcode, city", content::city_line(r), m + half + cv.mm(6), half), row();
      field("Phone", content::phone(r), m, half), field("Email", content::email(r, name), m + half + cv.mm(6), half), row();
    } else {
      field("IBAN", content::iban(r), m, right - m), row();
      field("Amount " + c.cur, money(c, r.uniform(20, 9000)), m, half), field("Date", content::date(r), m + half + cv.mm(6), half), row();
      field("Reference", content::reference(r, "REF"), m, half), field("Account holder", name, m + half + cv.mm(6), half), row();
    }
    base += cv.mm(4);
  }
  static const std::vector<std::string> opts = {"Transfer", "Cheque", "Cash", "Card"};
  double x = m;
  size_t chosen = static_cast<size_t>(r.randint(0, 3));
  for (size_t i = 0; i < opts.size(); ++i) {
    double s = cv.line_height(c.body) * 0.8;
    cv.outline(x, base - s, s, s, 1, {60, 60, 60});
    if (i == chosen) cv.text(x + s * 0.15, base - s * 0.1, "X", val);
    cv.text(x + s * 1.5, base, opts[i], c.body);
    x += (right - m) / 4;
  }
  base += cv.mm(12);
  base = cv.paragraph(m, base, right - m, "I confirm that " + content::sentence(r) + " " + content::sentence(r), c.small);
  base += cv.mm(10);
  cv.text(m, base, "Place, date: " + content::city_line(r).substr(6) + ", " + content::date(r), val);
  cv.text(W * 0.6, base, "Signature", c.small);
  cv.hline(W * 0.6, right, base - cv.line_height(c.small), 1, {120, 120, 120});
  return cv.finish();
}

RenderedPage letter(const FontFace& font, double dpi, Rng& r) {
  int W = static_cast<int>(std::lround(210 * dpi / 25.4)), H = static_cast<int>(std::lround(297 * dpi / 25.4));
  Canvas cv(W, H, paper_color(r), dpi);
  Ctx c = make_ctx(cv, r, font, r.uniform(10, 12));
  double m = cv.mm(r.uniform(20, 25)), right = W - m;
  double base = cv.mm(r.uniform(18, 25));
  std::string sender = content::company_name(r);
  bool right_block = r.bernoulli(0.5);
  double sx = right_block ? W * 0.62 : m;
  cv.text(sx, base, sender, c.bold), base += cv.line_height(c.body);
  cv.text(sx, base, content::street_line(r), c.small), base += cv.line_height(c.small);
  cv.text(sx, base, content::city_line(r), c.small), base += cv.line_height(c.small);
  cv.text(sx, base, content::phone(r), c.small), base += cv.line_height(c.small) + cv.mm(12);
  std::string to = content::person_name(r);
  cv.text(m, base, to, c.body), base += cv.line_height(c.body);
  cv.text(m, base, content::street_line(r), c.body), base += cv.line_height(c.body);
  cv.text(m, base, content::city_line(r), c.body), base += cv.line_height(c.body) + cv.mm(8);
  cv.text(right, base, content::city_line(r).substr(6) + ", " + content::date(r, 3), c.body, Align::Right);
  base += cv.line_height(c.body) * 2;
  cv.text(m, base, "Re: " + content::reference(r, r.bernoulli(0.5) ? "INV" : "CASE"), c.bold);
  base += cv.line_height(c.body) * 2;
  cv.text(m, base, "Dear " + to + ",", c.body), base += cv.line_height(c.body) * 1.6;
  int paras = static_cast<int>(r.randint(2, 5));
  for (int p = 0; p < paras && base < H - cv.mm(60); ++p) {
    std::string text;
    int ns = static_cast<int>(r.randint(2, 5));
    for (int s = 0; s < ns; ++s) text += (s ? " " : "") + content::sentence(r);
    base = cv.paragraph(m, base, right - m, text, c.body) + cv.line_height(c.body) * 0.6;
  }
  base += cv.mm(6);
  cv.text(m, base, r.bernoulli(0.5) ? "Yours sincerely," : "Kind regards,", c.body);
  base += cv.mm(18);
  cv.text(m, base, content::person_name(r), c.body), base += cv.line_height(c.body);
  cv.text(m, base, content::job_title(r) + ", " + sender, c.small);
  return cv.finish();
}

}  // namespace

RenderedPage render_document(LayoutKind kind, const FontFace& font, double dpi, Rng& rng) {
  switch (kind) {
    case LayoutKind::Receipt: return receipt(font, dpi, rng);
    case LayoutKind::Invoice: return invoice(font, dpi, rng);
    case LayoutKind::Payslip: return payslip(font, dpi, rng);
    case LayoutKind::Statement: return statement(font, dpi, rng);
    case LayoutKind::Form: return form(font, dpi, rng);
    case LayoutKind::Letter: return letter(font, dpi, rng);
  }
  throw Error("synth", "unknown layout");
}

RenderedPage render_word_sheet(const std::vector<std::string>& texts, const FontFace& font, double size_px,
                               int width, int height, Rng& r) {
  double dpi = 72.0;  // sizes are given in px: 1 pt = 1 px at 72 dpi
  Canvas cv(width, height, paper_color(r), dpi);
  Style s{font.family, size_px, r.bernoulli(0.15), false, ink_color(r)};
  double lh = cv.line_height(s) * 1.2, m = size_px;
  double base = m + size_px;
  size_t next = 0;
  while (base < height - size_px * 0.5) {
    double x = m;
    while (x < width - m) {
      std::string t = next < texts.size() ? texts[next++] : (r.bernoulli(0.4) ? content::amount(r, 1, 9999) : content::word(r));
      double w = cv.text_width(t, s);
      if (x + w > width - m) {
        if (x == m) ++next;  // too wide even for an empty line: skip it
        break;
      }
      cv.text(x, base, t, s);
      x += w + size_px * r.uniform(0.8, 2.0);
    }
    base += lh;
  }
  return cv.finish();
}

}  // namespace diffnet::synth
