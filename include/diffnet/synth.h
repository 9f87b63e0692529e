// Synthetic tampered-document generator (`diffnet synth`, docs/synth.md): pristine pages are
// rendered (Cairo/Pango layouts) or read from the user's folders, edited with copy-move, splice,
// erase, inpainting, text replacement and text insertion, and written as images/, masks/,
// optional pristine/ and manifest.jsonl. Same options and seed -> byte-identical output.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace diffnet {

struct SynthOptions {
  std::vector<std::string> sources;  // folders of document images (+ box files); empty = render
  std::string out;                   // output folder
  int64_t count = 0;                 // samples to write
  uint64_t seed = 0;
  int64_t first_index = 0;           // sample indices first_index .. first_index+count-1 (sharding)
  std::string ops = "all";           // "copy-move,splice:2,..." (see parse_op_weights)
  std::vector<std::string> layouts;  // receipt, invoice, payslip, statement, form, letter (empty = all)
  std::vector<std::string> fonts;    // serif, sans, mono, all or family names (empty = all)
  int dpi_min = 150, dpi_max = 300;  // rendering resolution range
  std::string output_format = "mixed";  // png | jpeg | mixed
  double jpeg_fraction = 0.5;        // share of JPEG outputs when mixed
  double q1_prob = 0.8;              // probability of a JPEG round trip before editing
  int q1_min = 70, q1_max = 100;     // its quality range
  int q2_min = 70, q2_max = 100;     // output JPEG quality range
  bool keep_pristine = false;        // also write pristine/ (the page right before editing, PNG)
  double pristine_prob = 0.2;        // probability of 0 edits
  int max_edits = 5;                 // otherwise 1..max_edits edits
  double conceal_prob = 0.5;         // per edit: seam smoothing / noise / colour matching
  double insert_overlay_prob = 0;    // share of `insert` edits typed as an editor's overlay (docs/synth.md)
  double overlay_letter_prob = 0;    // share of those overlays typed as one capital letter (on top of 1 in 6)
  double text_overlay_prob = 0;      // share of `text` edits retyped as an editor's overlay (docs/synth.md)
  double print_scan_prob = 0.5;      // rendered pages: print-scan look
  // Rendered pages: share whose print-scan look (without rotation) comes after the edits instead of
  // before, with no first compression, so edits carry the page's blur, noise and fade (docs/synth.md).
  double degrade_after_edit_prob = 0;
  int max_side = 0;                  // > 0: pages scaled down so that their longer side <= max_side
  int crop = 0;                      // > 0: crop pages to crop x crop (offsets multiples of 8)
  double rendered_fraction = 0;      // with sources: share of rendered pages mixed in
  bool quiet = false;                // no progress line
};

struct SynthSummary {
  int64_t written = 0, tampered = 0, pristine = 0, failed = 0;
  std::map<std::string, int64_t> op_counts;                  // applied edits per op
  std::vector<std::pair<std::string, std::string>> skipped;  // bad sources: (path, reason)
  double seconds = 0;
  std::map<std::string, double> stage_seconds;  // summed over threads: source, degrade, edit, write
};

// Generates opt.count samples into opt.out. Bad sources are skipped with a warning (listed in the
// summary); throws Error for bad options, an unwritable output or when no source is usable.
SynthSummary run_synth(const SynthOptions& opt);

}  // namespace diffnet
