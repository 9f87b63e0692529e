// `diffnet serve`: an HTTP service around one shared Predictor (cpp-httplib).
//   POST /predict   image bytes as the body, or multipart/form-data with a field "file";
//                   ?maps=1 adds base64 PNGs of the probability map and the overlay. Returns the JSON
//                   record of `diffnet predict` (file = the upload's name, or "upload").
//   GET  /health    {"status": "ok", "weights": ..., "window": R}
//   GET  /          a minimal HTML page: upload an image, see the overlay and the record.
// Errors are JSON {"error": "<message>"} with 400 (bad image/request), 404, 413 (too large), 500.
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
};

// Standard base64 (RFC 4648, with '=' padding).
std::string base64_encode(const std::vector<uint8_t>& bytes);

class Server {
 public:
  // The predictor is shared by all requests and used under a mutex (one inference at a time).
  Server(Predictor predictor, ServeOptions options);
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
