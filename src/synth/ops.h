// Tampering operations on a page, each with an exact mask rule (docs/synth.md, "Mask rules"):
//  copy-move, splice, erase, inpaint: mask = target box, expanded by kConcealMargin px when
//    concealment is applied (seam smoothing writes up to 2 px outside the box);
//  text (replacement): mask = (target box [+ margin]) united with the new text's coverage
//    (alpha > 0) dilated by one pixel (3x3);
//  insert (new text on a blank area): mask = coverage (alpha > 0) dilated by one pixel (3x3).
// No op writes a pixel outside its mask.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "synth/boxes.h"
#include "synth/rng.h"
#include "synth/text.h"

namespace diffnet::synth {

enum class OpKind { CopyMove = 0, Splice, Erase, Inpaint, Text, Insert };
constexpr int kNumOps = 6;
constexpr int kConcealMargin = 2;
const char* op_name(OpKind k);
OpKind parse_op(const std::string& name);  // throws Error for unknown names

// Relative op weights (0 = disabled).
using OpWeights = std::array<double, kNumOps>;
OpWeights default_op_weights();
// "copy-move,splice:2,text" -> listed ops enabled with their default weight or the given one,
// unlisted ops disabled; "all" = defaults. Throws Error on unknown names or bad weights.
OpWeights parse_op_weights(const std::string& spec);

// Number of edits of a page: 0 with probability pristine_prob, otherwise uniform in 1..max_edits.
int sample_edit_count(Rng& rng, double pristine_prob, int max_edits);
// An op drawn with probability proportional to its weight among those with allowed[i] true and
// weight > 0; returns -1 when none is left.
int sample_op(Rng& rng, const OpWeights& w, const std::array<bool, kNumOps>& allowed);

// A page being edited.
struct Page {
  Raster img;               // RGB
  std::vector<Word> words;  // word boxes of the page
  bool degraded = false;    // passed through print-scan or JPEG: style colours are no longer exact
};

struct EditConfig {
  double conceal_prob = 0.5;
  double insert_overlay_prob = 0;  // share of insertions typed as an overlay (insert_op)
  double overlay_letter_prob = 0;  // share of those overlays that are one capital letter (besides 1 in 6 anyway)
  double text_overlay_prob = 0;    // share of text replacements retyped as an overlay (text_op)
  std::vector<FontFace> fonts;  // families for text when the word's style is unknown, and for overlays
};

// Supplies a donor page for splicing, given the target word (may return nullptr: no donor).
using DonorFn = std::function<const Page*(const Word& target, Rng& rng)>;

// Edits applied so far and the union mask.
struct EditState {
  Page& page;
  Raster mask;                 // 1 channel, 0/255, page size
  std::vector<Box> taken;      // mask bounding boxes of earlier edits (no two edits overlap)
  explicit EditState(Page& p) : page(p), mask(p.img.w, p.img.h, 1, 0) {}
};

// Applies one op. Returns false (page untouched) when the page offers no valid target/source.
// On success appends the op's record (op, boxes, parameters, mask box) to `record`.
bool apply_op(OpKind op, EditState& st, const EditConfig& cfg, Rng& rng, const DonorFn& donor,
              nlohmann::json* record);

// Building blocks (exposed for tests).
// Copies src box (resized bilinearly to the target size when sizes differ) onto dst box.
void copy_box(Raster& img, const Box& src, const Box& dst);
// Replaces each pixel of the band straddling the box edge (box+2 minus box-2) by the 3x3 mean of
// the image before smoothing. Writes only inside box.expand(kConcealMargin).
void smooth_seam(Raster& img, const Box& box);
// Replaces the text of `w` by new_text in the matching font, size and colour: removes the old ink
// by inpainting, draws the new text at the word's origin/baseline (or fitted to the box when its
// style is unknown). Returns the new text's coverage raster and its page position in *where.
Raster replace_text(Raster& img, const Word& w, const std::string& new_text, const FontSpec& font,
                    const Color& color, bool fitted, double alpha_blur, Box* where);
// Composites colour over img with coverage alpha (0..255) placed at where.x0/y0.
void composite(Raster& img, const Raster& alpha, const Box& where, const Color& color);
// ORs into mask (0/255) the coverage's non-zero pixels dilated by one pixel (3x3).
void add_dilated_coverage(Raster& mask, const Raster& alpha, const Box& where);

}  // namespace diffnet::synth
