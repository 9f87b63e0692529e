// Scoring whole sets (docs/design.md §4.4): `diffnet score` (any method's saved 8-bit probability maps against
// ground-truth masks) and `diffnet eval` (run a model over a dataset, then the same metrics code).
#pragma once

#include <map>
#include <string>

#include "diffnet/metrics.h"

namespace diffnet {

class Predictor;

// Reads image scores from a file: FILE.jsonl (one object per line) or FILE.json (an object
// {"<stem>": score, ...} or an array of objects). An object names its image by "file", "id" or "stem"
// (the stem of the value is used) and its score by "image_score" or "score". A later entry for the same
// stem replaces an earlier one (predictions.jsonl is appended to across runs). Errors name the file/line.
std::map<std::string, double> read_image_scores(const std::string& path);

struct ScoreOptions {
  std::string pred_dir;     // <stem>.prob.png or <stem>.png, 8-bit, value/255 = probability
  std::string gt_dir;       // masks <stem>.png (any non-zero = tampered); DIR/masks/ is used when present
  std::string scores_file;  // optional: image scores (read_image_scores); else max of the map / 255
  bool quiet = false;       // no progress line
};

// Scores every GT mask against its prediction. A GT stem without a prediction, a size mismatch (both
// files named) or an unreadable file is an Error; so is a GT stem missing from a given scores file.
EvalMetrics score_directories(const ScoreOptions& opt);

struct EvalOptions {
  std::string data;          // dataset spec for list_dataset (folder, LMDB or list file)
  std::string save_pred_dir; // optional: write <id>.prob.png and predictions.jsonl (records + "label") here
  bool quiet = false;
};

// Runs the predictor over every dataset item and scores it (same code as score_directories: maps are
// quantised to 8 bits first, so `diffnet score` on the saved maps gives identical numbers).
// Defined only when the data module is built (diffnet_data).
EvalMetrics evaluate_dataset(Predictor& predictor, const EvalOptions& opt);

}  // namespace diffnet
