// `diffnet synth`: writes synthetic tampered documents (images/, masks/, pristine/, manifest.jsonl).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands.h"
#include "diffnet/common.h"
#include "diffnet/synth.h"

namespace diffnet::cli {
namespace {

// "150-300" or "200" -> (lo, hi).
void parse_range(const std::string& s, const char* name, int* lo, int* hi) {
  size_t dash = s.find('-');
  char* end = nullptr;
  try {
    if (dash == std::string::npos) {
      *lo = *hi = std::stoi(s);
    } else {
      *lo = std::stoi(s.substr(0, dash));
      *hi = std::stoi(s.substr(dash + 1));
    }
  } catch (const std::exception&) {
    throw Error(name, "expected N or MIN-MAX, got '" + s + "'");
  }
  (void)end;
}

struct SynthArgs {
  SynthOptions opt;
  std::string dpi = "150-300", q1 = "70-100", q2 = "70-100", layouts, fonts;
  bool bench = false;
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t c = s.find(',', pos);
    std::string item = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    if (!item.empty()) out.push_back(item);
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return out;
}

void run(SynthArgs& a) {
  parse_range(a.dpi, "--dpi", &a.opt.dpi_min, &a.opt.dpi_max);
  parse_range(a.q1, "--q1", &a.opt.q1_min, &a.opt.q1_max);
  parse_range(a.q2, "--q2", &a.opt.q2_min, &a.opt.q2_max);
  a.opt.layouts = split_list(a.layouts);
  a.opt.fonts = split_list(a.fonts);
  SynthSummary s = run_synth(a.opt);
  std::printf("synth: %lld samples (%lld tampered, %lld pristine) in %s: %.2f pages/s -> %s\n",
              static_cast<long long>(s.written), static_cast<long long>(s.tampered),
              static_cast<long long>(s.pristine), format_duration(s.seconds).c_str(),
              s.seconds > 0 ? s.written / s.seconds : 0.0, a.opt.out.c_str());
  std::string ops;
  for (auto& kv : s.op_counts) ops += " " + kv.first + "=" + std::to_string(kv.second);
  std::printf("edits:%s\n", ops.empty() ? " none" : ops.c_str());
  if (s.failed) std::printf("failed samples: %lld\n", static_cast<long long>(s.failed));
  std::printf("skipped sources: %zu\n", s.skipped.size());
  for (auto& kv : s.skipped) std::printf("  %s\n", kv.second.c_str());
  if (a.bench) {
    double total = 0;
    for (auto& kv : s.stage_seconds) total += kv.second;
    std::printf("bench: %.3f pages/s over %lld pages (%.1f s wall);", s.seconds > 0 ? s.written / s.seconds : 0.0,
                static_cast<long long>(s.written), s.seconds);
    for (auto& kv : s.stage_seconds)
      std::printf(" %s %.1f ms/page", kv.first.c_str(), s.written ? 1000.0 * kv.second / s.written : 0.0);
    std::printf(" (thread time)\n");
  }
}

}  // namespace

void add_synth_command(CLI::App& app) {
  auto args = std::make_shared<SynthArgs>();
  auto* c = app.add_subcommand("synth", "Generate synthetic tampered documents (images/, masks/, manifest.jsonl)");
  auto& o = args->opt;
  c->add_option("--sources", o.sources, "Folders of pristine document images (+ box files); default: render documents");
  c->add_option("--out", o.out, "Output folder")->required();
  c->add_option("--count", o.count, "Number of samples")->required();
  c->add_option("--seed", o.seed, "Random seed (same seed and inputs -> identical output)");
  c->add_option("--first-index", o.first_index, "Index of the first sample (to generate shards)");
  c->add_option("--ops", o.ops, "Ops with optional weights: copy-move,splice,erase,inpaint,text,insert[:w] or all");
  c->add_option("--layouts", args->layouts, "Rendered layouts: receipt,invoice,payslip,statement,form,letter (default all)");
  c->add_option("--fonts", args->fonts, "Font classes or families: serif,sans,mono,all or names (default all)");
  c->add_option("--dpi", args->dpi, "Rendering dpi, N or MIN-MAX (default 150-300)");
  c->add_option("--output-format", o.output_format, "png, jpeg or mixed (default mixed)");
  c->add_option("--jpeg-fraction", o.jpeg_fraction, "Share of JPEG outputs with --output-format mixed (0.5)");
  c->add_option("--q1", args->q1, "JPEG quality before editing, N or MIN-MAX (default 70-100)");
  c->add_option("--q1-prob", o.q1_prob, "Probability of the JPEG round trip before editing (0.8)");
  c->add_option("--q2", args->q2, "Output JPEG quality, N or MIN-MAX (default 70-100)");
  c->add_flag("--keep-pristine", o.keep_pristine, "Also write pristine/ (the page right before editing)");
  c->add_option("--pristine-prob", o.pristine_prob, "Probability of an unedited page (0.2)");
  c->add_option("--max-edits", o.max_edits, "Edits per tampered page: 1..N (5)");
  c->add_option("--conceal-prob", o.conceal_prob, "Probability of concealment per edit (0.5)");
  c->add_option("--insert-overlay-prob", o.insert_overlay_prob,
                 "Share of insert edits typed as an editor's overlay: near-black, any font, sharp (0)");
  c->add_option("--overlay-letter-prob", o.overlay_letter_prob,
                 "Share of those overlays typed as one capital letter, beside the 1 in 6 of the text mix (0)");
  c->add_option("--text-overlay-prob", o.text_overlay_prob,
                 "Share of text edits retyped as an editor's overlay: old ink erased, any font, sharp (0)");
  c->add_option("--print-scan-prob", o.print_scan_prob, "Probability of the print-scan look for rendered pages (0.5)");
  c->add_option("--degrade-after-edit-prob", o.degrade_after_edit_prob,
                 "Rendered pages: share given the print-scan look after the edits, not before (0)");
  c->add_option("--max-side", o.max_side, "Scale pages down to this longer side in px (0 = off)");
  c->add_option("--crop", o.crop, "Crop pages to N x N px, offsets multiples of 8 (0 = off)");
  c->add_option("--rendered-fraction", o.rendered_fraction, "With --sources: share of rendered pages (0)");
  c->add_flag("--quiet", o.quiet, "No progress line or warnings");
  c->add_flag("--bench", args->bench, "Print throughput and per-stage times");
  c->callback([args] { run(*args); });
}

}  // namespace diffnet::cli
