#include <cstdio>
#include <memory>

#include "diffnet/common.h"
#include "diffnet/dataset.h"
#include "diffnet/eval.h"
#include "diffnet/image_io.h"
#include "diffnet/predict.h"
#include "diffnet/prediction_writer.h"

namespace diffnet {

EvalMetrics evaluate_dataset(Predictor& predictor, const EvalOptions& opt) {
  std::vector<DatasetItem> items = list_dataset(opt.data);
  if (items.empty()) throw Error(opt.data, "dataset is empty");
  std::unique_ptr<PredictionWriter> writer;
  if (!opt.save_pred_dir.empty()) {
    PredictionWriterOptions wo;
    wo.overlays = false;
    wo.fresh = true;  // predictions.jsonl describes this run
    writer = std::make_unique<PredictionWriter>(opt.save_pred_dir, wo);
  }
  MetricsAccumulator acc(predictor.page_threshold());  // pages counted flagged as `decision` says
  Progress progress("eval", int64_t(items.size()), opt.quiet);
  double spent_s = 0;
  for (const DatasetItem& item : items) {
    refresh_threads();
    LoadedItem li = load_item(item);
    Prediction p = predictor.predict_rgb(li.rgb, li.image_bytes, li.id);
    at::Tensor u8 = prob_to_u8(p.prob);
    acc.add(u8, li.mask, p.image_score, li.id);
    if (writer) {
      nlohmann::json rec = prediction_to_json(p);
      rec["label"] = li.tampered() ? 1 : 0;
      writer->write(p, std::move(rec), li.id, u8);  // <id>.prob.png: what `diffnet score` reads
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
