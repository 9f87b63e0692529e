// diffnet serve [--host H] [--port P] [--weights W]: HTTP service (POST /predict, GET /health, GET /).
#include <ATen/Parallel.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "diffnet/common.h"
#include "diffnet/serve.h"

namespace diffnet::cli {
namespace {

struct ServeCli {
  std::string weights;
  bool random_weights = false;
  ServeOptions serve;
  PredictOptions predict;
  double max_upload_mb = 32;
  int workers = 1;
  double max_queued_mpix = 200;
};

Server* g_server = nullptr;
void on_signal(int) {
  if (g_server) g_server->stop();
}

void run(ServeCli& o) {
  if (!(o.max_upload_mb > 0)) throw Error("--max-upload-mb", "must be > 0");
  o.serve.max_upload_bytes = size_t(o.max_upload_mb * 1024 * 1024);
  if (o.workers < 1 || o.workers > 64) throw Error("--workers", "must be in 1..64");
  if (!(o.max_queued_mpix > 0)) throw Error("--max-queued-mpix", "must be > 0");
  o.serve.max_queued_pixels = int64_t(o.max_queued_mpix * 1e6);
  // Slots busy at once must not each take every core (a parallel region waits for its slowest thread).
  if (o.workers > 1) o.serve.threads_per_slot = std::max(1, at::get_num_threads() / o.workers);
  std::vector<Predictor> slots;
  LoadedModel loaded = choose_weights(o.weights, o.random_weights);  // read once, copied per slot
  for (int i = 1; i < o.workers; ++i) slots.emplace_back(copy_model(loaded), o.predict);
  slots.emplace_back(std::move(loaded), o.predict);
  Server server(std::move(slots), o.serve);
  server.bind();
  std::fprintf(stderr,
               "serve: listening on http://%s:%d/ (POST /predict, GET /health); %d inference slot(s) of %d "
               "thread(s), up to %d waiting; Ctrl-C stops\n",
               o.serve.host.c_str(), server.port(), o.workers,
               o.serve.slot_threads(), o.serve.max_queue);
  g_server = &server;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  server.listen();
  g_server = nullptr;
  std::fprintf(stderr, "serve: stopped\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeCli>();
  o->predict.max_pixels = 40'000'000;
  CLI::App* sub = app.add_subcommand("serve", "HTTP service: POST an image (or a PDF/TIFF) to /predict, get the JSON record (one per page)");
  sub->add_option("--host", o->serve.host, "Address to listen on")->capture_default_str();
  sub->add_option("--port", o->serve.port, "TCP port (0: any free port)")->capture_default_str();
  sub->add_option("-w,--weights", o->weights,
                  "Weights (.safetensors); default $DIFFNET_WEIGHTS, else the installed or the source tree's weights/diffnet-atto.safetensors");
  sub->add_flag("--random-weights", o->random_weights,
                "Use an untrained model instead of weights (timing and tests only: results are meaningless)");
  sub->add_option("--max-upload-mb", o->max_upload_mb, "Largest accepted upload (MiB); larger gets 413")
      ->capture_default_str();
  sub->add_option("--max-pixels", o->predict.max_pixels, "Largest accepted image (pixels); larger gets 400")
      ->capture_default_str();
  sub->add_option("--max-pages", o->serve.documents.max_pages, "Most pages of an uploaded PDF/TIFF; more gets 400")
      ->capture_default_str();
  sub->add_option("--pdf-dpi", o->serve.documents.pdf_dpi,
                  "Resolution of rendered PDF pages (a page that is one embedded JPEG is analysed as that JPEG)")
      ->capture_default_str();
  sub->add_option("--workers", o->workers,
                  "Inference slots, each with its own copy of the model (memory: see docs/serve.md)")
      ->capture_default_str();
  sub->add_option("--max-queue", o->serve.max_queue, "Requests that may wait for a slot; more get 503 + Retry-After")
      ->capture_default_str();
  sub->add_option("--max-queued-mpix", o->max_queued_mpix,
                  "Megapixels of running + waiting requests; more get 503 (admission by cost)")
      ->capture_default_str();
  sub->add_option("--request-timeout", o->serve.request_timeout_s, "Whole-request deadline (s): the upload must have arrived by then (else 408) and a slot been found (else 503)")
      ->capture_default_str();
  sub->add_option("--read-timeout", o->serve.read_timeout_s, "Drop a client silent this long while sending (s)")
      ->capture_default_str();
  sub->add_option("--keep-alive-timeout", o->serve.keep_alive_timeout_s, "Close idle keep-alive connections after (s)")
      ->capture_default_str();
  sub->add_option("--connection-threads", o->serve.connection_threads, "Threads serving connections")
      ->capture_default_str();
  sub->add_option("--window", o->predict.window, "Window size R (multiple of 32); default: the weights' train_size, else 512");
  sub->add_option("--stride", o->predict.stride, "Window stride (multiple of 8, <= R); default R/2");
  sub->add_option("--batch", o->predict.batch, kBatchHelp)->capture_default_str();
  sub->add_option("--refine", o->predict.refine, kRefineHelp);
  sub->add_option("--refine-core", o->predict.refine_core, kRefineCoreHelp)->capture_default_str();
  add_downscale_option(sub, o->predict.downscale);
  sub->add_option("--precision", o->predict.precision, kPrecisionHelp)->capture_default_str();
  sub->add_option("--threshold", o->predict.threshold, "Pixel threshold: regions are p > this (and the overlay's floor)")
      ->capture_default_str();
  sub->add_option("--page-threshold", o->predict.page_threshold,
                  "Decision: tampered when the page score is above this; default the weights' (docs/eval.md)");
  sub->callback([o] { run(*o); });
}

}  // namespace diffnet::cli
