#include "synth/ops.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "diffnet/common.h"
#include "synth/content.h"
#include "synth/inpaint.h"

namespace diffnet::synth {

namespace {
const char* kOpNames[kNumOps] = {"copy-move", "splice", "erase", "inpaint", "text", "insert"};
// Default mix: text replacement and copy-move (the common frauds) most often.
const OpWeights kDefaultWeights = {0.25, 0.15, 0.15, 0.15, 0.20, 0.10};
}  // namespace

const char* op_name(OpKind k) { return kOpNames[static_cast<int>(k)]; }

OpKind parse_op(const std::string& name) {
  for (int i = 0; i < kNumOps; ++i)
    if (name == kOpNames[i]) return static_cast<OpKind>(i);
  throw Error("ops", "unknown op '" + name + "' (copy-move, splice, erase, inpaint, text, insert)");
}

OpWeights default_op_weights() { return kDefaultWeights; }

OpWeights parse_op_weights(const std::string& spec) {
  if (spec.empty() || spec == "all") return kDefaultWeights;
  OpWeights w{};
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? spec.size() + 1 : comma + 1;
    if (item.empty()) continue;
    std::string name = item;
    double weight = -1;
    size_t colon = item.find(':');
    if (colon != std::string::npos) {
      name = item.substr(0, colon);
      std::string v = item.substr(colon + 1);
      char* end = nullptr;
      weight = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != 0 || !(weight >= 0) || !std::isfinite(weight))
        throw Error("ops", "bad weight '" + v + "' for op '" + name + "'");
    }
    int k = static_cast<int>(parse_op(name));
    w[k] = weight >= 0 ? weight : kDefaultWeights[k];
  }
  double total = 0;
  for (double v : w) total += v;
  if (!(total > 0)) throw Error("ops", "no op enabled");
  return w;
}

int sample_edit_count(Rng& rng, double pristine_prob, int max_edits) {
  if (rng.bernoulli(pristine_prob) || max_edits <= 0) return 0;
  return static_cast<int>(rng.randint(1, max_edits));
}

int sample_op(Rng& rng, const OpWeights& w, const std::array<bool, kNumOps>& allowed) {
  std::vector<double> ws(kNumOps);
  bool any = false;
  for (int i = 0; i < kNumOps; ++i) {
    ws[i] = allowed[i] ? w[i] : 0.0;
    any |= ws[i] > 0;
  }
  if (!any) return -1;
  return static_cast<int>(rng.weighted(ws));
}

// ---------------------------------------------------------------------------------------------
// Pixel building blocks.

void copy_box(Raster& img, const Box& src, const Box& dst) {
  Raster patch = crop(img, src);
  if (patch.w != dst.w() || patch.h != dst.h()) patch = resize_bilinear(patch, dst.w(), dst.h());
  paste(img, patch, dst.x0, dst.y0);
}

void smooth_seam(Raster& img, const Box& box) {
  Box outer = box.expand(kConcealMargin).clip(img.w, img.h);
  Box inner = box.expand(-kConcealMargin);
  Box read = outer.expand(1).clip(img.w, img.h);
  Raster before = crop(img, read);
  const int c = img.c;
  for (int y = outer.y0; y < outer.y1; ++y)
    for (int x = outer.x0; x < outer.x1; ++x) {
      if (!inner.empty() && x >= inner.x0 && x < inner.x1 && y >= inner.y0 && y < inner.y1) continue;
      for (int k = 0; k < c; ++k) {
        int s = 0, n = 0;
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) {
            int xx = x + dx, yy = y + dy;
            if (xx < read.x0 || yy < read.y0 || xx >= read.x1 || yy >= read.y1) continue;
            s += before.px(xx - read.x0, yy - read.y0)[k];
            ++n;
          }
        img.px(x, y)[k] = static_cast<uint8_t>((s + n / 2) / n);
      }
    }
}

void composite(Raster& img, const Raster& alpha, const Box& where, const Color& color) {
  for (int y = 0; y < alpha.h; ++y) {
    int py = where.y0 + y;
    if (py < 0 || py >= img.h) continue;
    for (int x = 0; x < alpha.w; ++x) {
      int px = where.x0 + x;
      if (px < 0 || px >= img.w) continue;
      int a = *alpha.px(x, y);
      if (a == 0) continue;
      uint8_t* p = img.px(px, py);
      double f = a / 255.0;
      for (int k = 0; k < 3; ++k) p[k] = to_u8(p[k] * (1 - f) + color[k] * f);
    }
  }
}

void add_dilated_coverage(Raster& mask, const Raster& alpha, const Box& where) {
  for (int y = 0; y < alpha.h; ++y)
    for (int x = 0; x < alpha.w; ++x) {
      if (*alpha.px(x, y) == 0) continue;
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          int px = where.x0 + x + dx, py = where.y0 + y + dy;
          if (px >= 0 && py >= 0 && px < mask.w && py < mask.h) *mask.px(px, py) = 255;
        }
    }
}

namespace {

Box coverage_bbox(const Raster& alpha, const Box& where) {
  Box b{0, 0, 0, 0};
  for (int y = 0; y < alpha.h; ++y)
    for (int x = 0; x < alpha.w; ++x)
      if (*alpha.px(x, y)) b = b.unite({where.x0 + x, where.y0 + y, where.x0 + x + 1, where.y0 + y + 1});
  return b;
}

void fill_mask(Raster& mask, const Box& b0) {
  Box b = b0.clip(mask.w, mask.h);
  for (int y = b.y0; y < b.y1; ++y) std::fill(mask.px(b.x0, y), mask.px(b.x1, y), 255);
}

// Ink pixels of the box (Otsu on luma), dilated by `dilate` px and limited to the box.
std::vector<uint8_t> ink_pixels(const Raster& img, const Box& b, int dilate, bool* any) {
  Raster g = luma(crop(img, b));
  int t = otsu_threshold(g, g.bounds());
  double mean, sd;
  luma_stats(g, g.bounds(), &mean, &sd);
  std::vector<uint8_t> ink(size_t(b.w()) * b.h(), 0), out(ink.size(), 0);
  *any = false;
  if (sd < 4) return out;  // flat box: no ink
  for (int y = 0; y < b.h(); ++y)
    for (int x = 0; x < b.w(); ++x) ink[size_t(y) * b.w() + x] = *g.px(x, y) <= t;
  for (int y = 0; y < b.h(); ++y)
    for (int x = 0; x < b.w(); ++x) {
      bool on = false;
      for (int dy = -dilate; dy <= dilate && !on; ++dy)
        for (int dx = -dilate; dx <= dilate && !on; ++dx) {
          int xx = x + dx, yy = y + dy;
          if (xx >= 0 && yy >= 0 && xx < b.w() && yy < b.h() && ink[size_t(yy) * b.w() + xx]) on = true;
        }
      out[size_t(y) * b.w() + x] = on;
      *any |= on;
    }
  return out;
}

// Ink colour: mean of the darkest 10 % of the box's ink pixels (anti-aliased edges excluded).
Color ink_color(const Raster& img, const Box& b0) {
  Box b = b0.clip(img.w, img.h);
  Raster rgb = crop(img, b);
  Raster g = luma(rgb);
  int t = otsu_threshold(g, g.bounds());
  std::vector<std::pair<int, int>> ink;  // (luma, index)
  for (int i = 0; i < g.w * g.h; ++i)
    if (g.data[i] <= t) ink.push_back({g.data[i], i});
  if (ink.empty()) return {30, 30, 30};
  std::sort(ink.begin(), ink.end());
  size_t n = std::max<size_t>(1, ink.size() / 10);
  Color c{0, 0, 0};
  for (size_t i = 0; i < n; ++i)
    for (int k = 0; k < 3; ++k) c[k] += rgb.data[size_t(ink[i].second) * 3 + k];
  for (auto& v : c) v /= double(n);
  return c;
}

// Paper colour and noise level around the box: non-ink pixels of a 3-px ring.
void background_stats(const Raster& img, const Box& b, Color* color, double* sd) {
  Box outer = b.expand(3).clip(img.w, img.h);
  Raster g = luma(crop(img, outer));
  int t = otsu_threshold(g, g.bounds());
  double lm, lsd;
  luma_stats(g, g.bounds(), &lm, &lsd);
  if (lsd < 6) t = -1;  // flat: everything is background
  Color s{0, 0, 0};
  double s1 = 0, s2 = 0, n = 0;
  for (int y = outer.y0; y < outer.y1; ++y)
    for (int x = outer.x0; x < outer.x1; ++x) {
      if (x >= b.x0 && x < b.x1 && y >= b.y0 && y < b.y1) continue;
      int l = *g.px(x - outer.x0, y - outer.y0);
      if (l <= t) continue;
      const uint8_t* p = img.px(x, y);
      for (int k = 0; k < 3; ++k) s[k] += p[k];
      s1 += l, s2 += double(l) * l, n += 1;
    }
  if (n == 0) {
    *color = {255, 255, 255}, *sd = 0;
    return;
  }
  for (auto& v : s) v /= n;
  *color = s;
  double m = s1 / n;
  *sd = std::sqrt(std::max(0.0, s2 / n - m * m));
}

// Adds N(0, sd) noise (same value on the three channels, like scanner luminance noise) to the
// flagged pixels of the box (flags may be empty = whole box).
void add_noise(Raster& img, const Box& b, const std::vector<uint8_t>& flags, double sd, Rng& rng) {
  if (!(sd > 0.05)) return;
  const auto& table = normal_table();
  for (int y = b.y0; y < b.y1; ++y)
    for (int x = b.x0; x < b.x1; ++x) {
      if (!flags.empty() && !flags[size_t(y - b.y0) * b.w() + (x - b.x0)]) continue;
      double nz = sd * table[rng.next_u64() >> 48];
      uint8_t* p = img.px(x, y);
      for (int k = 0; k < 3; ++k) p[k] = to_u8(p[k] + nz);
    }
}

nlohmann::json box_json(const Box& b) { return {b.x0, b.y0, b.x1, b.y1}; }

double aspect(const Box& b) { return double(b.w()) / b.h(); }

bool free_of(const EditState& st, const Box& b, int margin) {
  Box e = b.expand(margin);
  for (auto& t : st.taken)
    if (t.intersects(e)) return false;
  return true;
}

// Words usable as targets: at least 6x6 px, inside the page, away from earlier edits.
std::vector<size_t> target_candidates(const EditState& st) {
  std::vector<size_t> out;
  const Box page = st.page.img.bounds();
  for (size_t i = 0; i < st.page.words.size(); ++i) {
    const Box& b = st.page.words[i].box;
    if (b.w() < 6 || b.h() < 6 || !page.contains(b.expand(kConcealMargin))) continue;
    if (!free_of(st, b, kConcealMargin + 1)) continue;
    out.push_back(i);
  }
  return out;
}

bool similar_shape(const Box& a, const Box& b, double h_lo, double h_hi) {
  double ar = aspect(a) / aspect(b);
  double hr = double(a.h()) / b.h();
  return std::fabs(ar - 1.0) <= 0.10 && hr >= h_lo && hr <= h_hi;
}

bool texts_differ(const Word& a, const Word& b) { return a.text.empty() || b.text.empty() || a.text != b.text; }

// Commits an edit: marks the mask and remembers the region.
void commit_box(EditState& st, const Box& mask_box) {
  fill_mask(st.mask, mask_box);
  st.taken.push_back(mask_box);
}

bool copy_move(EditState& st, const EditConfig& cfg, Rng& rng, nlohmann::json* rec) {
  auto targets = target_candidates(st);
  if (targets.size() < 2) return false;
  for (int attempt = 0; attempt < 30; ++attempt) {
    const Word& t = st.page.words[rng.pick(targets)];
    std::vector<size_t> sources;
    for (size_t j : targets) {
      const Word& s = st.page.words[j];
      if (&s == &t || s.box.intersects(t.box.expand(kConcealMargin + 1))) continue;
      if (!similar_shape(s.box, t.box, 0.8, 1.25) || !texts_differ(s, t)) continue;
      sources.push_back(j);
    }
    if (sources.empty()) continue;
    const Word& s = st.page.words[rng.pick(sources)];
    bool conceal = rng.bernoulli(cfg.conceal_prob);
    copy_box(st.page.img, s.box, t.box);
    if (conceal) smooth_seam(st.page.img, t.box);
    Box mb = t.box.expand(conceal ? kConcealMargin : 0).clip(st.page.img.w, st.page.img.h);
    commit_box(st, mb);
    *rec = {{"op", "copy-move"}, {"box", box_json(t.box)}, {"source_box", box_json(s.box)},
            {"text", t.text}, {"source_text", s.text}, {"concealed", conceal}, {"mask_box", box_json(mb)},
            {"resized", !(s.box.w() == t.box.w() && s.box.h() == t.box.h())}};
    return true;
  }
  return false;
}

bool splice(EditState& st, const EditConfig& cfg, Rng& rng, const DonorFn& donor, nlohmann::json* rec) {
  auto targets = target_candidates(st);
  if (targets.empty() || !donor) return false;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const Word& t = st.page.words[rng.pick(targets)];
    const Page* d = donor(t, rng);
    if (!d) return false;
    std::vector<size_t> cands;
    for (size_t j = 0; j < d->words.size(); ++j) {
      const Word& s = d->words[j];
      if (s.box.w() < 4 || s.box.h() < 4 || !d->img.bounds().contains(s.box)) continue;
      if (similar_shape(s.box, t.box, 0.67, 1.5) && texts_differ(s, t)) cands.push_back(j);
    }
    if (cands.empty()) continue;
    // Prefer donor words with as many characters as the target's (a plausible field swap).
    std::vector<double> weights;
    for (size_t j : cands) weights.push_back(!t.text.empty() && d->words[j].text.size() == t.text.size() ? 5.0 : 1.0);
    const Word& s = d->words[cands[rng.weighted(weights)]];
    bool conceal = rng.bernoulli(cfg.conceal_prob);
    Raster patch = crop(d->img, s.box);
    nlohmann::json colour = nullptr;
    if (conceal) {
      // Colour matching: map the donor's ink/paper colours onto the target's, per channel.
      Color tf = ink_color(st.page.img, t.box), df = ink_color(d->img, s.box), tb, db;
      double sd;
      background_stats(st.page.img, t.box, &tb, &sd);
      background_stats(d->img, s.box, &db, &sd);
      for (size_t i = 0; i < patch.data.size(); ++i) {
        int k = static_cast<int>(i % 3);
        double span = db[k] - df[k];
        double v = patch.data[i];
        v = std::fabs(span) > 20 ? tb[k] + (v - db[k]) * (tb[k] - tf[k]) / span : v + (tb[k] - db[k]);
        patch.data[i] = to_u8(v);
      }
      colour = {{"target_ink", tf}, {"target_paper", tb}, {"donor_ink", df}, {"donor_paper", db}};
    }
    if (patch.w != t.box.w() || patch.h != t.box.h()) patch = resize_bilinear(patch, t.box.w(), t.box.h());
    paste(st.page.img, patch, t.box.x0, t.box.y0);
    if (conceal) smooth_seam(st.page.img, t.box);
    Box mb = t.box.expand(conceal ? kConcealMargin : 0).clip(st.page.img.w, st.page.img.h);
    commit_box(st, mb);
    *rec = {{"op", "splice"}, {"box", box_json(t.box)}, {"donor_box", box_json(s.box)}, {"text", t.text},
            {"donor_text", s.text}, {"concealed", conceal}, {"mask_box", box_json(mb)}, {"colour_match", colour}};
    return true;
  }
  return false;
}

// A blank patch of the box's size elsewhere on the page (no words, flat, paper-like), or an empty box.
Box find_blank(const EditState& st, const Box& like, const Color& paper, double paper_sd, Rng& rng) {
  const Raster& img = st.page.img;
  if (like.w() + 8 > img.w || like.h() + 8 > img.h) return {};
  for (int attempt = 0; attempt < 80; ++attempt) {
    int x = static_cast<int>(rng.randint(4, img.w - like.w() - 4));
    int y = static_cast<int>(rng.randint(4, img.h - like.h() - 4));
    Box p{x, y, x + like.w(), y + like.h()};
    if (p.intersects(like.expand(kConcealMargin + 1)) || !free_of(st, p, 1)) continue;
    bool clash = false;
    for (auto& w : st.page.words)
      if (w.box.intersects(p.expand(3))) {
        clash = true;
        break;
      }
    if (clash) continue;
    Raster g = luma(crop(img, p));
    double m, sd;
    luma_stats(g, g.bounds(), &m, &sd);
    double paper_l = (19595 * paper[0] + 38470 * paper[1] + 7471 * paper[2]) / 65536.0;
    if (sd <= paper_sd + 3 && std::fabs(m - paper_l) <= 10) return p;
  }
  return {};
}

bool erase(EditState& st, const EditConfig& cfg, Rng& rng, nlohmann::json* rec) {
  auto targets = target_candidates(st);
  if (targets.empty()) return false;
  const Word& t = st.page.words[rng.pick(targets)];
  bool conceal = rng.bernoulli(cfg.conceal_prob);
  Color paper;
  double sd;
  background_stats(st.page.img, t.box, &paper, &sd);
  Box patch = find_blank(st, t.box, paper, sd, rng);
  std::string method;
  if (!patch.empty()) {
    copy_box(st.page.img, patch, t.box);
    method = "patch";
  } else {
    Box b = t.box;
    for (int y = b.y0; y < b.y1; ++y)
      for (int x = b.x0; x < b.x1; ++x)
        for (int k = 0; k < 3; ++k) st.page.img.px(x, y)[k] = to_u8(paper[k]);
    add_noise(st.page.img, b, {}, sd, rng);
    method = "fill";
  }
  if (conceal) smooth_seam(st.page.img, t.box);
  Box mb = t.box.expand(conceal ? kConcealMargin : 0).clip(st.page.img.w, st.page.img.h);
  commit_box(st, mb);
  *rec = {{"op", "erase"}, {"box", box_json(t.box)}, {"text", t.text}, {"method", method},
          {"patch_box", patch.empty() ? nlohmann::json(nullptr) : box_json(patch)}, {"concealed", conceal},
          {"mask_box", box_json(mb)}};
  return true;
}

bool inpaint_op(EditState& st, const EditConfig& cfg, Rng& rng, nlohmann::json* rec) {
  auto targets = target_candidates(st);
  if (targets.empty()) return false;
  const Word& t = st.page.words[rng.pick(targets)];
  bool conceal = rng.bernoulli(cfg.conceal_prob);
  bool whole = rng.bernoulli(0.5);
  std::vector<uint8_t> unknown;
  bool any = true;
  if (whole) unknown.assign(size_t(t.box.w()) * t.box.h(), 1);
  else unknown = ink_pixels(st.page.img, t.box, 1, &any);
  if (!any) unknown.assign(size_t(t.box.w()) * t.box.h(), 1), whole = true;
  Color paper;
  double sd;
  background_stats(st.page.img, t.box, &paper, &sd);
  inpaint_diffusion(st.page.img, t.box, unknown);
  if (conceal) {
    add_noise(st.page.img, t.box, unknown, sd, rng);
    smooth_seam(st.page.img, t.box);
  }
  Box mb = t.box.expand(conceal ? kConcealMargin : 0).clip(st.page.img.w, st.page.img.h);
  commit_box(st, mb);
  *rec = {{"op", "inpaint"}, {"box", box_json(t.box)}, {"text", t.text}, {"method", "diffusion"},
          {"region", whole ? "box" : "text-pixels"}, {"noise_sd", conceal ? sd : 0.0}, {"concealed", conceal},
          {"mask_box", box_json(mb)}};
  return true;
}

// Most common font of the page's known-style words, median size; false when none is known.
bool page_font(const Page& p, FontSpec* f, Color* color) {
  std::vector<const Word*> known;
  for (auto& w : p.words)
    if (w.style.known && !w.style.bold) known.push_back(&w);
  if (known.empty())
    for (auto& w : p.words)
      if (w.style.known) known.push_back(&w);
  if (known.empty()) return false;
  std::vector<double> sizes;
  for (auto* w : known) sizes.push_back(w->style.size_px);
  std::nth_element(sizes.begin(), sizes.begin() + sizes.size() / 2, sizes.end());
  f->family = known[0]->style.family;
  f->bold = false, f->italic = false;
  f->size_px = sizes[sizes.size() / 2];
  *color = known[0]->style.color;
  return true;
}

// Font matching for a word of unknown style but known text: the family and weight whose ink
// aspect ratio (width / height) for the word's own text is closest to the box's.
FontSpec match_font(const Word& t, const std::vector<FontFace>& fonts) {
  double target = std::log(std::max(1.0, t.box.w() - 2.0) / std::max(1.0, t.box.h() - 2.0));
  FontSpec best;
  double best_err = 1e30;
  for (auto& f : fonts)
    for (bool bold : {false, true}) {
      FontSpec s{f.family, bold, false, 40.0};
      TextExtents e = text_engine().measure(t.text, s);
      if (e.ink_w <= 0 || e.ink_h <= 0) continue;
      double err = std::fabs(std::log(e.ink_w / e.ink_h) - target);
      if (err < best_err) best_err = err, best = s;
    }
  if (best.family.empty()) best.family = fonts.front().family;
  return best;
}

std::string new_field_text(Rng& rng) {
  switch (rng.randint(0, 5)) {
    case 0: return content::amount(rng, 5, 20000);
    case 1: return content::date(rng);
    case 2: return content::reference(rng, "REF");
    case 3: return content::person_name(rng);
    case 4: return content::amount(rng, 1, 500);
    default: return content::iban(rng).substr(0, 14);
  }
}

// A text of about the box's width in characters when the word's text is unknown.
std::string text_for_box(Rng& rng, const Box& b) {
  int chars = std::max(1, static_cast<int>(std::lround(b.w() / (0.6 * std::max(4, b.h() - 2)))));
  std::string s;
  bool digits = rng.bernoulli(0.6);
  for (int i = 0; i < chars; ++i) {
    if (digits && chars >= 4 && i == chars - 3) s += '.';
    else s += digits ? static_cast<char>('0' + rng.randint(0, 9)) : static_cast<char>('A' + rng.randint(0, 25));
  }
  return s;
}

std::string one_letter(Rng& rng) { return std::string(1, static_cast<char>('A' + rng.randint(0, 25))); }

// What someone types onto a scan with an image editor: a reference number, a name, one letter...
std::string overlay_text(Rng& rng) {
  switch (rng.randint(0, 5)) {
    case 0: {
      std::string s;
      for (int i = 0; i < 7; ++i) s += static_cast<char>('0' + rng.randint(i == 0 ? 1 : 0, 9));
      return s;
    }
    case 1: return content::person_name(rng);
    case 2: return one_letter(rng);
    case 3: return content::reference(rng, "REF");
    case 4: return content::date(rng);
    default: return content::amount(rng, 1, 5000);
  }
}

// The median height of the page's word boxes (the page must have words).
int median_word_height(const Page& page) {
  std::vector<int> hs;
  for (auto& w : page.words) hs.push_back(w.box.h());
  std::nth_element(hs.begin(), hs.begin() + hs.size() / 2, hs.end());
  return hs[hs.size() / 2];
}

// The ink of an editor's overlay: near-black grey 0-40 (4 in 5) or dark blue.
Color overlay_color(Rng& rng) {
  if (rng.bernoulli(0.8)) {
    double g = static_cast<double>(rng.randint(0, 40));
    return {g, g, g};
  }
  return {static_cast<double>(rng.randint(0, 30)), static_cast<double>(rng.randint(0, 40)),
          static_cast<double>(rng.randint(90, 160))};
}

// The overlay style of insert_op: near-black (or dark blue) digital text in any catalogue family, bold
// half the time, 0.9-2.2x the page-style size (never blurred: see insert_op).
void overlay_style(const Page& page, const EditConfig& cfg, Rng& rng, FontSpec* font, Color* color) {
  font->family = rng.pick(cfg.fonts).family;
  font->bold = rng.bernoulli(0.5);
  font->italic = false;
  font->size_px = std::max(8.0, (median_word_height(page) - 2) * 1.3 * rng.uniform(0.9, 2.2));
  *color = overlay_color(rng);
}

bool text_op(EditState& st, const EditConfig& cfg, Rng& rng, nlohmann::json* rec) {
  auto targets = target_candidates(st);
  if (targets.empty()) return false;
  const Page& page = st.page;
  // Fraud targets amounts, dates, numbers and names: words holding a digit are 4x as likely.
  std::vector<double> weights;
  for (size_t i : targets) {
    bool digit = false;
    for (char c : page.words[i].text) digit |= std::isdigit(static_cast<unsigned char>(c)) != 0;
    weights.push_back(digit ? 4.0 : 1.0);
  }
  // Drawn only when enabled, so sets made without overlays keep their random stream.
  const bool overlay = cfg.text_overlay_prob > 0 && rng.bernoulli(cfg.text_overlay_prob);
  for (int attempt = 0; attempt < 8; ++attempt) {
    const Word& t = page.words[targets[rng.weighted(weights)]];
    std::string new_text = t.text.empty() ? text_for_box(rng, t.box) : content::replacement_for(rng, t.text);
    if (new_text == t.text) continue;
    FontSpec font;
    bool fitted = !t.style.known || overlay;
    if (overlay) {
      font.family = rng.pick(cfg.fonts).family;  // whatever the editor offered, not matched to the page
      font.bold = rng.bernoulli(0.3);
    } else if (t.style.known) {
      font = {t.style.family, t.style.bold, t.style.italic, t.style.size_px};
    } else {
      Color unused;
      if (page_font(page, &font, &unused)) {
        font.bold = rng.bernoulli(0.2);
      } else if (!t.text.empty()) {
        font = match_font(t, cfg.fonts);
      } else {
        font.family = rng.pick(cfg.fonts).family;
        font.bold = rng.bernoulli(0.2);
      }
    }
    Color color = overlay ? overlay_color(rng)
                  : (t.style.known && !page.degraded) ? t.style.color : ink_color(page.img, t.box);
    bool conceal = !overlay && rng.bernoulli(cfg.conceal_prob);
    double blur = conceal ? rng.uniform(0.2, 0.5) : 0.0;
    // Render on a copy first: reject texts that would run into other words.
    Raster trial = page.img;
    Box where;
    Raster alpha = replace_text(trial, t, new_text, font, color, fitted, blur, &where);
    Box cov = coverage_bbox(alpha, where);
    bool clash = !page.img.bounds().contains(cov);
    for (auto& w : page.words)
      if (&w != &t && w.box.intersects(cov) && !w.box.intersects(t.box)) clash = true;
    if (!free_of(st, cov, 1)) clash = true;
    if (clash && attempt < 7) continue;
    if (clash) return false;
    st.page.img = std::move(trial);
    Box mb = t.box.expand(conceal ? kConcealMargin : 0).clip(page.img.w, page.img.h);
    if (conceal) smooth_seam(st.page.img, t.box);
    fill_mask(st.mask, mb);
    add_dilated_coverage(st.mask, alpha, where);
    st.taken.push_back(mb.unite(cov.expand(1)));
    FontSpec used = font;
    *rec = {{"op", "text"}, {"style", overlay ? "overlay" : "page"}, {"box", box_json(t.box)},
            {"text", t.text}, {"new_text", new_text},
            {"font", {{"family", used.family}, {"bold", used.bold}, {"italic", used.italic},
                      {"size_px", fitted ? nullptr : nlohmann::json(used.size_px)}, {"fitted", fitted}}},
            {"color", color}, {"alpha_blur", blur}, {"concealed", conceal},
            {"text_box", box_json(cov)}, {"mask_box", box_json(mb.unite(cov.expand(1)).clip(page.img.w, page.img.h))}};
    return true;
  }
  return false;
}

// New text on a blank area (no word within h/3, luma sd <= 6, mean >= 200). Two styles:
// - page (default): the page's font and ink (or a catalogue family at 1.3x the median word height and
//   the ink of a word), concealed (coverage blurred) with conceal_prob;
// - overlay (share cfg.insert_overlay_prob): what someone types onto a scan with an image editor
//   (overlay_style, overlay_text; one letter at least a share cfg.overlay_letter_prob of the time), sharp,
//   and in the top fifth of the page half the time.
bool insert_op(EditState& st, const EditConfig& cfg, Rng& rng, nlohmann::json* rec) {
  Page& page = st.page;
  // Drawn only when enabled, so sets made without overlays keep their random stream.
  const bool overlay = cfg.insert_overlay_prob > 0 && !page.words.empty() && rng.bernoulli(cfg.insert_overlay_prob);
  FontSpec font;
  Color color{30, 30, 30};
  bool conceal = false, top = false;
  double blur = 0;
  std::string text;
  if (overlay) {
    overlay_style(page, cfg, rng, &font, &color);
    top = rng.bernoulli(0.5);
    // One letter on its own share first, drawn only when asked for (earlier sets keep their stream).
    text = cfg.overlay_letter_prob > 0 && rng.bernoulli(cfg.overlay_letter_prob) ? one_letter(rng) : overlay_text(rng);
  } else {
    if (!page_font(page, &font, &color)) {
      font.family = rng.pick(cfg.fonts).family;
      if (page.words.empty()) return false;
      font.size_px = std::max(6.0, (median_word_height(page) - 2) * 1.3);
    }
    if (page.degraded || page.words.empty() || !page.words[0].style.known) {
      if (!page.words.empty()) color = ink_color(page.img, rng.pick(page.words).box);
    }
    conceal = rng.bernoulli(cfg.conceal_prob);
    blur = conceal ? rng.uniform(0.2, 0.5) : 0.0;
    text = new_field_text(rng);
  }
  Box rel;
  Raster alpha = text_engine().render_alpha(text, font, 0, 0, &rel);
  if (blur > 0) alpha = gaussian_blur(alpha, blur);
  Box cov0 = coverage_bbox(alpha, rel);
  if (cov0.empty() || cov0.w() + 16 > page.img.w || cov0.h() + 16 > page.img.h) return false;
  Raster g = luma(page.img);
  const int y_lo = 8 - cov0.y0, y_hi = page.img.h - 8 - cov0.y1;
  const int y_top = std::max(y_lo, std::min(y_hi, page.img.h / 5 - cov0.y1));  // bottom in the top fifth
  for (int attempt = 0; attempt < 120; ++attempt) {
    int dx = static_cast<int>(rng.randint(8 - cov0.x0, page.img.w - 8 - cov0.x1));
    int dy = static_cast<int>(rng.randint(y_lo, top && attempt < 80 ? y_top : y_hi));
    Box cov = cov0.shift(dx, dy);
    Box zone = cov.expand(std::max(4, cov.h() / 3));
    if (!free_of(st, zone, 0)) continue;
    bool clash = false;
    for (auto& w : page.words)
      if (w.box.intersects(zone)) {
        clash = true;
        break;
      }
    if (clash) continue;
    double m, sd;
    luma_stats(g, zone, &m, &sd);
    if (sd > 6 || m < 200) continue;
    Box where = rel.shift(dx, dy);
    composite(page.img, alpha, where, color);
    add_dilated_coverage(st.mask, alpha, where);
    st.taken.push_back(cov.expand(1));
    *rec = {{"op", "insert"}, {"style", overlay ? "overlay" : "page"}, {"text_box", box_json(cov)},
            {"new_text", text},
            {"font", {{"family", font.family}, {"bold", font.bold}, {"size_px", font.size_px}}},
            {"color", color}, {"alpha_blur", blur}, {"concealed", conceal},
            {"mask_box", box_json(cov.expand(1).clip(page.img.w, page.img.h))}};
    return true;
  }
  return false;
}

}  // namespace

Raster replace_text(Raster& img, const Word& w, const std::string& new_text, const FontSpec& font0,
                    const Color& color, bool fitted, double alpha_blur, Box* where) {
  // 1. Remove the old ink (diffusion inpainting of the ink pixels, dilated by 1 px).
  bool any = false;
  auto unknown = ink_pixels(img, w.box, 1, &any);
  if (any) inpaint_diffusion(img, w.box, unknown);
  // 2. Place the new text.
  auto& eng = text_engine();
  FontSpec font = font0;
  double x, baseline;
  if (!fitted) {
    x = w.style.origin_x, baseline = w.style.baseline_y;
  } else {
    double lo = 2, hi = std::max(4.0, 4.0 * w.box.h());
    for (int it = 0; it < 24; ++it) {
      double mid = 0.5 * (lo + hi);
      font.size_px = mid;
      TextExtents e = eng.measure(new_text, font);
      bool fits = e.ink_w <= w.box.w() * 1.02 - 2 && e.ink_h <= w.box.h() - 2;
      (fits ? lo : hi) = mid;
    }
    font.size_px = lo * 0.98;
    TextExtents e = eng.measure(new_text, font);
    x = w.box.x0 + 1 - e.ink_x;
    double top = (w.box.y0 + w.box.y1) / 2.0 - (e.ink_y + e.ink_h / 2);
    baseline = top + e.baseline;
  }
  Raster alpha = eng.render_alpha(new_text, font, x, baseline, where);
  if (alpha_blur > 0) alpha = gaussian_blur(alpha, alpha_blur);
  composite(img, alpha, *where, color);
  return alpha;
}

bool apply_op(OpKind op, EditState& st, const EditConfig& cfg, Rng& rng, const DonorFn& donor,
              nlohmann::json* record) {
  switch (op) {
    case OpKind::CopyMove: return copy_move(st, cfg, rng, record);
    case OpKind::Splice: return splice(st, cfg, rng, donor, record);
    case OpKind::Erase: return erase(st, cfg, rng, record);
    case OpKind::Inpaint: return inpaint_op(st, cfg, rng, record);
    case OpKind::Text: return text_op(st, cfg, rng, record);
    case OpKind::Insert: return insert_op(st, cfg, rng, record);
  }
  return false;
}

}  // namespace diffnet::synth
