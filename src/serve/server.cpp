#include "diffnet/serve.h"

#include <httplib.h>

#include <cstdio>
#include <mutex>

#include "diffnet/common.h"
#include "diffnet/image_io.h"
#include "serve/page.h"

namespace diffnet {

std::string base64_encode(const std::vector<uint8_t>& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t v = uint32_t(bytes[i]) << 16 | uint32_t(bytes[i + 1]) << 8 | bytes[i + 2];
    for (int s : {18, 12, 6, 0}) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == bytes.size()) {
    uint32_t v = uint32_t(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    uint32_t v = uint32_t(bytes[i]) << 16 | uint32_t(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

namespace {

const char* status_text(int status) {
  switch (status) {
    case 400: return "bad request";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 413: return "upload too large";
    case 500: return "internal error";
    default: return "error";
  }
}

void json_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", message}}.dump(), "application/json");
}

}  // namespace

struct Server::Impl {
  Predictor predictor;
  ServeOptions opt;
  std::mutex predict_mutex;  // one inference at a time: the model is shared
  httplib::Server http;
  int port = -1;

  Impl(Predictor p, ServeOptions o) : predictor(std::move(p)), opt(std::move(o)) {}

  void predict(const httplib::Request& req, httplib::Response& res) {
    std::string name = "upload";
    std::string body;
    if (req.is_multipart_form_data()) {
      if (!req.has_file("file")) return json_error(res, 400, "multipart upload needs a field named 'file'");
      httplib::MultipartFormData f = req.get_file_value("file");
      body = std::move(f.content);
      if (!f.filename.empty()) name = f.filename;
    } else {
      body = req.body;
      if (req.has_param("name")) name = req.get_param_value("name");
    }
    if (body.empty()) return json_error(res, 400, "empty upload: send the image as the body or a multipart field 'file'");
    const bool maps = req.has_param("maps") && req.get_param_value("maps") != "0";
    std::vector<uint8_t> bytes(body.begin(), body.end());
    try {
      nlohmann::json record;
      std::vector<uint8_t> prob_png, overlay_png;
      {
        std::lock_guard<std::mutex> lock(predict_mutex);
        Prediction p = predictor.predict_bytes(bytes, name);
        record = prediction_to_json(p, predictor.options().threshold);
        if (maps) {
          prob_png = encode_png(prob_to_u8(p.prob));
          OverlayOptions ov;
          ov.floor = predictor.options().threshold;
          overlay_png = encode_png(render_overlay(p.rgb, p.prob, p.regions, ov));
        }
      }
      if (maps) record["maps"] = {{"prob_png", base64_encode(prob_png)}, {"overlay_png", base64_encode(overlay_png)}};
      res.set_content(record.dump(), "application/json");
    } catch (const Error& e) {
      json_error(res, 400, e.what());
    }
  }

  void routes() {
    http.set_payload_max_length(opt.max_upload_bytes);
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      nlohmann::json j = {{"status", "ok"},
                          {"weights", predictor.model().source},
                          {"window", predictor.window()},
                          {"calibrated", predictor.model().calibration.has_value()}};
      res.set_content(j.dump(), "application/json");
    });
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(serve::kIndexPage, "text/html; charset=utf-8");
    });
    http.Post("/predict", [this](const httplib::Request& req, httplib::Response& res) { predict(req, res); });
    // Errors produced by httplib itself (404, 413, ...) get a JSON body too; ours already have one.
    httplib::Server::HandlerWithResponse on_error = [](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      json_error(res, res.status, status_text(res.status));
      return httplib::Server::HandlerResponse::Handled;
    };
    http.set_error_handler(on_error);
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      std::fprintf(stderr, "serve: internal error: %s\n", what.c_str());
      json_error(res, 500, "internal error: " + what);
    });
    http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
      std::fprintf(stderr, "serve: %s %s -> %d (%zu bytes in)\n", req.method.c_str(), req.path.c_str(), res.status,
                   req.body.size());
    });
  }
};

Server::Server(Predictor predictor, ServeOptions options)
    : impl_(std::make_unique<Impl>(std::move(predictor), std::move(options))) {
  impl_->routes();
}

Server::~Server() { stop(); }

void Server::bind() {
  if (impl_->port >= 0) return;
  const ServeOptions& o = impl_->opt;
  if (o.port < 0 || o.port > 65535) throw Error("--port", "must be in 0..65535");
  int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host)
                         : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) throw Error(o.host + ":" + std::to_string(o.port), "cannot bind (address in use or not local?)");
  impl_->port = port;
}

int Server::port() const { return impl_->port; }

void Server::listen() {
  bind();
  impl_->http.listen_after_bind();
}

void Server::stop() {
  if (impl_) impl_->http.stop();
}

}  // namespace diffnet
