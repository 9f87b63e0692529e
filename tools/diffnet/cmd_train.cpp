// diffnet train: train DiffNet on one or more datasets (folders, DocTamper LMDB, list files).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "diffnet/common.h"
#include "diffnet/dist.h"
#include "diffnet/safetensors.h"
#include "diffnet/train.h"

namespace diffnet::cli {
namespace {

struct TrainArgs {
  std::string config_file, preset;
  std::vector<std::string> ablations;
  std::string disc_impl;
  double drop_path = 0;
  TrainConfig t;
  TrainOptions o;
  bool no_augment = false, dct_from_pixels = false, no_validate = false, print_config = false;
  int64_t bench_data = 0;
  double prob_disable = 0;
  int nproc = 0;
  std::string dist_backend = "auto";
  double dist_timeout = 300;
};

// The command line of a worker of `--nproc N`: this one without --nproc.
std::vector<std::string> worker_command_line() {
  std::vector<std::string> in = own_command_line(), out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == "--nproc") {
      ++i;  // and its value
      continue;
    }
    if (in[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(in[i]);
  }
  return out;
}

// The training fields given on the command line, by field name: a field's flag is its name with dashes
// (min_lr: --min-lr); the augmentation and validation switches have flags of their own.
nlohmann::json given_train_fields(const TrainArgs& a, CLI::App& cmd) {
  nlohmann::json given = nlohmann::json::object();
  const nlohmann::json all = to_json(a.t);
  for (auto it = all.begin(); it != all.end(); ++it) {
    std::string flag = "--" + it.key();
    std::replace(flag.begin(), flag.end(), '_', '-');
    const CLI::Option* o = cmd.get_option_no_throw(flag);
    if (o != nullptr && o->count() > 0) given[it.key()] = it.value();
  }
  nlohmann::json augment = nlohmann::json::object();
  if (cmd.count("--prob-disable")) augment["prob_disable"] = a.prob_disable;
  if (a.no_augment) augment["enabled"] = false;
  if (a.dct_from_pixels) augment["dct_from_file"] = false;
  if (!augment.empty()) given["augment"] = augment;
  if (a.no_validate) given["validate"] = false;
  return given;
}

// --bench-data N: builds N samples of the first source on this thread, as one loader worker does, and
// reports decode and augmentation cost per sample (thread CPU time, robust to a busy machine, and wall).
void bench_data(const TrainConfig& t, int64_t n) {
  if (t.data.empty()) throw Error("train", "--bench-data needs --data");
  DataSource src = open_source(t.data.front());
  double cpu_load = 0, cpu_aug = 0, wall = 0;
  int passes = 0;
  for (int64_t i = 0; i < n; ++i) {
    Rng rng = Rng::derive(t.seed, 2, static_cast<uint64_t>(i));
    double w0 = now_seconds(), c0 = thread_cpu_seconds();
    LoadedItem item = load_item(src.items[static_cast<size_t>(i) % src.items.size()]);
    double c1 = thread_cpu_seconds();
    TrainSample s = make_train_sample(item, t.size, t.augment, rng);
    double c2 = thread_cpu_seconds();
    wall += now_seconds() - w0;
    cpu_load += c1 - c0;
    cpu_aug += c2 - c1;
    passes += s.jpeg_passes;
  }
  std::printf("data %s  R=%lld  %lld samples: decode %.1f ms + sample %.1f ms CPU per sample (1 thread), "
              "wall %.1f ms, %.2f JPEG passes/sample\n",
              src.path.c_str(), static_cast<long long>(t.size), static_cast<long long>(n), 1000 * cpu_load / n,
              1000 * cpu_aug / n, 1000 * wall / n, static_cast<double>(passes) / n);
}

void run(TrainArgs& a, CLI::App& cmd) {
  if (a.o.out.empty() && a.bench_data <= 0 && !a.print_config) throw Error("train", "--out RUN_DIR is required");
  const DistEnv env = read_dist_env();
  if (a.nproc > 0 && a.bench_data <= 0 && !a.print_config) {
    if (env.distributed())
      throw Error("--nproc", "starts the worker processes itself: under torchrun or srun leave it out");
    exit_code() = launch_local(a.nproc, worker_command_line());
    return;
  }
  TrainConfigSources sources;
  if (!a.config_file.empty()) {
    auto bytes = read_file(a.config_file);
    try {
      sources.file = nlohmann::json::parse(bytes.begin(), bytes.end());
    } catch (const std::exception& e) {
      throw Error(a.config_file, std::string("invalid JSON: ") + e.what());
    }
    sources.file_name = a.config_file;
  }
  sources.preset = a.preset;
  sources.ablations = a.ablations;
  if (cmd.count("--disc-impl")) sources.disc_impl = a.disc_impl;
  if (cmd.count("--drop-path")) sources.drop_path_rate = a.drop_path;
  sources.train = given_train_fields(a, cmd);
  const ResolvedTrainConfig resolved = resolve_train_config(sources);
  if (a.bench_data > 0) {
    bench_data(resolved.train, a.bench_data);
    return;
  }
  const TrainConfig& t = resolved.train;
  ModelConfig m = resolved.model;
  m.validate();
  if (a.print_config) {
    nlohmann::json j = {{"model", to_json(m)}, {"train", to_json(t)}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  if (!a.o.resume) validate_train_config(t);
  if (cmd.count("--workers")) a.o.workers = a.t.workers;
  // Reductions depend on the thread count, and an exact resume needs the same one: training uses every
  // usable core unless told otherwise (-t, $DIFFNET_THREADS), never a count that depends on the load.
  if (threads_are_auto()) init_runtime(usable_cores());
  std::unique_ptr<DistGroup> group;
  if (env.distributed()) {
    if (a.o.device == "cuda") a.o.device = "cuda:" + std::to_string(env.local_rank);  // one GPU per local rank
    group = std::make_unique<DistGroup>(env, a.dist_backend, a.o.device, a.dist_timeout);
    a.o.dist = group.get();
  }
  TrainSummary s = run_training(t, m, a.o);
  if (env.rank == 0)
    std::fprintf(stderr,
               "done: steps %lld-%lld  %.2f img/s  data wait %.1f%%  %.1f ms/sample  skipped steps %lld  "
               "bad samples %lld%s%s\n",
               static_cast<long long>(s.start_step), static_cast<long long>(s.end_step), s.images_per_second,
               100.0 * s.data_wait_share, s.sample_ms, static_cast<long long>(s.skipped_steps),
               static_cast<long long>(s.bad_samples), s.model_path.empty() ? "" : "  weights ",
               s.model_path.c_str());
  if (env.rank == 0 && group && s.end_step > s.start_step)
    std::fprintf(stderr, "all-reduce: %.1f ms per step (waits for the slowest rank included)\n",
                 1000.0 * s.allreduce_seconds / static_cast<double>(s.end_step - s.start_step));
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train DiffNet (focal loss, AdamW, warm-up + cosine, TDoc augmentation)");
  cmd->add_option("--data", a->t.data,
                  "Dataset PATH[:WEIGHT] (images/+masks/ folder, DocTamper LMDB dir, or list file); repeatable")
      ->type_name("SPEC");
  cmd->add_option("-o,--out", a->o.out, "Run directory (config.json, log.jsonl, checkpoints/, model.safetensors)");
  cmd->add_option("--config", a->config_file, "JSON config {preset, model, ablations, train}; flags override it");
  cmd->add_option("--preset", a->preset, "Model preset: atto|tiny|base|nano|femto|pico (default atto)");
  cmd->add_option("--ablation", a->ablations, "Paper ablation A0..A20 (repeatable)");
  cmd->add_option("--disc-impl", a->disc_impl, "Discrepancy implementation: dense|fused");
  cmd->add_option("--drop-path", a->drop_path, "Stochastic depth rate of the backbone");
  cmd->add_option("--size", a->t.size, "Crop size, multiple of 32")->capture_default_str();
  cmd->add_option("--batch", a->t.batch, "Samples per micro-batch")->capture_default_str();
  cmd->add_option("--accum", a->t.accum, "Micro-batches per optimizer step")->capture_default_str();
  cmd->add_option("--steps", a->t.steps, "Optimizer steps")->capture_default_str();
  cmd->add_option("--lr", a->t.lr, "Peak learning rate")->capture_default_str();
  cmd->add_option("--min-lr", a->t.min_lr, "Cosine floor")->capture_default_str();
  cmd->add_option("--warmup", a->t.warmup, "Linear warm-up steps")->capture_default_str();
  cmd->add_option("--weight-decay", a->t.weight_decay, "AdamW weight decay")->capture_default_str();
  cmd->add_option("--line-lr-scale", a->t.line_lr_scale,
                  "Learning-rate multiplier of the line context (decoder.line.*)")->capture_default_str();
  cmd->add_option("--pos-weight", a->t.pos_weight, "Focal class weight of tampered pixels")->capture_default_str();
  cmd->add_option("--cls-weight", a->t.cls_weight, "Weight of the image-level loss")->capture_default_str();
  cmd->add_option("--fa-weight", a->t.fa_weight, "Weight of the false-alarm term on untouched crops (0: off)")
      ->capture_default_str();
  cmd->add_option("--peak-weight", a->t.peak_weight, "Weight of the peak term on crops with an edit (0: off)")
      ->capture_default_str();
  cmd->add_option("--topk-frac", a->t.topk_frac, "Share of a crop's pixels the false-alarm and peak terms see")
      ->capture_default_str();
  cmd->add_option("--seed", a->t.seed, "Seed of init, data order, augmentation, drop path")->capture_default_str();
  cmd->add_option("--workers", a->t.workers, "Data loader threads (0: load on the training thread)")
      ->capture_default_str();
  cmd->add_option("--prefetch", a->t.prefetch, "Batches prepared ahead")->capture_default_str();
  cmd->add_option("--worker-nice", a->t.worker_nice, "Niceness added to loader threads (0..19)")
      ->capture_default_str();
  cmd->add_option("--checkpoint-every", a->t.checkpoint_every, "Checkpoint interval in steps")->capture_default_str();
  cmd->add_option("--keep-checkpoints", a->t.keep_checkpoints, "Also keep step-N copies of the last K checkpoints")
      ->capture_default_str();
  cmd->add_option("--init", a->t.init, "Start from these diffnet weights or a run's checkpoint (fine-tuning)");
  cmd->add_option("--init-backbone", a->t.init_backbone, "ConvNeXt-V2 safetensors (timm) for the RGB backbone");
  cmd->add_option("--prob-disable", a->prob_disable, "Per-sample probability of no augmentation (fine-tuning: 0.5)");
  cmd->add_flag("--no-augment", a->no_augment, "No augmentation and no recompression");
  cmd->add_flag("--dct-from-pixels", a->dct_from_pixels,
                "Non-augmented JPEG samples: recompute the DCT from pixels (default: read it from the file)");
  cmd->add_flag("--no-validate", a->no_validate, "Skip the up-front header check of every file");
  cmd->add_option("--device", a->o.device, "cpu | cuda | cuda:N (where the model and batches live)")
      ->capture_default_str();
  cmd->add_flag("--amp", a->t.amp, "bf16 autocast (fp32 master weights; norms and loss in fp32)");
  cmd->add_option("--nproc", a->nproc,
                  "Data parallel on this machine: start N worker processes (each with --batch samples; "
                  "under torchrun/srun the environment says the world instead)");
  cmd->add_option("--dist-backend", a->dist_backend, "c10d backend of a distributed run: auto|gloo|nccl")
      ->capture_default_str();
  cmd->add_option("--dist-timeout", a->dist_timeout,
                  "Seconds a rank waits for the others (rendezvous, each all-reduce) before it gives up")
      ->capture_default_str();
  cmd->add_flag("--resume", a->o.resume, "Continue the run in --out from its last checkpoint (its saved config)");
  cmd->add_option("--stop-after", a->o.stop_after, "Stop after N steps in this invocation (checkpointed)");
  cmd->add_flag("--export-fp16", a->o.export_fp16, "Also write model-fp16.safetensors at the end");
  cmd->add_flag("-q,--quiet", a->o.quiet, "No progress output");
  cmd->add_flag("--print-config", a->print_config, "Print the effective config and exit");
  cmd->add_option("--bench-data", a->bench_data,
                  "Build N samples of the first --data on one thread, report the cost per sample, exit");
  cmd->callback([a, cmd] { run(*a, *cmd); });
}

}  // namespace diffnet::cli
