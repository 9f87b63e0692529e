// Connected components against a hand-drawn mask, 8-bit quantisation, overlay pixels, window planning
// and max-merge.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "diffnet/common.h"
#include "diffnet/predict.h"
#include "diffnet/regions.h"
#include "testing.h"

using namespace diffnet;

namespace {
// '#' = 0.6, '@' = 0.95, 'o' = exactly the threshold 0.5 (not above it), '.' = 0.1.
at::Tensor draw(const std::vector<std::string>& rows) {
  at::Tensor t = at::zeros({int64_t(rows.size()), int64_t(rows[0].size())}, at::kFloat);
  for (size_t y = 0; y < rows.size(); ++y)
    for (size_t x = 0; x < rows[y].size(); ++x) {
      char c = rows[y][x];
      t[int64_t(y)][int64_t(x)] = c == '#' ? 0.6f : c == '@' ? 0.95f : c == 'o' ? 0.5f : 0.1f;
    }
  return t;
}
}  // namespace

// find_regions with a gap against a direct O(n^2) union of hot pixels at most gap + 1 apart (Chebyshev),
// on random sparse maps: the same regions (box, area, peak, mean).
TEST(EvalRegions, GapJoinsHotPixelsAtMostGapPlusOneApart) {
  at::manual_seed(7);
  for (int64_t gap : {0, 1, 2, 3, 8}) {
    for (int trial = 0; trial < 4; ++trial) {
      const int64_t H = 23 + trial * 5, W = 31 + trial * 3;
      at::Tensor p = at::rand({H, W}, at::kDouble);
      p = at::where(at::rand({H, W}, at::kDouble) < 0.06, p * 0.5 + 0.5, p * 0.4).to(at::kFloat);
      const float* pp = p.data_ptr<float>();
      std::vector<int64_t> hot;
      for (int64_t i = 0; i < H * W; ++i)
        if (pp[i] > 0.5f) hot.push_back(i);
      std::vector<size_t> parent(hot.size());
      for (size_t i = 0; i < hot.size(); ++i) parent[i] = i;
      std::function<size_t(size_t)> root = [&](size_t i) { return parent[i] == i ? i : parent[i] = root(parent[i]); };
      for (size_t i = 0; i < hot.size(); ++i)
        for (size_t j = i + 1; j < hot.size(); ++j) {
          const int64_t dy = std::abs(hot[i] / W - hot[j] / W), dx = std::abs(hot[i] % W - hot[j] % W);
          if (std::max(dy, dx) <= gap + 1) parent[root(i)] = root(j);
        }
      struct Want {
        int64_t x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1, area = 0;
        double sum = 0, peak = 0;
      };
      std::map<size_t, Want> groups;
      for (size_t i = 0; i < hot.size(); ++i) {
        Want& g = groups[root(i)];
        const int64_t y = hot[i] / W, x = hot[i] % W;
        g.x0 = std::min(g.x0, x), g.x1 = std::max(g.x1, x), g.y0 = std::min(g.y0, y), g.y1 = std::max(g.y1, y);
        ++g.area, g.sum += pp[hot[i]], g.peak = std::max(g.peak, double(pp[hot[i]]));
      }
      std::vector<Region> got = find_regions(p, 0.5, 2, gap);
      size_t kept = 0;
      for (const auto& [r, g] : groups) {
        if (g.area < 2) continue;
        ++kept;
        auto it = std::find_if(got.begin(), got.end(), [&](const Region& q) { return q.x == g.x0 && q.y == g.y0 && q.area == g.area; });
        ASSERT_NE(it, got.end()) << "gap " << gap << " trial " << trial << ": region at " << g.x0 << "," << g.y0;
        EXPECT_EQ(it->w, g.x1 - g.x0 + 1);
        EXPECT_EQ(it->h, g.y1 - g.y0 + 1);
        EXPECT_NEAR(it->peak, g.peak, 1e-6);
        EXPECT_NEAR(it->mean, g.sum / double(g.area), 1e-6);
      }
      EXPECT_EQ(got.size(), kept) << "gap " << gap << " trial " << trial;
      if (gap == 8) {
        EXPECT_LT(got.size(), find_regions(p, 0.5, 2, 0).size()) << "the gap must join something here";
      }
    }
  }
  // Two words of a line 6 px apart are one region with gap 8, two with gap 4; a third 12 px further stays apart.
  at::Tensor line = at::zeros({10, 60}, at::kFloat);
  line.slice(0, 3, 7).slice(1, 2, 12).fill_(0.7f);
  line.slice(0, 3, 7).slice(1, 18, 28).fill_(0.9f);
  line.slice(0, 3, 7).slice(1, 40, 50).fill_(0.6f);
  std::vector<Region> joined = find_regions(line, 0.5, 1, 8);
  ASSERT_EQ(joined.size(), 2u);
  EXPECT_EQ(joined[0].x, 2); EXPECT_EQ(joined[0].w, 26); EXPECT_EQ(joined[0].area, 80);
  EXPECT_NEAR(joined[0].mean, 0.8, 1e-6);
  EXPECT_NEAR(joined[0].peak, 0.9, 1e-6);
  EXPECT_EQ(find_regions(line, 0.5, 1, 4).size(), 3u);
  EXPECT_THROW(find_regions(line, 0.5, 1, -1), Error);
}

TEST(EvalRegions, ComponentsOfAHandDrawnMask) {
  at::Tensor p = draw({
      "............",  // 0
      ".##.........",  // 1   A: 2x2 square at (1,1)
      ".#@......#..",  // 2   B: a diagonal chain (2,9) (3,8) (3,9) (4,7)
      "........##..",  // 3
      ".......#....",  // 4
      "..........o.",  // 5   at the threshold: not a region
      "###.........",  // 6   C: L-shape 4 pixels
      "#...........",  // 7
      "......####..",  // 8   D: 2x4 block, 8 pixels
      "......####.#",  // 9   E: single pixel (dropped with min_area 2)
  });
  std::vector<Region> r = find_regions(p, 0.5, 2);
  ASSERT_EQ(r.size(), 4u);
  // Sorted by area: D 8, then A/B/C with area 4 ordered by y.
  EXPECT_EQ(r[0].x, 6); EXPECT_EQ(r[0].y, 8); EXPECT_EQ(r[0].w, 4); EXPECT_EQ(r[0].h, 2); EXPECT_EQ(r[0].area, 8);
  EXPECT_EQ(r[1].x, 1); EXPECT_EQ(r[1].y, 1); EXPECT_EQ(r[1].w, 2); EXPECT_EQ(r[1].h, 2); EXPECT_EQ(r[1].area, 4);
  EXPECT_NEAR(r[1].peak, 0.95, 1e-6);
  EXPECT_NEAR(r[1].mean, (3 * 0.6 + 0.95) / 4, 1e-6);
  EXPECT_EQ(r[2].x, 7); EXPECT_EQ(r[2].y, 2); EXPECT_EQ(r[2].w, 3); EXPECT_EQ(r[2].h, 3); EXPECT_EQ(r[2].area, 4);
  EXPECT_NEAR(r[2].peak, 0.6, 1e-6);
  EXPECT_EQ(r[3].x, 0); EXPECT_EQ(r[3].y, 6); EXPECT_EQ(r[3].w, 3); EXPECT_EQ(r[3].h, 2); EXPECT_EQ(r[3].area, 4);
  // min_area 1 keeps the single pixel, min_area 5 keeps only D.
  EXPECT_EQ(find_regions(p, 0.5, 1).size(), 5u);
  EXPECT_EQ(find_regions(p, 0.5, 5).size(), 1u);
  // A higher threshold keeps the 0.95 pixel only.
  std::vector<Region> hi = find_regions(p, 0.9, 1);
  ASSERT_EQ(hi.size(), 1u);
  EXPECT_EQ(hi[0].x, 2);
  EXPECT_EQ(hi[0].y, 2);
  nlohmann::json j = region_to_json(r[0]);
  EXPECT_EQ(j["bbox"], nlohmann::json({6, 8, 4, 2}));
  EXPECT_EQ(j["area"], 8);
}

TEST(EvalRegions, ProbToU8RoundsHalfUp) {
  at::Tensor p = at::tensor({0.0f, 0.5f / 255, 127.5f / 255, 0.5f, 1.0f, 1.5f, -0.2f});
  at::Tensor u = prob_to_u8(p);
  std::vector<int> want = {0, 1, 128, 128, 255, 255, 0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(u[int64_t(i)].item<int>(), want[i]) << i;
}

TEST(EvalRegions, OverlayColours) {
  const int64_t H = 40, W = 50;
  at::Tensor rgb = at::full({H, W, 3}, 200, at::kByte);
  at::Tensor prob = at::zeros({H, W}, at::kFloat);
  prob.slice(0, 10, 20).slice(1, 10, 30).fill_(1.0f);
  Region r;
  r.x = 10, r.y = 10, r.w = 20, r.h = 10, r.area = 200, r.peak = 1;
  at::Tensor o = render_overlay(rgb, prob, {r});
  ASSERT_EQ(o.sizes(), (std::vector<int64_t>{H, W, 3}));
  ASSERT_EQ(o.scalar_type(), at::kByte);
  // p = 0 (below the floor 0.5): the input, unchanged.
  for (int c = 0; c < 3; ++c) EXPECT_EQ(o[0][0][c].item<int>(), 200);
  // p = 1: opacity 0.8 of red (225, 0, 0): 0.2 * 200 + 0.8 * (225, 0, 0) = (220, 40, 40).
  EXPECT_EQ(o[15][20][0].item<int>(), 220);
  EXPECT_EQ(o[15][20][1].item<int>(), 40);
  EXPECT_EQ(o[15][20][2].item<int>(), 40);
  // The rectangle is drawn just outside the box (thickness 2): blue.
  EXPECT_EQ(o[9][20][0].item<int>(), 0);
  EXPECT_EQ(o[9][20][2].item<int>(), 255);
  EXPECT_EQ(o[15][30][2].item<int>(), 255);
  EXPECT_EQ(o[15][31][2].item<int>(), 255);
  EXPECT_EQ(o[15][32][2].item<int>(), 200);
  // The peak label "1.00" sits in a blue tab below the box (no room above it), from y = 22 (the
  // rectangle's outer edge): white glyph pixels.
  int64_t white = 0;
  for (int64_t y = 22; y < 32; ++y)
    for (int64_t x = 8; x < 34; ++x) white += o[y][x][0].item<int>() == 255 && o[y][x][2].item<int>() == 255;
  EXPECT_GT(white, 10);
}

// Labels never cover each other: a label whose place above the box is taken goes below it; a region
// with both places taken keeps its box and no label.
TEST(EvalRegions, OverlayLabelsDoNotOverlap) {
  const int64_t H = 80, W = 120;
  at::Tensor rgb = at::full({H, W, 3}, 200, at::kByte);
  at::Tensor prob = at::zeros({H, W}, at::kFloat);
  auto region = [](int64_t x, int64_t y) {
    Region r;
    r.x = x, r.y = y, r.w = 6, r.h = 5, r.area = 30, r.peak = 0.75;
    return r;
  };
  const Region a = region(20, 30), b = region(32, 30), c = region(36, 30);  // tabs ("0.75") wider than 12 px
  auto white_in = [](const at::Tensor& o, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
    return ((o.slice(0, y0, y1).slice(1, x0, x1) == 255).all(2)).sum().item<int64_t>();
  };
  OverlayOptions opt;
  opt.legend = false;
  at::Tensor one = render_overlay(rgb, prob, {a}, opt);
  at::Tensor two = render_overlay(rgb, prob, {a, b}, opt);
  at::Tensor three = render_overlay(rgb, prob, {a, b, c}, opt);
  // A's label above its box; B's place above overlaps it, so B's label is below B's box.
  const int64_t label = white_in(one, 0, a.y, 0, W);
  EXPECT_GT(label, 10);
  EXPECT_EQ(white_in(two, 0, a.y, 0, W), label) << "nothing drawn over A's label";
  EXPECT_EQ(white_in(one, a.y + a.h, H, 0, W), 0);
  EXPECT_GT(white_in(two, b.y + b.h, H, b.x - 4, W), 10);
  EXPECT_EQ(white_in(two, b.y + b.h, H, b.x - 4, W), label) << "the same label, moved";
  // C: above taken by A's label, below by B's: no label at all.
  EXPECT_EQ(white_in(three, 0, H, 0, W), 2 * label);
}

TEST(EvalRegions, OverlayDrawsNothingBelowTheFloor) {
  const int64_t H = 300, W = 400;
  at::Generator gen = at::detail::createCPUGenerator(5);
  at::Tensor rgb = at::randint(0, 256, {H, W, 3}, gen, at::TensorOptions().dtype(at::kByte));
  at::Tensor prob = at::rand({H, W}, gen);
  for (double floor : {0.3, 0.5, 0.8}) {
    OverlayOptions opt;
    opt.floor = floor;
    at::Tensor o = render_overlay(rgb, prob, {}, opt);
    // The legend sits on a strip below the page (one 34-row box plus 2 rows above and below at scale 1),
    // so the page part is the whole page: nothing of the document is covered.
    const int64_t strip = overlay_legend_strip(H, W);
    ASSERT_EQ(strip, 38) << "a 400 x 300 page has room for the legend";
    ASSERT_EQ(o.sizes(), (std::vector<int64_t>{H + strip, W, 3}));
    const Rect L = overlay_legend_rect(H, W);
    EXPECT_GE(L.y0, H);
    EXPECT_LE(L.y1, H + strip);
    EXPECT_GE(L.x0, 0);
    EXPECT_LE(L.x1, W);
    at::Tensor page = o.slice(0, 0, H);
    at::Tensor same = (page == rgb).all(2);
    // Below the floor: every byte equals the input; at or above it: (almost) every pixel is coloured.
    EXPECT_TRUE(same.masked_select(prob < float(floor)).all().item<bool>()) << "floor " << floor;
    EXPECT_LT(same.masked_select(prob >= float(floor)).to(at::kFloat).mean().item<double>(), 0.02) << "floor " << floor;
    // The legend is drawn (white background with dark text) inside its rectangle; the strip's first row is
    // the grey rule that separates it from the page.
    at::Tensor leg = o.slice(0, L.y0, L.y1).slice(1, L.x0, L.x1);
    EXPECT_GT((leg == 255).all(2).sum().item<int64_t>(), 100);
    EXPECT_GT((leg == 0).all(2).sum().item<int64_t>(), 20);
    EXPECT_TRUE((o[H] == 160).all().item<bool>());
  }
  OverlayOptions bare;
  bare.legend = false;
  at::Tensor o = render_overlay(rgb, prob, {}, bare);
  ASSERT_EQ(o.sizes(), rgb.sizes());
  EXPECT_TRUE((o == rgb).all(2).masked_select(prob < 0.5f).all().item<bool>());
  // A page narrower than the legend gets none, and no strip.
  at::Tensor narrow = rgb.slice(1, 0, 150).contiguous();
  EXPECT_EQ(overlay_legend_strip(H, 150), 0);
  EXPECT_EQ(render_overlay(narrow, prob.slice(1, 0, 150), {}, {}).sizes(), narrow.sizes());
}

TEST(EvalRegions, OverlayColoursAgainstAFloat64Loop) {
  // A tall image (the wash is computed a band of rows at a time): every pixel against the formula.
  const int64_t H = 700, W = 90;
  at::Generator gen = at::detail::createCPUGenerator(8);
  at::Tensor rgb = at::randint(0, 256, {H, W, 3}, gen, at::TensorOptions().dtype(at::kByte));
  at::Tensor prob = at::rand({H, W}, gen);
  OverlayOptions opt;
  opt.legend = false;
  opt.floor = 0.4;
  at::Tensor o = render_overlay(rgb, prob, {}, opt);
  auto a = rgb.accessor<uint8_t, 3>();
  auto po = prob.accessor<float, 2>();
  auto oa = o.accessor<uint8_t, 3>();
  int64_t off_by_one = 0;
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      const double p = po[y][x];
      const double t = std::clamp((p - 0.4) / 0.6, 0.0, 1.0), al = 0.35 + 0.45 * t;
      const double heat[3] = {255 - 30 * t, 190 * (1 - t), 0};
      for (int k = 0; k < 3; ++k) {
        const double want = p >= 0.4 ? std::floor(a[y][x][k] * (1 - al) + heat[k] * al + 0.5) : a[y][x][k];
        const double d = std::abs(double(oa[y][x][k]) - want);
        ASSERT_LE(d, 1.0) << y << "," << x << "," << k;  // float vs double at a .5 rounding edge
        off_by_one += d > 0;
      }
    }
  EXPECT_LT(off_by_one, H * W * 3 / 1000);
}

TEST(EvalWindows, PaddedExtentAndOrigins) {
  EXPECT_EQ(padded_extent(1754, 512), 1760);
  EXPECT_EQ(padded_extent(100, 512), 512);
  EXPECT_EQ(padded_extent(512, 512), 512);
  EXPECT_EQ(padded_extent(513, 512), 520);
  EXPECT_EQ(window_origins(512, 512, 512), (std::vector<int64_t>{0}));
  EXPECT_EQ(window_origins(520, 512, 512), (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(window_origins(1248, 512, 512), (std::vector<int64_t>{0, 512, 736}));
  EXPECT_EQ(window_origins(1024, 512, 256), (std::vector<int64_t>{0, 256, 512}));
  EXPECT_EQ(window_origins(1760, 512, 512), (std::vector<int64_t>{0, 512, 1024, 1248}));
  EXPECT_THROW(window_origins(1024, 500, 500), Error);  // not a multiple of 32
  EXPECT_THROW(window_origins(1024, 512, 12), Error);   // stride not a multiple of 8
  EXPECT_THROW(window_origins(1024, 512, 520), Error);  // stride > window (gaps)
}

TEST(EvalWindows, PlansCoverEveryPixelOnThe8Grid) {
  for (int64_t R : {32, 64, 96}) {
    for (int64_t S : {R, R / 2, int64_t(24)}) {
      for (int64_t H : {1, 7, 31, 32, 33, 100, 257}) {
        for (int64_t W : {5, 64, 130}) {
          std::vector<WindowPos> plan = plan_windows(H, W, R, S);
          const int64_t Hp = padded_extent(H, R), Wp = padded_extent(W, R);
          EXPECT_EQ(Hp % 8, 0);
          EXPECT_GE(Hp, std::max(H, R));
          at::Tensor cover = at::zeros({Hp, Wp}, at::kInt);
          int64_t max_y = 0, max_x = 0;
          for (const WindowPos& w : plan) {
            EXPECT_EQ(w.y % 8, 0);
            EXPECT_EQ(w.x % 8, 0);
            EXPECT_LE(w.y + R, Hp);
            EXPECT_LE(w.x + R, Wp);
            max_y = std::max(max_y, w.y), max_x = std::max(max_x, w.x);
            cover.slice(0, w.y, w.y + R).slice(1, w.x, w.x + R).add_(1);
          }
          EXPECT_EQ(max_y + R, Hp) << "last window ends at the border";
          EXPECT_EQ(max_x + R, Wp);
          EXPECT_GT(cover.min().item<int>(), 0) << "R " << R << " S " << S << " H " << H << " W " << W;
        }
      }
    }
  }
}

TEST(EvalWindows, MaxMerge) {
  at::Tensor canvas = at::zeros({16, 16}, at::kFloat);
  at::Tensor a = at::full({8, 8}, 0.3f);
  at::Tensor b = at::full({8, 8}, 0.7f);
  b[0][0] = 0.1f;  // at (4, 4): below a's 0.3 there
  max_merge(canvas, a, {0, 0});
  max_merge(canvas, b, {4, 4});
  EXPECT_FLOAT_EQ(canvas[0][0].item<float>(), 0.3f);
  EXPECT_FLOAT_EQ(canvas[4][4].item<float>(), 0.3f);
  EXPECT_FLOAT_EQ(canvas[5][5].item<float>(), 0.7f);
  EXPECT_FLOAT_EQ(canvas[11][11].item<float>(), 0.7f);
  EXPECT_FLOAT_EQ(canvas[12][12].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(canvas[2][10].item<float>(), 0.0f);
  EXPECT_THROW(max_merge(canvas, a, {12, 0}), Error);
}
