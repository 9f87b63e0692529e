#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "diffnet/common.h"
#include "diffnet/eval.h"
#include "diffnet/image_io.h"
#include "diffnet/predict.h"

namespace diffnet {
namespace {

// Adds one {"file"|"id"|"stem": ..., "image_score"|"score": ...} object to `out`.
void add_score_record(const nlohmann::json& j, const std::string& where, std::map<std::string, double>& out) {
  if (!j.is_object()) throw Error(where, "expected a JSON object");
  std::string name;
  for (const char* key : {"stem", "id", "file"})
    if (j.contains(key) && j[key].is_string()) {
      name = j[key].get<std::string>();
      break;
    }
  if (name.empty()) throw Error(where, "record has no \"file\", \"id\" or \"stem\"");
  const nlohmann::json* score = nullptr;
  for (const char* key : {"image_score", "score"})
    if (j.contains(key)) {
      score = &j[key];
      break;
    }
  if (!score || !score->is_number()) throw Error(where, "record has no numeric \"image_score\" or \"score\"");
  out[file_stem(name)] = score->get<double>();
}

}  // namespace

std::map<std::string, double> read_image_scores(const std::string& path) {
  std::vector<uint8_t> bytes = read_file(path);
  std::string text(bytes.begin(), bytes.end());
  std::map<std::string, double> out;
  try {
    if (file_extension(path) == ".jsonl") {
      std::istringstream in(text);
      std::string line;
      for (int lineno = 1; std::getline(in, line); ++lineno) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        add_score_record(nlohmann::json::parse(line), path + ":" + std::to_string(lineno), out);
      }
    } else {
      nlohmann::json j = nlohmann::json::parse(text);
      if (j.is_array()) {
        for (size_t i = 0; i < j.size(); ++i) add_score_record(j[i], path + "[" + std::to_string(i) + "]", out);
      } else if (j.is_object()) {
        for (auto& [key, value] : j.items()) {
          if (!value.is_number()) throw Error(path, "score of \"" + key + "\" is not a number");
          out[file_stem(key)] = value.get<double>();
        }
      } else {
        throw Error(path, "expected a JSON object or array of records");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(path, std::string("invalid JSON: ") + e.what());
  }
  return out;
}

EvalMetrics score_directories(const ScoreOptions& opt) {
  namespace fs = std::filesystem;
  std::string gt_dir = opt.gt_dir;
  std::error_code ec;
  if (fs::is_directory(fs::path(gt_dir) / "masks", ec)) gt_dir = (fs::path(gt_dir) / "masks").string();
  if (!fs::is_directory(opt.pred_dir, ec)) throw Error(opt.pred_dir, "prediction directory not found");
  std::vector<std::string> gts = list_image_files(gt_dir);
  if (gts.empty()) throw Error(gt_dir, "no ground-truth masks (.png/.jpg) found");
  std::set<std::string> stems;
  for (const auto& g : gts)
    if (!stems.insert(file_stem(g)).second) throw Error(g, "two ground-truth masks share the stem '" + file_stem(g) + "'");

  std::map<std::string, double> scores;
  if (!opt.scores_file.empty()) scores = read_image_scores(opt.scores_file);

  MetricsAccumulator acc;
  Progress progress("score", int64_t(gts.size()), opt.quiet);
  for (const auto& gt_path : gts) {
    const std::string stem = file_stem(gt_path);
    std::string pred_path;
    for (const std::string& name : {stem + ".prob.png", stem + ".png"}) {
      fs::path p = fs::path(opt.pred_dir) / name;
      if (fs::is_regular_file(p, ec)) {
        pred_path = p.string();
        break;
      }
    }
    if (pred_path.empty())
      throw Error(stem, "no prediction " + stem + ".prob.png or " + stem + ".png in " + opt.pred_dir);
    at::Tensor pred = decode_mask(pred_path);
    at::Tensor gt = decode_mask(gt_path);
    double score;
    if (!opt.scores_file.empty()) {
      auto it = scores.find(stem);
      if (it == scores.end()) throw Error(opt.scores_file, "no image score for '" + stem + "'");
      score = it->second;
    } else {
      score = pred.max().item<int64_t>() / 255.0;
    }
    acc.add(pred, gt, score, pred_path + " vs " + gt_path);
    progress.step();
  }
  progress.finish();
  return acc.result();
}

}  // namespace diffnet
