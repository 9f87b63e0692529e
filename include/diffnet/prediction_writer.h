// Writes predictions to an output folder, the one way predict and eval do it: <base>.prob.png (8-bit
// map), optionally <base>.overlay.png, and predictions.jsonl (one record per input). Every file is
// replaced atomically; a record replaces the folder's earlier record of the same input.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffnet/predict.h"
#include "diffnet/regions.h"

namespace diffnet {

struct PredictionWriterOptions {
  bool overlays = true;    // also write <base>.overlay.png
  OverlayOptions overlay;  // how overlays are drawn
  // true: the folder's earlier records are dropped (eval: predictions.jsonl describes one run);
  // false: they are kept, and a rerun replaces its own records instead of appending duplicates.
  bool fresh = false;
  double flush_interval_s = 2;  // predictions.jsonl is rewritten at most this often while writing
};

class PredictionWriter {
 public:
  // Creates dir; reads its predictions.jsonl unless fresh (lines that do not parse are kept verbatim).
  PredictionWriter(std::string dir, PredictionWriterOptions options = {});
  ~PredictionWriter();  // flush(); a failure is reported on stderr
  PredictionWriter(const PredictionWriter&) = delete;
  PredictionWriter& operator=(const PredictionWriter&) = delete;

  // Output base name for an input: its stem; its file name, then a counter, when an earlier input of
  // this run already took that name. Page N (> 0) of a PDF/TIFF file gets "-pN" after either.
  std::string base_name(const std::string& file, int64_t page = 0);
  // Writes p's maps as dir/<base>.prob.png (+ .overlay.png) and stores `record` with "outputs" added
  // (returned). The record's key is its input's exact name ("file_hex" when present, else "file"). When a
  // map cannot be written nothing of this prediction is left behind (the error propagates). prob_u8:
  // prob_to_u8(p.prob), overlay: render_overlay(p.rgb, p.prob, p.regions, options.overlay), when the
  // caller already has them (undefined: computed here).
  nlohmann::json write(const Prediction& p, nlohmann::json record, const std::string& base,
                       const at::Tensor& prob_u8 = {}, const at::Tensor& overlay = {});
  // Rewrites predictions.jsonl now (atomic). Done by write() every flush_interval_s and by the destructor,
  // so an interrupted run loses at most the records of its last seconds, never the file.
  void flush();
  const std::string& jsonl_path() const { return jsonl_; }

 private:
  std::string dir_, jsonl_;
  PredictionWriterOptions opt_;
  std::vector<std::string> lines_;          // predictions.jsonl, one record per line
  std::map<std::string, size_t> index_;     // record key -> line
  std::set<std::string> used_bases_;
  bool dirty_ = false;
  double last_flush_ = 0;
};

}  // namespace diffnet
