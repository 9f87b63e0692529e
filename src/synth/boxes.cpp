#include "synth/boxes.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <sstream>

#include "diffnet/common.h"

namespace diffnet::synth {
namespace {

// Parses up to `max_ints` leading comma-separated non-negative integers; returns how many were read
// and the offset of the rest (after the comma following the last integer).
int leading_ints(const std::string& line, int max_ints, std::vector<long>& out, size_t* rest) {
  out.clear();
  size_t pos = 0;
  *rest = 0;
  while (static_cast<int>(out.size()) < max_ints) {
    size_t comma = line.find(',', pos);
    std::string field = line.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    // trim spaces
    size_t a = field.find_first_not_of(" \t"), b = field.find_last_not_of(" \t");
    if (a == std::string::npos) break;
    field = field.substr(a, b - a + 1);
    if (field.empty() || field.find_first_not_of("0123456789-") != std::string::npos) break;
    out.push_back(std::strtol(field.c_str(), nullptr, 10));
    if (comma == std::string::npos) {
      *rest = line.size();
      return static_cast<int>(out.size());
    }
    pos = comma + 1;
    *rest = pos;
  }
  return static_cast<int>(out.size());
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string cur;
  std::istringstream in(text);
  while (std::getline(in, cur)) {
    if (!cur.empty() && cur.back() == '\r') cur.pop_back();
    lines.push_back(cur);
  }
  return lines;
}

}  // namespace

std::vector<Word> parse_boxes(const std::string& text, const std::string& name, int width, int height) {
  auto lines = split_lines(text);
  bool diffnet_header = false;
  // Decide the format from the first content line unless the header forces ours.
  bool sroie = false;
  bool decided = false;
  std::vector<long> v;
  size_t rest = 0;
  for (auto& l : lines) {
    if (l.rfind("# diffnet-boxes", 0) == 0) diffnet_header = true;
    if (l.empty() || l[0] == '#' || decided) continue;
    if (!diffnet_header && leading_ints(l, 8, v, &rest) == 8) sroie = true;
    decided = true;
  }
  std::vector<Word> words;
  int lineno = 0;
  for (auto& l : lines) {
    ++lineno;
    if (l.find_first_not_of(" \t") == std::string::npos || l[0] == '#') continue;
    int need = sroie ? 8 : 4;
    int got = leading_ints(l, need, v, &rest);
    if (got < need)
      throw Error(name, "line " + std::to_string(lineno) + ": expected " + std::to_string(need) +
                            " integer coordinates" + (sroie ? " (SROIE format)" : " (left,top,right,bottom)"));
    Word w;
    if (sroie) {
      long xmin = std::min({v[0], v[2], v[4], v[6]}), xmax = std::max({v[0], v[2], v[4], v[6]});
      long ymin = std::min({v[1], v[3], v[5], v[7]}), ymax = std::max({v[1], v[3], v[5], v[7]});
      w.box = {int(xmin), int(ymin), int(xmax) + 1, int(ymax) + 1};
    } else {
      w.box = {int(v[0]), int(v[1]), int(v[2]), int(v[3])};
    }
    w.text = rest < l.size() ? l.substr(rest) : std::string();
    w.box = w.box.clip(width, height);
    if (w.box.empty()) continue;
    words.push_back(std::move(w));
  }
  return words;
}

std::vector<Word> read_box_file(const std::string& path, int width, int height) {
  auto bytes = read_file(path);
  return parse_boxes(std::string(bytes.begin(), bytes.end()), path, width, height);
}

std::string format_boxes(const std::vector<Word>& words) {
  std::ostringstream out;
  out << "# diffnet-boxes\n";
  for (auto& w : words) {
    out << w.box.x0 << ',' << w.box.y0 << ',' << w.box.x1 << ',' << w.box.y1;
    if (!w.text.empty()) out << ',' << w.text;
    out << '\n';
  }
  return out.str();
}

std::vector<Word> detect_words(const Raster& rgb, double gap_factor) {
  Raster g = luma(rgb);
  const int W = g.w, H = g.h;
  std::vector<Word> words;
  if (W < 8 || H < 8) return words;
  // Sauvola threshold from integral images of L and L^2.
  std::vector<double> S((size_t(W) + 1) * (H + 1), 0.0), S2(S.size(), 0.0);
  for (int y = 0; y < H; ++y) {
    double row = 0, row2 = 0;
    for (int x = 0; x < W; ++x) {
      double v = g.data[size_t(y) * W + x];
      row += v, row2 += v * v;
      S[size_t(y + 1) * (W + 1) + x + 1] = S[size_t(y) * (W + 1) + x + 1] + row;
      S2[size_t(y + 1) * (W + 1) + x + 1] = S2[size_t(y) * (W + 1) + x + 1] + row2;
    }
  }
  int r = std::max(7, std::max(W, H) / 80);
  std::vector<uint8_t> ink(size_t(W) * H, 0);
  for (int y = 0; y < H; ++y) {
    int ya = std::max(0, y - r), yb = std::min(H, y + r + 1);
    for (int x = 0; x < W; ++x) {
      int xa = std::max(0, x - r), xb = std::min(W, x + r + 1);
      double n = double(xb - xa) * (yb - ya);
      auto at = [&](const std::vector<double>& T, int yy, int xx) { return T[size_t(yy) * (W + 1) + xx]; };
      double s = at(S, yb, xb) - at(S, ya, xb) - at(S, yb, xa) + at(S, ya, xa);
      double s2 = at(S2, yb, xb) - at(S2, ya, xb) - at(S2, yb, xa) + at(S2, ya, xa);
      double m = s / n, sd = std::sqrt(std::max(0.0, s2 / n - m * m));
      double t = m * (1 + 0.3 * (sd / 128.0 - 1));
      double v = g.data[size_t(y) * W + x];
      ink[size_t(y) * W + x] = (v < t && v < 200 && sd > 6) ? 1 : 0;
    }
  }
  // 8-connected components by flood fill with an explicit stack.
  struct Comp {
    Box b;
    int64_t n = 0;
  };
  std::vector<Comp> comps;
  std::vector<int32_t> label(size_t(W) * H, -1);
  std::vector<int32_t> stack;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      size_t i = size_t(y) * W + x;
      if (!ink[i] || label[i] >= 0) continue;
      Comp c;
      c.b = {x, y, x + 1, y + 1};
      int id = static_cast<int>(comps.size());
      label[i] = id;
      stack.assign(1, static_cast<int32_t>(i));
      while (!stack.empty()) {
        int32_t p = stack.back();
        stack.pop_back();
        int px = p % W, py = p / W;
        c.n++;
        c.b = c.b.unite({px, py, px + 1, py + 1});
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) {
            int qx = px + dx, qy = py + dy;
            if (qx < 0 || qy < 0 || qx >= W || qy >= H) continue;
            size_t q = size_t(qy) * W + qx;
            if (ink[q] && label[q] < 0) {
              label[q] = id;
              stack.push_back(static_cast<int32_t>(q));
            }
          }
      }
      comps.push_back(c);
    }
  // Keep glyph-like components.
  int max_h = std::max(8, H / 12);
  std::vector<Comp> keep;
  for (auto& c : comps) {
    int cw = c.b.w(), ch = c.b.h();
    if (c.n < 3 || ch < 3 || ch > max_h || cw > W / 3) continue;
    if (cw > 12 * ch && ch < 6) continue;  // rules / underlines
    keep.push_back(c);
  }
  if (keep.empty()) return words;
  // Group: sort by x0, link components with vertical overlap >= 50 % of the smaller height and a
  // horizontal gap < 0.6 x the larger height (union-find).
  std::sort(keep.begin(), keep.end(), [](const Comp& a, const Comp& b) {
    return a.b.x0 != b.b.x0 ? a.b.x0 < b.b.x0 : a.b.y0 < b.b.y0;
  });
  std::vector<int> parent(keep.size());
  std::iota(parent.begin(), parent.end(), 0);
  std::function<int(int)> find = [&](int a) { return parent[a] == a ? a : parent[a] = find(parent[a]); };
  int tallest = 4;
  for (auto& c : keep) tallest = std::max(tallest, c.b.h());
  double max_gap_global = gap_factor * tallest + 1;
  for (size_t i = 0; i < keep.size(); ++i) {
    const Box& a = keep[i].b;
    for (size_t j = i + 1; j < keep.size(); ++j) {
      const Box& b = keep[j].b;
      if (b.x0 > a.x1 + max_gap_global) break;
      int ov = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
      int minh = std::min(a.h(), b.h()), maxh = std::max(a.h(), b.h());
      if (ov < 0.5 * minh) continue;
      if (maxh > 3 * minh && minh > 3) continue;
      int gap = b.x0 - a.x1;
      if (gap <= gap_factor * std::max(maxh, 4)) {
        int ra = find(static_cast<int>(i)), rb = find(static_cast<int>(j));
        if (ra != rb) parent[std::max(ra, rb)] = std::min(ra, rb);
      }
    }
  }
  std::vector<Box> groups(keep.size());
  std::vector<char> used(keep.size(), 0);
  for (size_t i = 0; i < keep.size(); ++i) {
    int r0 = find(static_cast<int>(i));
    groups[r0] = groups[r0].unite(keep[i].b);
    used[r0] = 1;
  }
  for (size_t i = 0; i < keep.size(); ++i) {
    if (!used[i]) continue;
    Box b = groups[i];
    if (b.h() < 5 || b.w() < 4) continue;
    Word w;
    w.box = b.expand(1).clip(W, H);
    words.push_back(w);
  }
  std::sort(words.begin(), words.end(), [](const Word& a, const Word& b) {
    return a.box.y0 != b.box.y0 ? a.box.y0 < b.box.y0 : a.box.x0 < b.box.x0;
  });
  return words;
}

}  // namespace diffnet::synth
