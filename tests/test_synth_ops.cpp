// Tampering ops on rendered pages: each op's mask rule, copy-move pixels, seam smoothing, text
// replacement in the matching font, insertion.
#include <cctype>
#include <cmath>
#include <memory>

#include "diffnet/common.h"
#include "synth/layouts.h"
#include "synth/ops.h"
#include "synth/raster.h"
#include "testing.h"

using namespace diffnet;
using namespace diffnet::synth;

namespace {

Page rendered_page(LayoutKind kind, uint64_t seed, const char* font_class = "sans", double dpi = 110) {
  Rng r(seed);
  FontFace f = select_fonts({font_class})[0];
  RenderedPage rp = render_document(kind, f, dpi, r);
  Page p;
  p.img = std::move(rp.image);
  p.words = std::move(rp.words);
  return p;
}

Box json_box(const nlohmann::json& j) { return {j[0].get<int>(), j[1].get<int>(), j[2].get<int>(), j[3].get<int>()}; }

int64_t mask_count(const Raster& m) {
  int64_t n = 0;
  for (auto v : m.data) n += v != 0;
  return n;
}

// Checks: every changed pixel is inside the mask; mask values are 0/255.
void expect_changes_inside_mask(const Raster& before, const Raster& after, const Raster& mask, const std::string& what) {
  int64_t changed = 0, outside = 0;
  for (int y = 0; y < before.h; ++y)
    for (int x = 0; x < before.w; ++x) {
      const uint8_t *a = before.px(x, y), *b = after.px(x, y);
      uint8_t m = *mask.px(x, y);
      ASSERT_TRUE(m == 0 || m == 255);
      if (a[0] != b[0] || a[1] != b[1] || a[2] != b[2]) {
        ++changed;
        outside += m == 0;
      }
    }
  EXPECT_GT(changed, 0) << what;
  EXPECT_EQ(outside, 0) << what << ": " << outside << " of " << changed << " changed pixels outside the mask";
}

// Checks an editor's overlay record (`insert` or `text` with the overlay style) against the page: never
// concealed or blurred, ink near-black grey or dark blue, and sharp: some pixel of the text at least half
// way from white to the ink (thin strokes may cover no pixel whole); with `solid` (bold text), some pixel
// exactly the ink (full coverage, no blur).
void expect_overlay_ink(const Raster& img, const nlohmann::json& rec, bool solid, const std::string& what) {
  EXPECT_EQ(rec["style"], "overlay") << what;
  EXPECT_FALSE(rec["concealed"].get<bool>()) << what;
  EXPECT_EQ(rec["alpha_blur"].get<double>(), 0.0) << what;
  auto c = rec["color"].get<std::vector<double>>();
  const bool grey = c[0] == c[1] && c[1] == c[2] && c[0] <= 40;
  const bool blue = c[0] <= 30 && c[1] <= 40 && c[2] >= 90 && c[2] <= 160;
  EXPECT_TRUE(grey || blue) << what;
  Box tb = json_box(rec["text_box"]);
  int exact_px = 0;
  double darkest = 255;
  for (int y = tb.y0; y < tb.y1; ++y)
    for (int x = tb.x0; x < tb.x1; ++x) {
      const uint8_t* p = img.px(x, y);
      bool exact = true;
      for (int k = 0; k < 3; ++k) exact &= std::fabs(p[k] - c[k]) <= 1.0;
      exact_px += exact;
      darkest = std::min(darkest, (p[0] + p[1] + p[2]) / 3.0);
    }
  if (solid) {
    EXPECT_GT(exact_px, 0) << what;
  }
  EXPECT_LE(darkest, (255 + (c[0] + c[1] + c[2]) / 3) / 2) << what;
}

// Applies `op` once to `page` with its overlay style on (concealment asked for too: an overlay must
// ignore it), every catalogue family allowed. Returns false when the page offers no target; otherwise
// *mask is the edit's mask and *rec its record.
bool apply_overlay_op(OpKind op, Page& page, uint64_t seed, Raster* mask, nlohmann::json* rec) {
  EditConfig cfg;
  cfg.conceal_prob = 1;
  cfg.insert_overlay_prob = 1;
  cfg.text_overlay_prob = 1;
  cfg.fonts = select_fonts({"all"});
  EditState st(page);
  Rng rng(seed);
  if (!apply_op(op, st, cfg, rng, nullptr, rec)) return false;
  *mask = st.mask;
  return true;
}

}  // namespace

TEST(SynthOps, CopyBoxSameSizeIsExactCopyAndTouchesNothingElse) {
  Rng r(1);
  Raster img(80, 50, 3);
  for (auto& v : img.data) v = static_cast<uint8_t>(r.randint(0, 255));
  Raster before = img;
  Box src{5, 5, 25, 15}, dst{40, 30, 60, 40};
  copy_box(img, src, dst);
  for (int y = 0; y < img.h; ++y)
    for (int x = 0; x < img.w; ++x)
      for (int k = 0; k < 3; ++k) {
        bool in = x >= dst.x0 && x < dst.x1 && y >= dst.y0 && y < dst.y1;
        uint8_t want = in ? before.px(x - dst.x0 + src.x0, y - dst.y0 + src.y0)[k] : before.px(x, y)[k];
        ASSERT_EQ(img.px(x, y)[k], want) << x << "," << y;
      }
}

TEST(SynthOps, SeamSmoothingIsA3x3MeanOnTheBandOnly) {
  Rng r(2);
  Raster img(60, 40, 3);
  for (auto& v : img.data) v = static_cast<uint8_t>(r.randint(0, 255));
  Raster before = img;
  Box b{20, 12, 44, 30};
  smooth_seam(img, b);
  Box outer = b.expand(kConcealMargin), inner = b.expand(-kConcealMargin);
  for (int y = 0; y < img.h; ++y)
    for (int x = 0; x < img.w; ++x) {
      bool in_outer = x >= outer.x0 && x < outer.x1 && y >= outer.y0 && y < outer.y1;
      bool in_inner = x >= inner.x0 && x < inner.x1 && y >= inner.y0 && y < inner.y1;
      for (int k = 0; k < 3; ++k) {
        if (!in_outer || in_inner) {
          ASSERT_EQ(img.px(x, y)[k], before.px(x, y)[k]);
          continue;
        }
        double s = 0;
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) s += before.px(x + dx, y + dy)[k];
        ASSERT_NEAR(img.px(x, y)[k], s / 9.0, 0.51);
      }
    }
}

// Every op, with and without concealment: changed pixels inside the mask and the op's rule.
TEST(SynthOps, EveryOpKeepsItsMaskRule) {
  int seed = 10;
  for (int op = 0; op < kNumOps; ++op) {
    for (double conceal : {0.0, 1.0}) {
      Page page = rendered_page(op % 2 ? LayoutKind::Statement : LayoutKind::Invoice, seed++);
      EditConfig cfg;
      cfg.conceal_prob = conceal;
      cfg.fonts = select_fonts({"all"});
      Raster before = page.img;
      EditState st(page);
      Rng rng(100 + seed);
      std::unique_ptr<Page> donor_page;
      DonorFn donor = [&](const Word& t, Rng& r) -> const Page* {
        FontFace f = select_fonts({"serif"})[0];
        std::vector<std::string> texts(6, t.text);
        RenderedPage rp = render_word_sheet(texts, f, t.style.size_px, 600, 200, r);
        donor_page = std::make_unique<Page>();
        donor_page->img = rp.image;
        donor_page->words = rp.words;
        return donor_page.get();
      };
      nlohmann::json rec;
      std::string what = std::string(op_name(static_cast<OpKind>(op))) + (conceal > 0 ? " concealed" : "");
      ASSERT_TRUE(apply_op(static_cast<OpKind>(op), st, cfg, rng, donor, &rec)) << what;
      expect_changes_inside_mask(before, page.img, st.mask, what);
      EXPECT_EQ(rec["op"], op_name(static_cast<OpKind>(op)));
      EXPECT_EQ(rec["concealed"].get<bool>(), conceal > 0) << what;
      OpKind k = static_cast<OpKind>(op);
      if (k == OpKind::Text || k == OpKind::Insert) {
        // Mask = (box + margin, text only) united with the coverage dilated by 1 px: the mask
        // must not reach beyond the recorded mask box, and must cover the text box.
        Box mb = json_box(rec["mask_box"]), tb = json_box(rec["text_box"]);
        for (int y = 0; y < st.mask.h; ++y)
          for (int x = 0; x < st.mask.w; ++x)
            if (*st.mask.px(x, y)) {
              ASSERT_TRUE(x >= mb.x0 && x < mb.x1 && y >= mb.y0 && y < mb.y1) << what;
            }
        EXPECT_TRUE(mb.contains(tb)) << what;
        if (k == OpKind::Text) {
          EXPECT_NE(rec["new_text"], rec["text"]);
          Box b = json_box(rec["box"]).expand(conceal > 0 ? kConcealMargin : 0);
          for (int y = b.y0; y < b.y1; ++y)
            for (int x = b.x0; x < b.x1; ++x) ASSERT_EQ(*st.mask.px(x, y), 255) << what;
        }
      } else {
        // Box ops: mask == target box (+ kConcealMargin when concealed), exactly.
        Box b = json_box(rec["box"]).expand(conceal > 0 ? kConcealMargin : 0);
        EXPECT_EQ(json_box(rec["mask_box"]), b) << what;
        EXPECT_EQ(mask_count(st.mask), b.area()) << what;
        for (int y = b.y0; y < b.y1; ++y)
          for (int x = b.x0; x < b.x1; ++x) ASSERT_EQ(*st.mask.px(x, y), 255) << what;
      }
      if (k == OpKind::CopyMove && conceal == 0) {
        // Target pixels == source pixels resized to the target (float64 bilinear reference).
        Box t = json_box(rec["box"]), s = json_box(rec["source_box"]);
        double max_err = 0;
        for (int y = 0; y < t.h(); ++y)
          for (int x = 0; x < t.w(); ++x)
            for (int c = 0; c < 3; ++c) {
              double sx = std::max(0.0, (x + 0.5) * s.w() / t.w() - 0.5), sy = std::max(0.0, (y + 0.5) * s.h() / t.h() - 0.5);
              int x0 = std::min(s.w() - 1, int(sx)), y0 = std::min(s.h() - 1, int(sy));
              int x1 = std::min(s.w() - 1, x0 + 1), y1 = std::min(s.h() - 1, y0 + 1);
              double fx = sx - x0, fy = sy - y0;
              auto at = [&](int xx, int yy) { return double(before.px(s.x0 + xx, s.y0 + yy)[c]); };
              double v = (1 - fy) * ((1 - fx) * at(x0, y0) + fx * at(x1, y0)) + fy * ((1 - fx) * at(x0, y1) + fx * at(x1, y1));
              max_err = std::max(max_err, std::fabs(page.img.px(t.x0 + x, t.y0 + y)[c] - v));
            }
        EXPECT_LE(max_err, 0.51);
        double ar = double(s.w()) / s.h() / (double(t.w()) / t.h());
        EXPECT_LE(std::fabs(ar - 1), 0.10 + 1e-9);
        EXPECT_FALSE(s.intersects(t));
      }
    }
  }
}

// Re-rendering a word's own text with its recorded style reproduces it (font, size, colour and
// position match); a different text changes the ink substantially, in the same colour.
TEST(SynthOps, TextReplacementMatchesFontSizeAndColour) {
  for (const char* cls : {"serif", "sans", "mono"}) {
    Page page = rendered_page(LayoutKind::Letter, 77, cls, 150);
    const Word* w = nullptr;
    for (auto& cand : page.words)
      if (cand.text.size() >= 5 && cand.box.h() >= 12 && cand.box.w() >= 30) {
        w = &cand;
        break;
      }
    ASSERT_NE(w, nullptr);
    FontSpec f{w->style.family, w->style.bold, w->style.italic, w->style.size_px};
    Raster same = page.img;
    Box where;
    replace_text(same, *w, w->text, f, w->style.color, false, 0, &where);
    double sum = 0;
    int n = 0, big = 0;
    for (int y = w->box.y0; y < w->box.y1; ++y)
      for (int x = w->box.x0; x < w->box.x1; ++x)
        for (int k = 0; k < 3; ++k) {
          double d = std::fabs(double(same.px(x, y)[k]) - page.img.px(x, y)[k]);
          sum += d, ++n, big += d > 24;
        }
    EXPECT_LT(sum / n, 2.0) << cls;
    EXPECT_LT(big, n / 50) << cls;

    Raster other = page.img;
    std::string new_text = w->text;
    for (auto& c : new_text) c = std::isdigit(static_cast<unsigned char>(c)) ? (c == '7' ? '2' : '7') : (c == 'o' ? 'x' : 'o');
    replace_text(other, *w, new_text, f, w->style.color, false, 0, &where);
    int changed = 0, ink_px = 0;
    double ink_l = 0;
    for (int y = w->box.y0; y < w->box.y1; ++y)
      for (int x = w->box.x0; x < w->box.x1; ++x) {
        changed += std::abs(int(other.px(x, y)[1]) - int(page.img.px(x, y)[1])) > 64;
        int l = other.px(x, y)[1];
        if (l < 100) ink_px++, ink_l += l;
      }
    EXPECT_GT(changed, w->box.area() / 20) << cls;
    ASSERT_GT(ink_px, 0) << cls;
    EXPECT_NEAR(ink_l / ink_px, w->style.color[1], 45) << cls;  // mostly solid ink in the word's colour
  }
}

// The overlay style of `insert` (--insert-overlay-prob): sharp near-black or dark-blue digital text,
// never concealed, changes only inside its mask, about half of it in the top fifth of the page.
TEST(SynthOps, InsertOverlayIsSharpDarkTextOftenAtTheTop) {
  int overlays = 0, in_top = 0;
  for (int seed = 0; seed < 40; ++seed) {
    Page page = rendered_page(seed % 2 ? LayoutKind::Letter : LayoutKind::Receipt, 300 + seed);
    const Raster before = page.img;
    Raster mask;
    nlohmann::json rec;
    if (!apply_overlay_op(OpKind::Insert, page, 900 + seed, &mask, &rec)) continue;  // no blank area on this page
    const std::string what = "seed " + std::to_string(seed) + " " + rec.dump();
    ++overlays;
    expect_changes_inside_mask(before, page.img, mask, what);
    expect_overlay_ink(page.img, rec, rec["font"]["bold"].get<bool>(), what);
    Box tb = json_box(rec["text_box"]);
    // Larger than or about as large as the page's median word (0.9-2.2 x 1.3 x (median height - 2)).
    std::vector<int> hs;
    for (auto& w : page.words) hs.push_back(w.box.h());
    std::sort(hs.begin(), hs.end());
    double ratio = rec["font"]["size_px"].get<double>() / (1.3 * (hs[hs.size() / 2] - 2));
    EXPECT_TRUE((ratio >= 0.9 - 1e-9 && ratio <= 2.2 + 1e-9) || rec["font"]["size_px"].get<double>() == 8.0) << what;
    in_top += tb.y1 <= page.img.h / 5;
  }
  ASSERT_GE(overlays, 30);
  // Half are aimed at the top fifth; pages without room there fall back to the whole page. Measured:
  // 21 of 39 in the top fifth; 8 of 37 when none is aimed there, 27 of 37 when all are.
  EXPECT_GE(in_top, overlays / 3);
  EXPECT_LE(in_top, overlays * 2 / 3);
}

// --overlay-letter-prob: with 1, every editor's overlay is one capital letter (the text mix alone gives
// one in six); with 0 (the default) the records are those of a config without the field.
TEST(SynthOps, OverlayLetterShareTypesOneCapitalLetter) {
  int overlays = 0, letters = 0, mixed_letters = 0, mixed = 0;
  for (int seed = 0; seed < 24; ++seed) {
    for (const double share : {1.0, 0.0}) {
      Page page = rendered_page(seed % 2 ? LayoutKind::Letter : LayoutKind::Receipt, 300 + seed);
      EditConfig cfg;
      cfg.insert_overlay_prob = 1;
      cfg.overlay_letter_prob = share;
      cfg.fonts = select_fonts({"all"});
      EditState st(page);
      Rng rng(900 + seed);
      nlohmann::json rec;
      if (!apply_op(OpKind::Insert, st, cfg, rng, nullptr, &rec)) continue;
      const std::string t = rec["new_text"].get<std::string>();
      const bool letter = t.size() == 1 && t[0] >= 'A' && t[0] <= 'Z';
      if (share == 1.0) {
        ++overlays, letters += letter;
        EXPECT_EQ(rec["style"], "overlay") << rec.dump();
      } else {
        ++mixed, mixed_letters += letter;
        // The default draws nothing more: the same record as apply_overlay_op (no field set) gives.
        Page again = rendered_page(seed % 2 ? LayoutKind::Letter : LayoutKind::Receipt, 300 + seed);
        Raster mask;
        nlohmann::json ref;
        ASSERT_TRUE(apply_overlay_op(OpKind::Insert, again, 900 + seed, &mask, &ref));
        EXPECT_EQ(rec["new_text"], ref["new_text"]);
        EXPECT_EQ(rec["text_box"], ref["text_box"]);
      }
    }
  }
  ASSERT_GE(overlays, 15);
  EXPECT_EQ(letters, overlays);
  EXPECT_LE(mixed_letters, mixed / 2);
}

// The overlay style of `text` (--text-overlay-prob): the old words erased and retyped in sharp
// near-black or dark-blue ink, in a family drawn from the whole catalogue (not matched), never concealed,
// fitted into the word's box; only pixels inside the mask change.
TEST(SynthOps, TextOverlayRetypesInSharpDarkInkOfAnyFamily) {
  int overlays = 0, other_family = 0;
  for (int seed = 0; seed < 24; ++seed) {
    Page page = rendered_page(seed % 2 ? LayoutKind::Letter : LayoutKind::Invoice, 500 + seed, "serif", 150);
    const Raster before = page.img;
    Raster mask;
    nlohmann::json rec;
    if (!apply_overlay_op(OpKind::Text, page, 700 + seed, &mask, &rec)) continue;
    const std::string what = "seed " + std::to_string(seed) + " " + rec.dump();
    ++overlays;
    EXPECT_TRUE(rec["font"]["fitted"].get<bool>()) << what;
    expect_changes_inside_mask(before, page.img, mask, what);
    expect_overlay_ink(page.img, rec, false, what);
    // The page is set in one serif family; the overlay's family is the editor's, drawn from all.
    other_family += rec["font"]["family"].get<std::string>() != page.words[0].style.family;
  }
  ASSERT_GE(overlays, 20);
  EXPECT_GE(other_family, overlays / 2);

  // Off (the default): the page's own style, as before the option existed.
  Page page = rendered_page(LayoutKind::Letter, 501, "serif", 150);
  EditConfig cfg;
  cfg.conceal_prob = 0;
  cfg.fonts = select_fonts({"all"});
  EditState st(page);
  Rng rng(701);
  nlohmann::json rec;
  ASSERT_TRUE(apply_op(OpKind::Text, st, cfg, rng, nullptr, &rec));
  EXPECT_EQ(rec["style"], "page");
  EXPECT_FALSE(rec["font"]["fitted"].get<bool>());
  EXPECT_EQ(rec["font"]["family"], page.words[0].style.family);
}
