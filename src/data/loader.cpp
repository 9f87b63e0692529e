// Source mixing, batching and the prefetching worker threads.
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "diffnet/common.h"
#include "diffnet/data.h"

namespace diffnet {
namespace {

// Independent random streams of one seed.
constexpr uint64_t kStreamSource = 1;   // which source sample n comes from
constexpr uint64_t kStreamSample = 2;   // augmentation of sample n
constexpr uint64_t kStreamRetry = 3;    // replacement draws for unreadable items
constexpr uint64_t kStreamPerm = 1000;  // + source: per-epoch permutations

}  // namespace

DataSource open_source(const std::string& spec) {
  DataSource src;
  src.path = spec;
  std::error_code ec;
  size_t colon = spec.rfind(':');
  if (!std::filesystem::exists(spec, ec) && colon != std::string::npos && colon > 0) {
    std::string w = spec.substr(colon + 1);
    char* end = nullptr;
    double v = std::strtod(w.c_str(), &end);
    if (!w.empty() && end && *end == '\0') {
      if (!(v > 0) || !std::isfinite(v)) throw Error(spec, "dataset weight must be a positive number");
      src.path = spec.substr(0, colon);
      src.weight = v;
    }
  }
  src.items = list_dataset(src.path);
  return src;
}

MixtureSampler::MixtureSampler(std::vector<int64_t> source_sizes, std::vector<double> weights, uint64_t seed)
    : sizes_(std::move(source_sizes)), seed_(seed) {
  if (sizes_.empty() || sizes_.size() != weights.size()) throw Error("sampler", "need one weight per source");
  double total = 0;
  for (size_t i = 0; i < sizes_.size(); ++i) {
    if (sizes_[i] <= 0) throw Error("sampler", "empty source");
    if (!(weights[i] > 0)) throw Error("sampler", "weights must be positive");
    total += weights[i];
    cumulative_.push_back(total);
  }
  for (auto& c : cumulative_) c /= total;
  counts_.assign(sizes_.size(), 0);
  perm_epoch_.assign(sizes_.size(), -1);
  perm_.resize(sizes_.size());
}

const std::vector<int64_t>& MixtureSampler::permutation(int source, int64_t epoch) {
  if (perm_epoch_[source] != epoch) {
    auto& p = perm_[source];
    p.resize(static_cast<size_t>(sizes_[source]));
    for (int64_t i = 0; i < sizes_[source]; ++i) p[i] = i;
    Rng rng = Rng::derive(seed_, kStreamPerm + static_cast<uint64_t>(source), static_cast<uint64_t>(epoch));
    for (int64_t i = sizes_[source] - 1; i > 0; --i) std::swap(p[i], p[rng.randint(0, i)]);
    perm_epoch_[source] = epoch;
  }
  return perm_[source];
}

MixtureSampler::Pick MixtureSampler::next() {
  Pick p;
  p.index = position_;
  if (sizes_.size() > 1) {
    double u = Rng::derive(seed_, kStreamSource, static_cast<uint64_t>(position_)).uniform();
    p.source = static_cast<int>(std::upper_bound(cumulative_.begin(), cumulative_.end(), u) - cumulative_.begin());
    p.source = std::min<int>(p.source, static_cast<int>(sizes_.size()) - 1);
  }
  int64_t c = counts_[p.source]++;
  p.item = permutation(p.source, c / sizes_[p.source])[c % sizes_[p.source]];
  ++position_;
  return p;
}

void MixtureSampler::seek(int64_t position) {
  std::fill(counts_.begin(), counts_.end(), 0);
  position_ = 0;
  if (sizes_.size() == 1) {
    counts_[0] = position;
  } else {
    for (int64_t n = 0; n < position; ++n) {
      double u = Rng::derive(seed_, kStreamSource, static_cast<uint64_t>(n)).uniform();
      int s = static_cast<int>(std::upper_bound(cumulative_.begin(), cumulative_.end(), u) - cumulative_.begin());
      ++counts_[std::min<int>(s, static_cast<int>(sizes_.size()) - 1)];
    }
  }
  position_ = position;
}

Batch collate(std::vector<TrainSample>& samples, int64_t first_index) {
  Batch b;
  std::vector<at::Tensor> rgb, mask, dct, qt;
  std::vector<int64_t> labels;
  for (auto& s : samples) {
    rgb.push_back(s.rgb);
    mask.push_back(s.mask);
    dct.push_back(s.dct);
    qt.push_back(s.qt);
    labels.push_back(s.label);
    b.ids.push_back(s.id);
  }
  b.rgb = at::stack(rgb);
  b.mask = at::stack(mask);
  b.dct = at::stack(dct);
  b.qt = at::stack(qt);
  b.label = at::tensor(labels, at::kLong);
  b.first_index = first_index;
  return b;
}

static std::vector<int64_t> source_sizes(const std::vector<DataSource>& s) {
  std::vector<int64_t> v;
  for (const auto& x : s) v.push_back(static_cast<int64_t>(x.items.size()));
  return v;
}
static std::vector<double> source_weights(const std::vector<DataSource>& s) {
  std::vector<double> v;
  for (const auto& x : s) v.push_back(x.weight);
  return v;
}

// Everything a loader holds; the worker threads run State::worker_loop.
struct DataLoader::State {
  State(std::vector<DataSource> sources, LoaderConfig cfg, int64_t start_position);
  ~State();
  TrainSample build(const MixtureSampler::Pick& pick);
  void worker_loop();
  Batch next_batch();
  LoaderStats stats() const;
  int64_t num_items() const;
  bool owns(int64_t index) const { return ((index - base_) / cfg_.batch) % cfg_.world == cfg_.rank; }

  std::vector<DataSource> sources_;
  LoaderConfig cfg_;
  MixtureSampler sampler_;
  int64_t base_ = 0;      // start position
  int64_t batches_ = 0;   // batches delivered
  int64_t consumed_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  std::map<int64_t, TrainSample> ready_;
  int64_t produce_next_ = 0;  // next sample index handed to a worker
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
  std::atomic<int64_t> bad_{0};
  double wait_seconds_ = 0, build_seconds_ = 0;
  int64_t built_ = 0;
};

DataLoader::DataLoader(std::vector<DataSource> sources, LoaderConfig cfg, int64_t start_position)
    : state_(std::make_unique<State>(std::move(sources), std::move(cfg), start_position)) {}
DataLoader::~DataLoader() = default;
Batch DataLoader::next_batch() { return state_->next_batch(); }
int64_t DataLoader::position() const { return state_->consumed_; }
LoaderStats DataLoader::stats() const { return state_->stats(); }
int64_t DataLoader::num_items() const { return state_->num_items(); }

DataLoader::State::State(std::vector<DataSource> sources, LoaderConfig cfg, int64_t start_position)
    : sources_(std::move(sources)),
      cfg_(std::move(cfg)),
      sampler_(source_sizes(sources_), source_weights(sources_), cfg_.seed) {
  if (cfg_.batch <= 0) throw Error("loader", "batch must be positive");
  if (cfg_.size <= 0 || cfg_.size % 8 != 0) throw Error("loader", "crop size must be a positive multiple of 8");
  if (cfg_.world < 1 || cfg_.rank < 0 || cfg_.rank >= cfg_.world) throw Error("loader", "rank must be in [0, world)");
  sampler_.seek(start_position);
  base_ = consumed_ = produce_next_ = start_position;
  for (int i = 0; i < cfg_.workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

DataLoader::State::~State() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : threads_) t.join();
}

int64_t DataLoader::State::num_items() const {
  int64_t n = 0;
  for (const auto& s : sources_) n += static_cast<int64_t>(s.items.size());
  return n;
}

LoaderStats DataLoader::State::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  LoaderStats st;
  st.samples = consumed_;
  st.bad_samples = bad_.load();
  st.wait_seconds = wait_seconds_;
  st.build_seconds = build_seconds_;
  st.built = built_;
  return st;
}

TrainSample DataLoader::State::build(const MixtureSampler::Pick& pick) {
  const auto& items = sources_[pick.source].items;
  int64_t idx = pick.item;
  Rng retry = Rng::derive(cfg_.seed, kStreamRetry, static_cast<uint64_t>(pick.index));
  std::string last_error;
  for (int attempt = 0; attempt <= cfg_.max_retries; ++attempt) {
    Rng rng = Rng::derive(cfg_.seed, kStreamSample, static_cast<uint64_t>(pick.index) * 64 + attempt);
    try {
      LoadedItem item = load_item(items[idx]);
      return make_train_sample(item, cfg_.size, cfg_.augment, rng);
    } catch (const std::exception& e) {
      last_error = e.what();
      ++bad_;
      if (!cfg_.quiet) std::fprintf(stderr, "warning: skipping sample: %s\n", e.what());
      idx = retry.randint(0, static_cast<int64_t>(items.size()) - 1);
    }
  }
  throw Error(sources_[pick.source].path,
              std::to_string(cfg_.max_retries + 1) + " unreadable samples in a row (last: " + last_error + ")");
}

void DataLoader::State::worker_loop() {
  // Workers do single-threaded work (the trainer's intra-op thread count is untouched).
  set_this_thread_threads(1);
  if (cfg_.worker_nice > 0) {
    errno = 0;
    int current = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
    if (errno == 0) setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), current + cfg_.worker_nice);
  }
  const int64_t window = std::max<int64_t>(cfg_.batch * (cfg_.prefetch_batches + 1), cfg_.workers);
  for (;;) {
    MixtureSampler::Pick pick;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_work_.wait(lk, [&] { return stop_ || (!error_ && produce_next_ < consumed_ + window * cfg_.world); });
      if (stop_) return;
      do {  // other ranks' samples are skipped (drawing a pick is cheap: no decoding)
        pick = sampler_.next();
        ++produce_next_;
      } while (!owns(pick.index));
    }
    double t0 = now_seconds();
    TrainSample s;
    std::exception_ptr err;
    try {
      s = build(pick);
    } catch (...) {
      err = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      build_seconds_ += now_seconds() - t0;
      ++built_;
      if (err) {
        if (!error_) error_ = err;
      } else {
        ready_.emplace(pick.index, std::move(s));
      }
    }
    cv_done_.notify_all();
  }
}

Batch DataLoader::State::next_batch() {
  std::vector<TrainSample> samples;
  samples.reserve(static_cast<size_t>(cfg_.batch));
  const int64_t first = base_ + (batches_ * cfg_.world + cfg_.rank) * cfg_.batch;
  ++batches_;
  if (threads_.empty()) {
    double t0 = now_seconds();
    for (int64_t i = 0; i < cfg_.batch; ++i) {
      MixtureSampler::Pick pick;
      do pick = sampler_.next();
      while (!owns(pick.index));
      samples.push_back(build(pick));
    }
    double dt = now_seconds() - t0;
    std::lock_guard<std::mutex> lk(mu_);
    wait_seconds_ += dt;
    build_seconds_ += dt;
    built_ += cfg_.batch;
    consumed_ = base_ + batches_ * cfg_.world * cfg_.batch;
    produce_next_ = sampler_.position();
    return collate(samples, first);
  }
  double t0 = now_seconds();
  {
    std::unique_lock<std::mutex> lk(mu_);
    for (int64_t n = first; n < first + cfg_.batch; ++n) {
      cv_done_.wait(lk, [&] { return error_ || ready_.count(n) > 0; });
      if (error_) std::rethrow_exception(error_);
      auto it = ready_.find(n);
      samples.push_back(std::move(it->second));
      ready_.erase(it);
    }
    consumed_ = base_ + batches_ * cfg_.world * cfg_.batch;
    wait_seconds_ += now_seconds() - t0;
  }
  cv_work_.notify_all();
  return collate(samples, first);
}

}  // namespace diffnet
