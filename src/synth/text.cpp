#include "synth/text.h"

#include <pango/pangocairo.h>

#include <cmath>
#include <map>
#include <mutex>
#include <set>

#include "diffnet/common.h"

namespace diffnet::synth {

const char* font_class_name(FontClass c) {
  switch (c) {
    case FontClass::Serif: return "serif";
    case FontClass::Sans: return "sans";
    case FontClass::Mono: return "mono";
  }
  return "?";
}

const std::vector<FontFace>& font_catalogue() {
  static const std::vector<FontFace> fonts = {
      {"DejaVu Serif", FontClass::Serif},      {"Liberation Serif", FontClass::Serif},
      {"FreeSerif", FontClass::Serif},         {"Nimbus Roman", FontClass::Serif},
      {"C059", FontClass::Serif},              {"P052", FontClass::Serif},
      {"URW Bookman", FontClass::Serif},       {"DejaVu Sans", FontClass::Sans},
      {"Liberation Sans", FontClass::Sans},    {"FreeSans", FontClass::Sans},
      {"Nimbus Sans", FontClass::Sans},        {"URW Gothic", FontClass::Sans},
      {"Nimbus Sans Narrow", FontClass::Sans}, {"DejaVu Sans Mono", FontClass::Mono},
      {"Liberation Mono", FontClass::Mono},    {"Noto Mono", FontClass::Mono},
      {"FreeMono", FontClass::Mono},           {"Nimbus Mono PS", FontClass::Mono},
  };
  return fonts;
}

namespace {
const std::set<std::string>& installed_families() {
  static const std::set<std::string> fams = [] {
    std::set<std::string> s;
    PangoFontMap* map = pango_cairo_font_map_new();
    PangoFontFamily** families = nullptr;
    int n = 0;
    pango_font_map_list_families(map, &families, &n);
    for (int i = 0; i < n; ++i) s.insert(pango_font_family_get_name(families[i]));
    g_free(families);
    g_object_unref(map);
    return s;
  }();
  return fams;
}
}  // namespace

bool font_installed(const std::string& family) { return installed_families().count(family) > 0; }

std::vector<FontFace> select_fonts(const std::vector<std::string>& selection) {
  std::vector<FontFace> out;
  auto add = [&](const FontFace& f) {
    for (auto& o : out)
      if (o.family == f.family) return;
    out.push_back(f);
  };
  for (const auto& s0 : selection) {
    std::string s = s0;
    if (s == "all" || s == "serif" || s == "sans" || s == "mono") {
      for (auto& f : font_catalogue())
        if ((s == "all" || s == font_class_name(f.cls)) && font_installed(f.family)) add(f);
      continue;
    }
    bool found = false;
    for (auto& f : font_catalogue())
      if (f.family == s) {
        if (!font_installed(s)) throw Error("fonts", "font family '" + s + "' is not installed");
        add(f), found = true;
      }
    if (!found) {
      if (!font_installed(s)) throw Error("fonts", "unknown font family or class '" + s + "'");
      add({s, FontClass::Sans});  // an installed family outside the catalogue: class unknown, say sans
    }
  }
  if (out.empty()) throw Error("fonts", "no installed font matches the selection");
  return out;
}

std::recursive_mutex& text_mutex() {
  static std::recursive_mutex m;
  return m;
}

struct TextEngine::Impl {
  PangoFontMap* map = nullptr;
  PangoContext* ctx = nullptr;
  PangoLayout* layout = nullptr;
  std::map<std::string, PangoFontDescription*> descs;
  std::string cur_key;
  std::string cur_text;
  ~Impl() {
    std::lock_guard<std::recursive_mutex> lock(text_mutex());
    for (auto& kv : descs) pango_font_description_free(kv.second);
    if (layout) g_object_unref(layout);
    if (ctx) g_object_unref(ctx);
    if (map) g_object_unref(map);
  }
};

TextEngine::TextEngine() : impl_(new Impl) {
  std::lock_guard<std::recursive_mutex> lock(text_mutex());
  impl_->map = pango_cairo_font_map_new();
  impl_->ctx = pango_font_map_create_context(impl_->map);
  cairo_font_options_t* fo = cairo_font_options_create();
  cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
  cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
  cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
  pango_cairo_context_set_font_options(impl_->ctx, fo);
  cairo_font_options_destroy(fo);
  pango_cairo_context_set_resolution(impl_->ctx, 72.0);
#if PANGO_VERSION_CHECK(1, 44, 0)
  pango_context_set_round_glyph_positions(impl_->ctx, FALSE);
#endif
  impl_->layout = pango_layout_new(impl_->ctx);
}

TextEngine::~TextEngine() = default;

void TextEngine::set(const std::string& text, const FontSpec& font) {
  char key[256];
  std::snprintf(key, sizeof key, "%s|%d|%d|%.4f", font.family.c_str(), font.bold, font.italic, font.size_px);
  if (impl_->cur_key != key) {
    auto it = impl_->descs.find(key);
    PangoFontDescription* d;
    if (it == impl_->descs.end()) {
      d = pango_font_description_new();
      pango_font_description_set_family(d, font.family.c_str());
      pango_font_description_set_weight(d, font.bold ? PANGO_WEIGHT_BOLD : PANGO_WEIGHT_NORMAL);
      pango_font_description_set_style(d, font.italic ? PANGO_STYLE_ITALIC : PANGO_STYLE_NORMAL);
      pango_font_description_set_absolute_size(d, font.size_px * PANGO_SCALE);
      if (impl_->descs.size() > 512) {
        for (auto& kv : impl_->descs) pango_font_description_free(kv.second);
        impl_->descs.clear();
      }
      impl_->descs[key] = d;
    } else {
      d = it->second;
    }
    pango_layout_set_font_description(impl_->layout, d);
    impl_->cur_key = key;
    impl_->cur_text.clear();
    pango_layout_set_text(impl_->layout, "", 0);
  }
  if (impl_->cur_text != text) {
    pango_layout_set_text(impl_->layout, text.c_str(), static_cast<int>(text.size()));
    impl_->cur_text = text;
  }
}

TextExtents TextEngine::measure(const std::string& text, const FontSpec& font) {
  std::lock_guard<std::recursive_mutex> lock(text_mutex());
  set(text, font);
  PangoRectangle ink, logical;
  pango_layout_get_extents(impl_->layout, &ink, &logical);
  TextExtents e;
  const double s = 1.0 / PANGO_SCALE;
  e.ink_x = ink.x * s, e.ink_y = ink.y * s, e.ink_w = ink.width * s, e.ink_h = ink.height * s;
  e.advance = logical.width * s;
  e.height = logical.height * s;
  e.baseline = pango_layout_get_baseline(impl_->layout) * s;
  return e;
}

void TextEngine::draw(cairo_t* cr, const std::string& text, const FontSpec& font, double x, double baseline) {
  std::lock_guard<std::recursive_mutex> lock(text_mutex());
  set(text, font);
  double base = pango_layout_get_baseline(impl_->layout) / double(PANGO_SCALE);
  cairo_move_to(cr, x, baseline - base);
  pango_cairo_show_layout(cr, impl_->layout);
}

Raster TextEngine::render_alpha(const std::string& text, const FontSpec& font, double x, double baseline,
                                Box* origin) {
  std::lock_guard<std::recursive_mutex> lock(text_mutex());
  TextExtents e = measure(text, font);
  double top = baseline - e.baseline;
  int x0 = static_cast<int>(std::floor(x + e.ink_x)) - 2, y0 = static_cast<int>(std::floor(top + e.ink_y)) - 2;
  int x1 = static_cast<int>(std::ceil(x + e.ink_x + e.ink_w)) + 2,
      y1 = static_cast<int>(std::ceil(top + e.ink_y + e.ink_h)) + 2;
  int w = std::max(1, x1 - x0), h = std::max(1, y1 - y0);
  cairo_surface_t* surf = cairo_image_surface_create(CAIRO_FORMAT_A8, w, h);
  cairo_t* cr = cairo_create(surf);
  cairo_set_source_rgba(cr, 0, 0, 0, 1);
  draw(cr, text, font, x - x0, baseline - y0);
  cairo_destroy(cr);
  cairo_surface_flush(surf);
  Raster a(w, h, 1);
  const uint8_t* p = cairo_image_surface_get_data(surf);
  int stride = cairo_image_surface_get_stride(surf);
  for (int y = 0; y < h; ++y) std::copy(p + size_t(y) * stride, p + size_t(y) * stride + w, a.px(0, y));
  cairo_surface_destroy(surf);
  *origin = {x0, y0, x0 + w, y0 + h};
  return a;
}

TextEngine& text_engine() {
  thread_local TextEngine engine;
  return engine;
}

}  // namespace diffnet::synth
