#include <cstdio>
#include <fstream>
#include <memory>

#include "diffnet/common.h"
#include "diffnet/dataset.h"
#include "diffnet/eval.h"
#include "diffnet/image_io.h"
#include "diffnet/predict.h"

namespace diffnet {

EvalMetrics evaluate_dataset(Predictor& predictor, const EvalOptions& opt) {
  std::vector<DatasetItem> items = list_dataset(opt.data);
  if (items.empty()) throw Error(opt.data, "dataset is empty");
  std::unique_ptr<std::ofstream> jsonl;
  if (!opt.save_pred_dir.empty()) {
    make_dirs(opt.save_pred_dir);
    std::string path = opt.save_pred_dir + "/predictions.jsonl";
    jsonl = std::make_unique<std::ofstream>(path, std::ios::trunc);
    if (!*jsonl) throw Error(path, "cannot open for writing");
  }
  MetricsAccumulator acc;
  Progress progress("eval", int64_t(items.size()), opt.quiet);
  double spent_s = 0;
  for (const DatasetItem& item : items) {
    LoadedItem li = load_item(item);
    Prediction p = predictor.predict_rgb(li.rgb, li.image_bytes, li.id);
    at::Tensor u8 = prob_to_u8(p.prob);
    acc.add(u8, li.mask, p.image_score, li.id);
    if (jsonl) {
      write_png(opt.save_pred_dir + "/" + li.id + ".prob.png", u8);
      nlohmann::json rec = prediction_to_json(p, predictor.options().threshold);
      rec["label"] = li.tampered() ? 1 : 0;
      *jsonl << rec.dump() << "\n";
    }
    spent_s += p.timings.total_ms / 1e3;
    char extra[64];
    std::snprintf(extra, sizeof extra, "%.2f s/img", spent_s / double(progress.done() + 1));
    progress.step(1, extra);
  }
  progress.finish();
  return acc.result();
}

}  // namespace diffnet
