#include "synth/inpaint.h"

#include <cmath>

namespace diffnet::synth {
namespace {

struct Level {
  int w = 0, h = 0;
  std::vector<float> v[3];
  std::vector<uint8_t> known;
};

void sor(Level& L, int iters) {
  const int w = L.w, h = L.h;
  const float omega = 1.7f;
  for (int it = 0; it < iters; ++it) {
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        size_t i = size_t(y) * w + x;
        if (L.known[i]) continue;
        int n = 0;
        float s[3] = {0, 0, 0};
        auto add = [&](size_t j) {
          for (int k = 0; k < 3; ++k) s[k] += L.v[k][j];
          ++n;
        };
        if (x > 0) add(i - 1);
        if (x + 1 < w) add(i + 1);
        if (y > 0) add(i - w);
        if (y + 1 < h) add(i + w);
        if (n == 0) continue;
        for (int k = 0; k < 3; ++k) L.v[k][i] += omega * (s[k] / n - L.v[k][i]);
      }
  }
}

void solve(Level& L) {
  const int w = L.w, h = L.h;
  bool any_known = false, any_unknown = false;
  for (auto k : L.known) any_known |= k != 0, any_unknown |= k == 0;
  if (!any_unknown) return;
  if (!any_known) {
    for (int k = 0; k < 3; ++k)
      for (size_t i = 0; i < L.known.size(); ++i) L.v[k][i] = 128.f;
    return;
  }
  if (w <= 3 || h <= 3) {
    // Tiny level: start from the mean of the known pixels and relax to convergence.
    double s[3] = {0, 0, 0};
    int n = 0;
    for (size_t i = 0; i < L.known.size(); ++i)
      if (L.known[i]) {
        for (int k = 0; k < 3; ++k) s[k] += L.v[k][i];
        ++n;
      }
    for (size_t i = 0; i < L.known.size(); ++i)
      if (!L.known[i])
        for (int k = 0; k < 3; ++k) L.v[k][i] = static_cast<float>(s[k] / n);
    sor(L, 4 * (w + h) + 20);
    return;
  }
  // Coarse level: 2x2 blocks, value = mean of the known fine pixels, known when any is known.
  Level C;
  C.w = (w + 1) / 2, C.h = (h + 1) / 2;
  for (auto& p : C.v) p.assign(size_t(C.w) * C.h, 0.f);
  C.known.assign(size_t(C.w) * C.h, 0);
  for (int y = 0; y < C.h; ++y)
    for (int x = 0; x < C.w; ++x) {
      float s[3] = {0, 0, 0};
      int n = 0;
      for (int dy = 0; dy < 2; ++dy)
        for (int dx = 0; dx < 2; ++dx) {
          int fx = 2 * x + dx, fy = 2 * y + dy;
          if (fx >= w || fy >= h) continue;
          size_t i = size_t(fy) * w + fx;
          if (!L.known[i]) continue;
          for (int k = 0; k < 3; ++k) s[k] += L.v[k][i];
          ++n;
        }
      size_t j = size_t(y) * C.w + x;
      if (n > 0) {
        C.known[j] = 1;
        for (int k = 0; k < 3; ++k) C.v[k][j] = s[k] / n;
      }
    }
  solve(C);
  // Initialise the fine unknowns bilinearly from the coarse solution, then relax.
  for (int y = 0; y < h; ++y) {
    float cy = std::min(std::max((y + 0.5f) / 2 - 0.5f, 0.f), float(C.h - 1));
    int y0 = static_cast<int>(cy), y1 = std::min(y0 + 1, C.h - 1);
    float fy = cy - y0;
    for (int x = 0; x < w; ++x) {
      size_t i = size_t(y) * w + x;
      if (L.known[i]) continue;
      float cx = std::min(std::max((x + 0.5f) / 2 - 0.5f, 0.f), float(C.w - 1));
      int x0 = static_cast<int>(cx), x1 = std::min(x0 + 1, C.w - 1);
      float fx = cx - x0;
      for (int k = 0; k < 3; ++k) {
        const auto& c = C.v[k];
        float top = c[size_t(y0) * C.w + x0] * (1 - fx) + c[size_t(y0) * C.w + x1] * fx;
        float bot = c[size_t(y1) * C.w + x0] * (1 - fx) + c[size_t(y1) * C.w + x1] * fx;
        L.v[k][i] = top * (1 - fy) + bot * fy;
      }
    }
  }
  sor(L, 40);
}

}  // namespace

void inpaint_diffusion(Raster& img, const Box& region0, const std::vector<uint8_t>& unknown) {
  Box region = region0.clip(img.w, img.h);
  if (region.empty()) return;
  Box win = region0.expand(2).clip(img.w, img.h);
  Level L;
  L.w = win.w(), L.h = win.h();
  for (auto& p : L.v) p.assign(size_t(L.w) * L.h, 0.f);
  L.known.assign(size_t(L.w) * L.h, 1);
  const int rw = region0.w();
  for (int y = win.y0; y < win.y1; ++y)
    for (int x = win.x0; x < win.x1; ++x) {
      size_t i = size_t(y - win.y0) * L.w + (x - win.x0);
      const uint8_t* p = img.px(x, y);
      for (int k = 0; k < 3; ++k) L.v[k][i] = p[img.c == 3 ? k : 0];
      if (x >= region0.x0 && x < region0.x1 && y >= region0.y0 && y < region0.y1 &&
          unknown[size_t(y - region0.y0) * rw + (x - region0.x0)])
        L.known[i] = 0;
    }
  solve(L);
  for (int y = win.y0; y < win.y1; ++y)
    for (int x = win.x0; x < win.x1; ++x) {
      size_t i = size_t(y - win.y0) * L.w + (x - win.x0);
      if (L.known[i]) continue;
      uint8_t* p = img.px(x, y);
      for (int k = 0; k < img.c; ++k) p[k] = to_u8(L.v[k][i]);
    }
}

}  // namespace diffnet::synth
