// Training (docs/design.md §4.1): focal loss, AdamW, warm-up + cosine schedule, gradient
// accumulation, atomic checkpoints that resume exactly, run directory with config and JSONL log.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "diffnet/config.h"
#include "diffnet/data.h"
#include "diffnet/dist.h"
#include "diffnet/model.h"

namespace diffnet {

struct TrainConfig {
  std::vector<std::string> data;  // dataset sources "PATH[:WEIGHT]" (see open_source)
  int64_t size = 512;             // crop size R (multiple of 32)
  int64_t batch = 8;              // samples per micro-batch
  int64_t accum = 1;              // micro-batches per optimizer step (effective batch = batch * accum)
  int64_t steps = 10000;          // optimizer steps
  double lr = 1e-4;               // peak learning rate
  int64_t warmup = 500;           // linear warm-up steps
  double min_lr = 0.0;            // cosine floor
  double weight_decay = 0.01;
  // Learning-rate multiplier of the line context (decoder.line.*): a part added to trained weights starts
  // at zero output and, at a fine-tune's learning rate, barely moves in 1,000 steps (docs/train.md).
  double line_lr_scale = 1.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double pos_weight = 16.0;       // focal class weight of "tampered" (1 for "pristine")
  double cls_weight = 0.1;        // weight of the image-level loss
  double fa_weight = 0.0;         // weight of the false-alarm term on untouched crops (0: off)
  double peak_weight = 0.0;       // weight of the peak term on crops with an edit (0: off)
  double topk_frac = 0.01;        // both terms' share of a crop's pixels: the top ones by tampered margin
  double focal_gamma = 2.0;
  uint64_t seed = 0;              // model init, data order, augmentation, drop path
  int workers = 2;                // loader threads (does not change the results)
  int prefetch = 2;               // batches prepared ahead
  int worker_nice = 10;           // niceness added to loader threads (0: same priority as training)
  int64_t checkpoint_every = 1000;
  int keep_checkpoints = 0;       // also keep checkpoints/step-N.safetensors for the last K (0: none)
  int max_bad_steps = 5;          // abort after this many non-finite steps in a row
  bool validate = true;           // header check of every file before training
  std::string init;               // diffnet weights to start from (fine-tuning)
  std::string init_backbone;      // timm/official ConvNeXt-V2 safetensors for the RGB backbone
  bool amp = false;               // bf16 autocast (fp32 master weights; norms and loss in fp32)
  AugmentConfig augment;
};
nlohmann::json to_json(const TrainConfig& cfg);
// Missing fields keep their defaults (or those of `base`); unknown fields are an Error naming them.
TrainConfig train_config_from_json(const nlohmann::json& j, const TrainConfig& base = {});
// Throws Error naming the field for invalid values (size not a multiple of 32, non-positive steps...).
void validate_train_config(const TrainConfig& cfg);

// What a training run is configured from besides the defaults: a config file {preset, model, ablations,
// train} and what was asked for explicitly (on the command line). Field names, not flags.
struct TrainConfigSources {
  nlohmann::json file = nlohmann::json::object();   // the config file's JSON (empty: none)
  std::string file_name = "config file";            // how errors name it (its path)
  std::string preset;                               // "" = not given
  std::vector<std::string> ablations;               // after the file's
  std::string disc_impl;                            // "" = not given
  double drop_path_rate = -1;                       // < 0 = not given
  nlohmann::json train = nlohmann::json::object();  // training fields given (TrainConfig's JSON names)
};
struct ResolvedTrainConfig {
  ModelConfig model;
  TrainConfig train;
};
// The one precedence of a run's configuration. Model: preset (given, else the file's, else atto) < the
// file's "model" fields < the file's ablations < the given ablations < disc_impl / drop_path_rate; when
// no preset is named anywhere and train.init is set, the model described by the init weights (their
// metadata) takes the preset's place (so "model" fields switch on a part, e.g. line_context, for a
// fine-tune). Training: defaults < the file's "train" < given.
// Throws Error naming the file, field or ablation that is wrong; does not validate ranges
// (validate_train_config, ModelConfig::validate happen at use).
ResolvedTrainConfig resolve_train_config(const TrainConfigSources& sources);

// Focal loss: sum_i w_{y_i} (1 - p_{y_i})^gamma (-log p_{y_i}) / sum_i w_{y_i}, p = softmax over dim 1.
// logits (N, C, ...) any float dtype (computed in fp32); target int64 (N, ...) in [0, C). norm > 0
// replaces the denominator sum_i w_{y_i} (a normaliser shared by several batches or ranks).
at::Tensor focal_loss(const at::Tensor& logits, const at::Tensor& target, double gamma,
                      const std::vector<double>& class_weights, double norm = 0);
// The pixel loss's denominator for a mask (B, H, W) of 0/1: pristine pixels + pos_weight * tampered ones.
double seg_weight_sum(const at::Tensor& mask, double pos_weight);

struct LossParts {
  at::Tensor total;  // seg + cls_weight * cls + fa_weight * fa + peak_weight * peak
  at::Tensor seg, cls, fa, peak;
};
// The false-alarm term: for each crop of mask (B, H, W) with no tampered pixel, the mean of
// softplus(l1 - l0) = -log(1 - p) over its k = max(1, round(frac * H * W)) pixels of highest tampered
// margin l1 - l0; summed over those crops and divided by B (0 when every crop has an edit). A page's
// score is a high quantile of its map, which the mean pixel loss barely sees: this term aims at it.
at::Tensor false_alarm_loss(const at::Tensor& seg_logits, const at::Tensor& mask, double frac);
// The peak term, its mirror: for each crop with tampered pixels, the mean of softplus(l0 - l1) = -log p
// over its k = min(max(1, round(frac * H * W)), tampered pixels) tampered pixels of highest margin;
// summed over those crops and divided by B. It asks every edit for a confident core.
at::Tensor peak_loss(const at::Tensor& seg_logits, const at::Tensor& mask, double frac);
// DiffNet loss on a batch: pixel focal loss with weights [1, pos_weight] on mask (B, H, W), plus the
// image focal loss (weights [1, 1]) whose target is "any tampered pixel in the crop", plus fa_weight *
// false_alarm_loss + peak_weight * peak_loss (each computed only when its weight is > 0). seg_norm > 0: the
// pixel loss's denominator (the trainer shares one over an optimizer step's micro-batches and ranks, so
// that accumulation and data parallelism give the gradient of one big batch).
LossParts diffnet_loss(const DiffNetOutput& out, const at::Tensor& mask, const TrainConfig& cfg, double seg_norm = 0);

// Learning rate of optimizer step `step` (0-based): lr * (step+1)/warmup during warm-up, then
// min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * (step - warmup) / (steps - warmup))).
double lr_at(const TrainConfig& cfg, int64_t step);

// AdamW with PyTorch's semantics (decoupled decay p *= 1 - lr*wd, bias-corrected moments), written
// out so its state is plain named tensors. Parameters without a gradient are skipped (their step
// count does not advance), like torch.optim.
class AdamW {
 public:
  struct Param {
    std::string name;
    at::Tensor value;
    double weight_decay;
    double lr_scale = 1.0;  // this parameter's learning rate is lr * lr_scale (decay too: p *= 1 - lr*scale*wd)
  };
  AdamW(std::vector<Param> params, double beta1, double beta2, double eps);
  void step(double lr);
  void zero_grad();
  // "<name>.exp_avg", "<name>.exp_avg_sq", "<name>.step" (int64 (1)) for every parameter.
  std::map<std::string, at::Tensor> state() const;
  // Strict: every parameter's three tensors must be present with matching shapes (Error naming them).
  void load_state(const std::map<std::string, at::Tensor>& state);
  const std::vector<Param>& params() const { return params_; }

 private:
  std::vector<Param> params_;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;
  std::vector<int64_t> steps_;
  double beta1_, beta2_, eps_;
};

// The model's trainable parameters with their weight decay (cfg.weight_decay, or the model config's
// filter_weight_decay for the discrepancy filters when >= 0) and learning-rate multiplier
// (cfg.line_lr_scale for decoder.line.*, else 1).
std::vector<AdamW::Param> optimizer_params(DiffNet& model, const TrainConfig& cfg);

// What a checkpoint restores besides weights and optimizer state.
struct TrainState {
  int64_t step = 0;           // optimizer steps done
  int64_t data_position = 0;  // samples consumed by all ranks (= step * batch * accum * world)
  int64_t world = 1;          // processes of the run that wrote it (metadata world_size; older: 1)
  std::string linear_backend; // the blocks' Linear backend the run uses on a CPU (model.h; "" unknown)
  std::string conv_weight_grad; // the convolutions' weight gradient on a CPU (conv_grad.h; "" unknown)
  bool export_fp16 = false;   // the run was started with --export-fp16 (kept on --resume)
  nlohmann::json config;      // {"model": ModelConfig, "train": TrainConfig}
};

// Checkpoint file (safetensors): model.<name>, optim.<name>.{exp_avg,exp_avg_sq,step}, rng.cpu (the
// default CPU generator: drop path), metadata {format: diffnet-checkpoint, step, data_position,
// config, checksum, and world_size, linear_backend, conv_weight_grad, export_fp16 when set}. Written atomically (temp file + rename).
void save_checkpoint(const std::string& path, DiffNet& model, const AdamW& opt, const TrainState& state);
// Reads and verifies a checkpoint (format, checksum, names, shapes); Error naming the file otherwise.
struct CheckpointData {
  TrainState state;
  std::map<std::string, at::Tensor> model, optim;
  at::Tensor rng_state;
};
CheckpointData read_checkpoint(const std::string& path);
// What --init starts from: the tensors of diffnet weights, or the model weights of a training checkpoint
// (a run stopped early: RUN/checkpoints/last.safetensors; checksum verified). Its model config:
// load_model_config (model.h).
std::map<std::string, at::Tensor> init_weights(const std::string& path);
// Loads a read checkpoint into a model built from its config, the optimizer and the CPU generator.
void restore_checkpoint(const CheckpointData& ck, DiffNet& model, AdamW& opt);

struct TrainOptions {
  std::string out;          // run directory
  bool resume = false;      // continue from out/checkpoints/last.safetensors with its saved config
  int64_t stop_after = 0;   // stop after this many steps in this invocation (0: run to cfg.steps)
  int workers = -1;         // override the loader threads (e.g. on resume); -1: keep the config's
  bool quiet = false;       // no progress line
  bool export_fp16 = false; // also write model-fp16.safetensors (on resume: also if the run was started so)
  double log_interval_s = 10.0;  // progress line interval when stderr is not a terminal
  std::string device = "cpu";    // cpu | cuda | cuda:N (model, optimizer state and batches live there)
  // Data parallelism (dist.h), not owned; null: one process. Rank 0 alone reads and writes the run
  // directory; the others get the config, weights and optimizer state from it.
  DistGroup* dist = nullptr;
};

struct TrainSummary {
  int64_t start_step = 0, end_step = 0;
  double last_loss = 0;
  double images_per_second = 0;
  double data_wait_share = 0;  // share of wall time the trainer waited for batches
  int64_t bad_samples = 0;     // unreadable samples replaced
  double sample_ms = 0;        // mean loader time to build one sample (one worker thread)
  int64_t skipped_steps = 0;   // non-finite steps skipped
  double allreduce_seconds = 0; // time in the gradient all-reduce (data parallel; waits for the slowest rank)
  std::string model_path;      // final weights (written when end_step == cfg.steps)
};

// Trains in the run directory, on opt.device. One host synchronisation per optimizer step (the loss and
// gradient-norm values that decide whether the update is applied and that are logged). Run layout: config.json, log.jsonl, checkpoints/last.safetensors
// (+ step-N copies), model.safetensors at the end (fp32, diffnet::load_model).
TrainSummary run_training(const TrainConfig& cfg, const ModelConfig& model_cfg, const TrainOptions& opt);

}  // namespace diffnet
