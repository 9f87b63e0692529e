// The training loop: run directory, data, model, optimizer, checkpoints, progress and JSONL log.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "diffnet/common.h"
#include "diffnet/conv_grad.h"
#include "diffnet/device.h"
#include "diffnet/rng.h"
#include "diffnet/safetensors.h"
#include "diffnet/train.h"

namespace diffnet {
namespace fs = std::filesystem;
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Keeps the log lines of steps <= `step` (a resumed run rewrites what came after its checkpoint).
void truncate_log(const std::string& path, int64_t step) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  std::ifstream in(path);
  std::string line, kept;
  while (std::getline(in, line)) {
    try {
      auto j = nlohmann::json::parse(line);
      if (j.value("step", int64_t{-1}) <= step) kept += line + "\n";
    } catch (const std::exception&) {
      // a line cut by a kill: drop it
    }
  }
  write_file_atomic(path, kept.data(), kept.size());
}

// Hard-links last.safetensors as step-N.safetensors and removes the oldest beyond `keep`.
void keep_step_copy(const std::string& dir, const std::string& last, int64_t step, int keep) {
  if (keep <= 0) return;
  std::string copy = dir + "/step-" + std::to_string(step) + ".safetensors";
  std::error_code ec;
  fs::remove(copy, ec);
  fs::create_hard_link(last, copy, ec);
  if (ec) fs::copy_file(last, copy, fs::copy_options::overwrite_existing, ec);
  std::vector<std::pair<int64_t, std::string>> copies;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) == 0 && file_extension(name) == ".safetensors") {
      try {
        copies.emplace_back(std::stoll(name.substr(5)), e.path().string());
      } catch (const std::exception&) {
      }
    }
  }
  std::sort(copies.begin(), copies.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < copies.size(); ++i) fs::remove(copies[i].second, ec);
}

// Squared L2 norm of all gradients, as a 0-dim float64 tensor on the gradients' device (no host sync).
at::Tensor grad_sq_norm(const AdamW& opt) {
  std::vector<at::Tensor> grads;
  for (const auto& p : opt.params())
    if (p.value.grad().defined()) grads.push_back(p.value.grad());
  if (grads.empty()) return at::zeros({}, at::kDouble);
  std::vector<at::Tensor> norms = at::_foreach_norm(grads, 2);
  return at::stack(norms).to(at::kDouble).square().sum();
}

}  // namespace

std::vector<AdamW::Param> optimizer_params(DiffNet& model, const TrainConfig& cfg) {
  std::vector<AdamW::Param> params;
  const double filter_wd = model->config().filter_weight_decay;
  for (const auto& item : model->named_parameters(true)) {
    if (!item.value().requires_grad()) continue;
    const std::string& name = item.key();
    bool is_filter = name.rfind("disc.", 0) == 0 && name.size() > 6 && name.compare(name.size() - 6, 6, ".theta") == 0;
    const bool is_line = name.rfind(kLineContextPrefix, 0) == 0;
    params.push_back({name, item.value(), is_filter && filter_wd >= 0 ? filter_wd : cfg.weight_decay,
                      is_line ? cfg.line_lr_scale : 1.0});
  }
  return params;
}

std::map<std::string, at::Tensor> init_weights(const std::string& path) {
  SafeTensors st = load_safetensors(path);
  if (auto f = st.metadata.find("format"); f != st.metadata.end() && f->second == "diffnet-checkpoint")
    return read_checkpoint(path).model;  // checksum and names verified
  return std::move(st.tensors);
}

TrainSummary run_training(const TrainConfig& cfg_in, const ModelConfig& mcfg_in, const TrainOptions& opt) {
  if (opt.out.empty()) throw Error("train", "--out RUN_DIR is required");
  DistGroup* dist = opt.dist;
  const int rank = dist ? dist->rank() : 0, world = dist ? dist->world() : 1;
  const bool lead = rank == 0;           // reads and writes the run directory, logs
  const bool quiet = opt.quiet || !lead;  // the other ranks print only warnings and errors
  const std::string ck_dir = opt.out + "/checkpoints", ck_path = ck_dir + "/last.safetensors";
  TrainConfig cfg = cfg_in;
  ModelConfig mcfg = mcfg_in;
  CheckpointData ck;
  std::error_code ec;
  if (lead) {
    if (opt.resume) {
      if (!fs::exists(ck_path, ec)) throw Error(ck_path, "no checkpoint to resume from");
      ck = read_checkpoint(ck_path);
      cfg = train_config_from_json(ck.state.config.at("train"));
      mcfg = model_config_from_json(ck.state.config.at("model"));
    } else if (fs::exists(ck_path, ec)) {
      throw Error(opt.out, "already holds a run (checkpoints/last.safetensors): use --resume or another --out");
    }
  }
  if (opt.workers >= 0) cfg.workers = opt.workers;
  if (dist) {
    // Every rank trains rank 0's config (on --resume, the checkpoint's): a rank started with other flags
    // would silently train something else.
    const nlohmann::json mine = {{"model", to_json(mcfg)}, {"train", to_json(cfg)}};
    const nlohmann::json lead_cfg = nlohmann::json::parse(dist->share("config", mine.dump()));
    nlohmann::json a = lead_cfg, b = mine;
    a["train"].erase("workers");  // loader threads may differ per host
    b["train"].erase("workers");
    if (!opt.resume && a != b)
      throw Error("rank " + std::to_string(rank), "its model or training flags differ from rank 0's: start "
                                                  "every rank with the same command");
    const int workers = cfg.workers;
    cfg = train_config_from_json(lead_cfg.at("train"));
    mcfg = model_config_from_json(lead_cfg.at("model"));
    cfg.workers = workers;
  }
  validate_train_config(cfg);
  mcfg.validate();
  if (lead) {
    make_dirs(ck_dir);
    // A run killed while writing leaves "<file>.tmp.<pid>" behind: remove them now that the run is ours.
    const int stale = remove_stale_temp_files(ck_dir) + remove_stale_temp_files(opt.out);
    if (stale > 0 && !quiet) std::fprintf(stderr, "removed %d unfinished temp file(s) of a killed run\n", stale);
  }

  // Data.
  std::vector<DataSource> sources;
  for (const auto& spec : cfg.data) {
    sources.push_back(open_source(spec));
    if (cfg.validate && !opt.resume) validate_dataset(sources.back().items, !quiet);
    if (!quiet)
      std::fprintf(stderr, "data: %s  %zu images  weight %g\n", sources.back().path.c_str(),
                   sources.back().items.size(), sources.back().weight);
  }

  // Model and optimizer (the seed fixes the initialisation).
  torch::manual_seed(cfg.seed);
  DiffNet model(mcfg);
  if (!opt.resume && lead) {  // the other ranks receive rank 0's weights below
    if (!cfg.init.empty() && load_model_state_for_init(model, init_weights(cfg.init)) && !quiet)
      std::fprintf(stderr, "init: %s has no line context; that part starts at its initialisation\n",
                   cfg.init.c_str());
    if (!cfg.init_backbone.empty()) {
      int64_t n = import_convnextv2(model, cfg.init_backbone);
      if (!quiet) std::fprintf(stderr, "init: %lld backbone tensors from %s\n", static_cast<long long>(n),
                                   cfg.init_backbone.c_str());
    }
  }
  const at::Device device = parse_device(opt.device);
  model->to(device);
  if (device.is_cuda()) at::globalContext().setBenchmarkCuDNN(true);  // fixed crop size
  AdamW optim(optimizer_params(model, cfg), cfg.beta1, cfg.beta2, cfg.eps);
  TrainState state;
  state.config = {{"model", to_json(mcfg)}, {"train", to_json(cfg)}};
  state.world = world;
  state.export_fp16 = opt.export_fp16;
  if (opt.resume && lead) {
    restore_checkpoint(ck, model, optim);
    state.step = ck.state.step;
    state.export_fp16 = state.export_fp16 || ck.state.export_fp16;  // an interrupted run ends as started
    state.data_position = ck.state.data_position;
    if (!quiet) std::fprintf(stderr, "resume: step %lld from %s\n", static_cast<long long>(state.step), ck_path.c_str());
    if (ck.state.world != world)
      std::fprintf(stderr, "warning: the checkpoint was written by a run of %lld process(es), this one has %d: the "
                           "global batch and the order of the samples change from here on\n",
                   static_cast<long long>(ck.state.world), world);
  }
  if (dist) {
    // Identical starting point everywhere: rank 0's weights, buffers, optimizer state and position.
    std::vector<at::Tensor> tensors;
    for (auto& p : model->parameters()) tensors.push_back(p.detach());
    for (auto& b : model->buffers()) tensors.push_back(b);
    dist->broadcast(tensors, "the broadcast of the initial weights");
    if (opt.resume) {
      auto st = optim.state();
      std::vector<at::Tensor> ts;
      for (auto& [name, t] : st) ts.push_back(t);
      ts.push_back(at::tensor({state.step, state.data_position}, at::kLong));
      dist->broadcast(ts, "the broadcast of the optimizer state");
      state.step = ts.back()[0].item<int64_t>();
      state.data_position = ts.back()[1].item<int64_t>();
      if (!lead) optim.load_state(st);
    }
    if (!quiet)
      std::fprintf(stderr, "world: %d processes (%s), micro-batch %lld x %lld accumulation per rank: global batch %lld\n",
                   world, dist->backend().c_str(), static_cast<long long>(cfg.batch),
                   static_cast<long long>(cfg.accum), static_cast<long long>(cfg.batch * cfg.accum * world));
  }
  if (device.is_cpu()) {
    // The Linear layers' backend (model.h) and the convolutions' weight gradient (conv_grad.h) change the
    // float results a little, and each process would measure its own: a resumed run takes its checkpoint's,
    // and every rank takes rank 0's.
    std::string lb, cw;
    if (lead) {
      lb = opt.resume && !ck.state.linear_backend.empty() ? ck.state.linear_backend : linear_backend();
      // A checkpoint written before the choice existed had LibTorch's.
      cw = !opt.resume                          ? ops::conv_weight_grad()
           : ck.state.conv_weight_grad.empty() ? "aten"
                                               : ck.state.conv_weight_grad;
    }
    if (dist) {
      lb = dist->share("linear_backend", lb);
      cw = dist->share("conv_weight_grad", cw);
    }
    set_linear_backend(lb);
    ops::set_conv_weight_grad(cw);
    state.linear_backend = lb;
    state.conv_weight_grad = cw;
  }
  const std::string log_path = opt.out + "/log.jsonl";
  std::ofstream log;
  if (lead) {
    std::string text = state.config.dump(2) + "\n";
    write_file_atomic(opt.out + "/config.json", text.data(), text.size());
    if (opt.resume)
      truncate_log(log_path, state.step);
    else
      write_file_atomic(log_path, "", 0);
    log.open(log_path, std::ios::app);
    if (!log) throw Error(log_path, "cannot open for writing");
  }

  LoaderConfig lcfg;
  lcfg.size = cfg.size;
  lcfg.batch = cfg.batch;
  lcfg.seed = cfg.seed;
  lcfg.workers = cfg.workers;
  lcfg.prefetch_batches = cfg.prefetch;
  lcfg.worker_nice = cfg.worker_nice;
  lcfg.augment = cfg.augment;
  lcfg.quiet = opt.quiet;
  lcfg.rank = rank;
  lcfg.world = world;
  DataLoader loader(std::move(sources), lcfg, state.data_position);

  TrainSummary sum;
  sum.start_step = state.step;
  const int64_t end = opt.stop_after > 0 ? std::min(cfg.steps, state.step + opt.stop_after) : cfg.steps;
  Progress bar("train", end - state.step, quiet, opt.log_interval_s);
  model->train();
  const double t_begin = now_seconds();
  double wait_total = 0, wait_window = 0, time_window = 0;
  int bad_in_row = 0;
  while (state.step < end) {
    const double t0 = now_seconds();
    const double wait0 = loader.stats().wait_seconds;
    // The step's batches first: the pixel loss of every micro-batch (on every rank) is divided by one
    // shared normaliser, so the averaged gradient is that of one batch of batch * accum * world samples.
    std::vector<Batch> batches;
    double weight_sum = 0;
    for (int64_t a = 0; a < cfg.accum; ++a) {
      batches.push_back(loader.next_batch());
      weight_sum += seg_weight_sum(batches.back().mask, cfg.pos_weight);
    }
    if (dist) {
      at::Tensor ws = at::full({1}, weight_sum, at::kDouble);
      dist->sum(ws, "the loss normaliser's all-reduce at step " + std::to_string(state.step + 1));
      weight_sum = ws.item<double>();
      // Drop path: one stream per rank and step (ranks must not drop the same blocks; resumable).
      torch::manual_seed(Rng::derive(cfg.seed, 0x5EED, static_cast<uint64_t>(state.step * world + rank)).next_u64());
    }
    const double seg_norm = weight_sum / static_cast<double>(cfg.accum * world);
    // Losses stay on the device; one copy to the host per step decides and logs.
    at::Tensor sums = at::zeros({5}, at::TensorOptions().dtype(at::kDouble).device(device));
    for (Batch& b : batches) {
      at::Tensor mask = b.mask.to(device, /*non_blocking=*/true);
      LossParts lp;
      {
        AutocastGuard amp(device.type(), cfg.amp);
        DiffNetOutput out = model->forward(normalize_rgb(b.rgb.to(device, true)), b.dct.to(device, true),
                                           b.qt.to(device, true));
        lp = diffnet_loss(out, mask, cfg, seg_norm);
      }
      (lp.total / static_cast<double>(cfg.accum)).backward();
      sums += at::stack({lp.total.detach(), lp.seg.detach(), lp.cls.detach(), lp.fa.detach(),
                          lp.peak.detach()}).to(at::kDouble) /
              static_cast<double>(cfg.accum);
    }
    batches.clear();
    double allreduce_s = 0;
    if (dist) {  // gradients and the loss values: means over the ranks
      std::vector<at::Tensor> ts;
      for (const auto& p : optim.params()) ts.push_back(p.value.grad());
      ts.push_back(sums);
      const double ta = now_seconds();
      dist->average(ts, "the gradient all-reduce at step " + std::to_string(state.step + 1));
      allreduce_s = now_seconds() - ta;  // includes waiting for the slowest rank
      sum.allreduce_seconds += allreduce_s;
    }
    at::Tensor host = at::cat({sums, grad_sq_norm(optim).reshape({1}).to(device)}).cpu();
    const double* hv = host.data_ptr<double>();
    const double loss = hv[0], seg = hv[1], cls = hv[2], fa = hv[3], peak = hv[4];
    // A non-finite loss in any micro-batch makes the step's loss (and its gradients) non-finite.
    bool finite = std::isfinite(loss);
    double gnorm = finite ? std::sqrt(hv[5]) : NAN;
    if (!std::isfinite(gnorm)) finite = false;
    const double lr = lr_at(cfg, state.step);
    if (finite) {
      optim.step(lr);
      bad_in_row = 0;
    } else {
      ++sum.skipped_steps;
      ++bad_in_row;
      std::fprintf(stderr, "\nwarning: step %lld: non-finite loss or gradient, update skipped (%d in a row)\n",
                   static_cast<long long>(state.step + 1), bad_in_row);
      if (bad_in_row >= cfg.max_bad_steps)
        throw Error("training", "loss or gradients not finite for " + std::to_string(bad_in_row) +
                                    " steps in a row (at step " + std::to_string(state.step + 1) +
                                    "): lower --lr or check the data; the last checkpoint is intact");
    }
    optim.zero_grad();
    ++state.step;
    state.data_position = loader.position();

    const double dt = now_seconds() - t0, wait = loader.stats().wait_seconds - wait0;
    wait_total += wait;
    wait_window += wait;
    time_window += dt;
    const double ips = static_cast<double>(cfg.batch * cfg.accum * world) / std::max(dt, 1e-9);
    nlohmann::json rec = {{"step", state.step},       {"loss", finite ? loss : NAN}, {"seg_loss", seg},
                          {"cls_loss", cls},          {"lr", lr},                    {"grad_norm", gnorm},
                          {"images_per_s", ips},      {"data_wait", dt > 0 ? wait / dt : 0.0},
                          {"time", now_seconds() - t_begin}};
    if (!finite) rec["loss"] = nullptr;
    if (cfg.fa_weight > 0) rec["fa_loss"] = fa;
    if (cfg.peak_weight > 0) rec["peak_loss"] = peak;
    if (dist) rec["allreduce_s"] = allreduce_s;
    if (lead) {
      log << rec.dump() << "\n";
      log.flush();
    }
    sum.last_loss = loss;
    bar.step(1, "step " + std::to_string(state.step) + "/" + std::to_string(cfg.steps) + "  loss " +
                    fmt("%.4f", loss) + "  lr " + fmt("%.2e", lr) + "  " + fmt("%.2f", ips) + " img/s  wait " +
                    fmt("%.0f%%", 100.0 * wait_window / std::max(time_window, 1e-9)));
    if (time_window > 30) wait_window = time_window = 0;

    if (lead && (state.step % cfg.checkpoint_every == 0 || state.step == end)) {
      save_checkpoint(ck_path, model, optim, state);
      keep_step_copy(ck_dir, ck_path, state.step, cfg.keep_checkpoints);
    }
  }
  bar.finish("loss " + fmt("%.4f", sum.last_loss));
  const double wall = now_seconds() - t_begin;
  LoaderStats ls = loader.stats();
  sum.end_step = state.step;
  sum.images_per_second =
      wall > 0 ? static_cast<double>((sum.end_step - sum.start_step) * cfg.batch * cfg.accum * world) / wall : 0;
  sum.data_wait_share = wall > 0 ? wait_total / wall : 0;
  sum.bad_samples = ls.bad_samples;
  sum.sample_ms = ls.built > 0 ? 1000.0 * ls.build_seconds / static_cast<double>(ls.built) : 0;
  if (state.step == cfg.steps && lead) {
    sum.model_path = opt.out + "/model.safetensors";
    // train_size: the crop size, which predict/serve use as their default window R.
    std::map<std::string, std::string> meta = {{"train_steps", std::to_string(state.step)},
                                               {"train_size", std::to_string(cfg.size)},
                                               {"train_config", to_json(cfg).dump()}};
    save_model(model, sum.model_path, at::kFloat, meta);
    if (state.export_fp16) save_model(model, opt.out + "/model-fp16.safetensors", at::kHalf, meta);
  }
  if (dist) dist->barrier("the end of training");  // nobody leaves while rank 0 still writes
  return sum;
}

}  // namespace diffnet
