// `diffnet serve`: an HTTP service around one shared Predictor (cpp-httplib).
//   POST /predict   image bytes as the body, or multipart/form-data with a field "file";
//                   ?maps=1 adds base64 PNGs of the probability map and the overlay. Returns the JSON
//                   record of `diffnet predict` (file = the upload's name, or "upload").
//   GET  /health    {"status": "ok", "weights": ..., "window": R, "workers", "running", "waiting"}
//   GET  /          a minimal HTML page: upload an image, see the overlay and the record.
// Errors are JSON {"error": "<message>"} with 400 (bad image/request), 404, 413 (too large), 500, and
// 503 + Retry-After when the inference queue is full, its pixel budget is spent or a request waited longer
// than its deadline. Inference runs in `workers` slots behind a bounded FIFO queue (src/serve/admission.h);
// connections are served by many more threads, with read and keep-alive timeouts, so slow or idle clients
// and queued requests never hold up /health or the page.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "diffnet/predict.h"

namespace diffnet {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                              // 0: any free port (see Server::port())
  size_t max_upload_bytes = 32u * 1024 * 1024;  // larger bodies get 413 (pixel limit: PredictOptions)
  int max_queue = 8;                            // requests that may wait for a slot; more get 503
  int64_t max_queued_pixels = 200'000'000;      // pixels of running + waiting requests; more get 503
  // Whole-request deadline from the moment the headers are in: the body must have arrived by then (else
  // 408: a client trickling its upload cannot hold a connection thread) and a slot been found (else 503).
  double request_timeout_s = 120;
  int read_timeout_s = 10;                      // a client silent this long while sending is dropped
  int keep_alive_timeout_s = 5;                 // an idle keep-alive connection is closed after this
  int connection_threads = 64;                  // at least workers + max_queue + 4
  // Compute threads of each inference slot while it runs a page (0: the process's count). Slots that run
  // at once share the cores: `diffnet serve --workers N` gives each max(1, threads / N).
  int threads_per_slot = 0;
  // The compute threads a slot runs a page with: threads_per_slot, or the process's count when 0.
  int slot_threads() const;
  // PDF/TIFF uploads: one record per page, {"file", "pages": [...]}; each page is admitted (and its pixels
  // limited: PredictOptions::max_pixels) on its own. More pages than documents.max_pages get 400.
  DocumentOptions documents = [] {
    DocumentOptions d;
    d.max_pages = 50;
    return d;
  }();
};

class Server {
 public:
  // One inference slot.
  Server(Predictor predictor, ServeOptions options);
  // One slot per predictor (each with its own model: `diffnet serve --workers N`).
  Server(std::vector<Predictor> slots, ServeOptions options);
  ~Server();

  // Binds host:port (port 0: an ephemeral one); throws Error when the address cannot be bound.
  void bind();
  // The bound port (valid after bind()).
  int port() const;
  // Serves until stop() is called (blocking). Calls bind() first if needed.
  void listen();
  // Stops listen() from another thread; safe to call more than once.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace diffnet
