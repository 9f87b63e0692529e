// Training data (docs/design.md §3, §4.2): a seeded RNG with our own distributions, the Syn2Real-TDoc augmentation
// pipeline (§4.2) with 8-aligned tamper-aware crops, weighted mixing of several
// dataset sources, and a multi-threaded prefetching loader whose batches depend only on (seed, position).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffnet/dataset.h"
#include "diffnet/rng.h"

namespace diffnet {

// Augmentation and sample-construction settings. Defaults are the Syn2Real-TDoc pretraining protocol.
struct AugmentConfig {
  bool enabled = true;            // false: no augmentation and no recompression (evaluation-style samples)
  double prob_disable = 0.0;      // per-sample probability of enabled=false (TDoc fine-tuning uses 0.5)
  double p_spatial = 0.25;        // rescale, small rotation (each drawn independently)
  double p_visual = 0.16;         // brightness, contrast, saturation, gaussian blur
  double p_flip = 0.05;           // flip, harsh rotation (±90/180)
  double p_homography = 0.10;     // after the crop
  int small_angle = 5;            // rotation angle drawn from the integers [-a, a] degrees
  double p_jpeg_zero = 0.33;      // P(0 passes)
  double p_jpeg_one = 0.33;       // P(1 pass | not 0); else randint(1, jpeg_max_passes)
  int jpeg_max_passes = 3;
  int quality_min = 75, quality_max = 100;
  bool tamper_aware_crop = true;
  double p_uniform_crop = 0.25;   // share of crops placed uniformly even when tampered pixels exist
  int crop_tries = 100;
  int64_t crop_min_positive = 32; // a tamper-aware window holds >= min(#positive, this) positives
  // JPEG sources in non-augmented samples: true = quantized coefficients and table read from the file
  // (what inference sees); false = DCT recomputed from the decoded pixels with the file's table (TDoc).
  bool dct_from_file = true;
};
nlohmann::json to_json(const AugmentConfig& cfg);
// Missing fields keep their defaults; unknown fields are an Error naming the field.
AugmentConfig augment_config_from_json(const nlohmann::json& j);

// One model-ready training sample of size (R, R).
struct TrainSample {
  std::string id;
  at::Tensor rgb;   // uint8 (R, R, 3)
  at::Tensor mask;  // uint8 (R, R) in {0, 1}
  at::Tensor dct;   // uint8 (R, R) in 0..20
  at::Tensor qt;    // int64 (64) natural order, 1..255
  int64_t label = 0;          // 1 when any mask pixel is tampered (defined on the crop)
  // Trace of the random choices, for logs and tests.
  bool augmented = false;
  int jpeg_passes = 0;
  int last_quality = 0;       // 0 when no pass
  int64_t crop_y = 0, crop_x = 0;  // first crop's offset in the source image (multiples of 8)
  std::vector<std::string> ops;    // names of the augmentation ops applied, in order
};

// Builds a training sample from a loaded item with crop size `size` (multiple of 8). Every random choice
// comes from rng, in a fixed order (docs/design.md §4.2 with 8-aligned crops, see docs/data.md).
TrainSample make_train_sample(const LoadedItem& item, int64_t size, const AugmentConfig& cfg, Rng& rng);

// Places a (ch, cw) window in an (h, w) mask with offsets multiples of 8 (ch <= h, cw <= w). With
// tamper_aware, a share 1-p_uniform of the draws look for a window holding >= min(#pos, min_positive)
// positives (crop_tries tries, then a window around a random positive pixel). Returns {y, x}.
std::array<int64_t, 2> choose_crop(const at::Tensor& mask, int64_t ch, int64_t cw, const AugmentConfig& cfg,
                                   Rng& rng);

// Number of JPEG passes drawn as in TDoc: 0 w.p. p_jpeg_zero, else 1 w.p. p_jpeg_one, else randint(1, max).
int draw_jpeg_passes(const AugmentConfig& cfg, Rng& rng);

// A dataset source with its mixing weight. spec is "PATH" or "PATH:WEIGHT" (WEIGHT a positive number).
struct DataSource {
  std::string path;
  double weight = 1.0;
  std::vector<DatasetItem> items;
};
// Parses "PATH[:WEIGHT]" and lists the items (list_dataset). Throws Error naming PATH when empty.
DataSource open_source(const std::string& spec);

// Which item global sample n uses: the source is drawn by weight from (seed, n); within a source, items
// are visited in a per-epoch permutation of (seed, source, epoch). State = the position n only.
class MixtureSampler {
 public:
  MixtureSampler(std::vector<int64_t> source_sizes, std::vector<double> weights, uint64_t seed);
  struct Pick {
    int64_t index = 0;   // global sample index n
    int source = 0;
    int64_t item = 0;
  };
  Pick next();
  int64_t position() const { return position_; }
  void seek(int64_t position);  // replays the source draws (cheap) so next() returns sample `position`

 private:
  const std::vector<int64_t>& permutation(int source, int64_t epoch);
  std::vector<int64_t> sizes_;
  std::vector<double> cumulative_;
  uint64_t seed_;
  int64_t position_ = 0;
  std::vector<int64_t> counts_;
  std::vector<int64_t> perm_epoch_;
  std::vector<std::vector<int64_t>> perm_;
};

// A batch, stacked: B samples of (R, R).
struct Batch {
  at::Tensor rgb;    // uint8 (B, R, R, 3)
  at::Tensor mask;   // uint8 (B, R, R)
  at::Tensor dct;    // uint8 (B, R, R)
  at::Tensor qt;     // int64 (B, 64)
  at::Tensor label;  // int64 (B)
  std::vector<std::string> ids;
  int64_t first_index = 0;  // global index of the first sample
};
Batch collate(std::vector<TrainSample>& samples, int64_t first_index);

struct LoaderConfig {
  int64_t size = 512;
  int64_t batch = 8;
  uint64_t seed = 0;
  int workers = 2;          // 0: samples are built on the calling thread
  int prefetch_batches = 2; // samples built ahead = prefetch_batches * batch (at least workers)
  AugmentConfig augment;
  int max_retries = 10;     // a sample that fails to load is replaced by another draw; then error
  // Niceness added to the worker threads (Linux, per thread): the training threads keep priority and the
  // workers fill idle time, so on a small machine they do not stall the compute threads' barriers.
  int worker_nice = 10;
  bool quiet = false;       // no warnings on stderr
  // Data parallelism: of the sample sequence from the start position on, blocks of `batch` samples are
  // dealt to the ranks in turn (block k to rank k % world); this loader delivers rank `rank`'s blocks.
  int rank = 0, world = 1;
};

struct LoaderStats {
  int64_t samples = 0;       // samples delivered
  int64_t bad_samples = 0;   // items that failed to load/augment and were replaced
  double wait_seconds = 0;   // consumer time blocked in next_batch()
  double build_seconds = 0;  // time spent building samples (all workers)
  int64_t built = 0;         // samples built (including prefetched ones not consumed yet)
};

// Batch b of a loader holds global samples [S + (b*W + r)*B, +B) (start S, rank r of W; one process:
// [S + b*B, +B)); sample n depends only on (seed, n, config), never on thread timing or the number of
// ranks, so a resumed loader reproduces the uninterrupted stream and W ranks of batch B together see
// what one process of batch W*B sees.
class DataLoader {
 public:
  DataLoader(std::vector<DataSource> sources, LoaderConfig cfg, int64_t start_position = 0);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;
  Batch next_batch();
  // Samples consumed so far by all ranks together (the checkpointed state): start + batches * batch * world.
  int64_t position() const;
  LoaderStats stats() const;
  int64_t num_items() const;

 private:
  struct State;  // the sources, sampler, worker threads and their synchronisation (loader.cpp)
  std::unique_ptr<State> state_;
};

}  // namespace diffnet
