#include "diffnet/serve.h"

#include <ATen/Parallel.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "diffnet/common.h"
#include "diffnet/image_io.h"
#include "diffnet/report.h"
#include "serve/admission.h"
#include "serve/page.h"
#include "serve/request.h"

namespace diffnet {

namespace {

const char* status_text(int status) {
  switch (status) {
    case 400: return "bad request";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 413: return "upload too large";
    case 503: return "busy";
    case 500: return "internal error";
    default: return "error";
  }
}

void json_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", valid_utf8(message)}}.dump(), "application/json");
}

// One prediction by a slot's predictor at an upload's ?downscale (-1: the server's own --downscale), which
// the slot gets back afterwards.
Prediction predict_scaled(Predictor& p, int64_t downscale, const std::function<Prediction(Predictor&)>& run) {
  if (downscale < 0) return run(p);
  struct Restore {
    Predictor& p;
    int64_t f;
    ~Restore() { p.set_downscale(f); }
  } restore{p, p.options().downscale};
  p.set_downscale(downscale);
  return run(p);
}

// "1.5" for 1.5, "120" for 120: seconds as a person writes them.
std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// ?report=1: the HTML report of `diffnet predict --report` for one upload (all its pages), made in a
// private temporary folder (removed afterwards) and returned as text.
class UploadReport {
 public:
  void add(const Prediction& p, const Predictor& predictor, const OverlayOptions& overlay, const at::Tensor& drawn) {
    if (!html_) {
      dir_.emplace("diffnet-report");
      ReportOptions ro;
      ro.model = predictor.model().source;
      ro.threshold = predictor.page_threshold();
      ro.overlay = overlay;
      html_ = std::make_unique<HtmlReport>(dir_->path() + "/report.html", ro);
    }
    html_->add(p, drawn);
  }
  std::string finish() {
    if (!html_) return "";
    html_->finish();
    const std::vector<uint8_t> bytes = read_file(dir_->path() + "/report.html");
    return std::string(bytes.begin(), bytes.end());
  }

 private:
  // Members go in reverse order: the report (an unfinished one removes its own temp files), then the folder.
  std::optional<TempDir> dir_;
  std::unique_ptr<HtmlReport> html_;
};

}  // namespace

int ServeOptions::slot_threads() const { return threads_per_slot > 0 ? threads_per_slot : at::get_num_threads(); }

struct Server::Impl {
  std::vector<Predictor> slots;  // one predictor (model copy) per inference slot
  ServeOptions opt;
  serve::Admission admission;
  std::atomic<double> mean_inference_s{1.0};  // running mean, for Retry-After
  httplib::Server http;
  int port = -1;

  Impl(std::vector<Predictor> p, ServeOptions o)
      : slots(std::move(p)), opt(std::move(o)),
        admission(int(slots.size()), opt.max_queue, opt.max_queued_pixels) {}

  const Predictor& any() const { return slots.front(); }

  // 503 with Retry-After: the expected wait for the work ahead, at least 1 s.
  void busy(httplib::Response& res, const serve::Admission::Ticket& t) {
    const double ahead = double(t.waiting_ahead + int(slots.size()));
    const int retry = std::max(1, int(std::ceil(ahead * mean_inference_s.load() / double(slots.size()))));
    res.set_header("Retry-After", std::to_string(retry));
    json_error(res, 503, std::string("busy (") + serve::outcome_name(t.outcome) + ": " + std::to_string(t.waiting_ahead) +
                             " request(s) waiting); retry in " + std::to_string(retry) + " s");
  }

  // The body is read here through a content reader, whatever its Content-Type: curl's
  // `--data-binary @page.jpg` sends application/x-www-form-urlencoded, which the HTTP library would
  // otherwise cap at 8 KB. The upload limit (--max-upload-mb, 413) applies either way.
  void predict(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    // One deadline for the whole request: receiving the body, then waiting for a slot.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(opt.request_timeout_s * 1e3));
    bool late = false;
    std::string body;
    const size_t limit = opt.max_upload_bytes;
    const std::string too_large = "upload too large (limit " + std::to_string(limit) + " bytes, --max-upload-mb)";
    if (req.has_header("Content-Length") && std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) > limit)
      return json_error(res, 413, too_large);
    size_t received = 0;
    // Appends a chunk while the upload stays within the limit and the deadline; false stops reading.
    auto take = [&](std::string& into, const char* data, size_t n) {
      if ((received += n) > limit) return false;
      if (std::chrono::steady_clock::now() > deadline) {
        late = true;
        return false;
      }
      into.append(data, n);
      return true;
    };
    std::vector<httplib::MultipartFormData> parts;
    if (req.is_multipart_form_data())
      reader([&](const httplib::MultipartFormData& part) { parts.push_back(part); return true; },
             [&](const char* data, size_t n) { return take(parts.back().content, data, n); });
    else
      reader([&](const char* data, size_t n) { return take(body, data, n); });
    if (received > limit) return json_error(res, 413, too_large);
    if (late) {
      return json_error(res, 408, "request body not received within " + fmt_seconds(opt.request_timeout_s) +
                                      " s (--request-timeout)");
    }
    std::vector<serve::UploadPart> uploads;
    for (auto& p : parts) uploads.push_back({std::move(p.name), std::move(p.filename), std::move(p.content)});
    const bool has_name = req.has_param("name"), has_maps = req.has_param("maps"),
               has_report = req.has_param("report"), has_downscale = req.has_param("downscale");
    const std::string name_param = has_name ? req.get_param_value("name") : "";
    const std::string maps_param = has_maps ? req.get_param_value("maps") : "";
    const std::string report_param = has_report ? req.get_param_value("report") : "";
    const std::string downscale_param = has_downscale ? req.get_param_value("downscale") : "";
    serve::PredictRequest pr =
        serve::parse_predict_request(req.is_multipart_form_data(), std::move(uploads), std::move(body),
                                     has_name ? &name_param : nullptr, has_maps ? &maps_param : nullptr,
                                     has_report ? &report_param : nullptr, any().options().max_pixels,
                                     has_downscale ? &downscale_param : nullptr);
    if (pr.status != 0) return json_error(res, pr.status, pr.error);
    if (pr.document) return predict_document(pr, res, deadline);
    try {
      const double t0 = now_seconds();
      nlohmann::json record;
      UploadReport report;
      const int status = run_page(pr.info.width * pr.info.height, deadline, res,
                                  [&](Predictor& p) {
                                    return predict_scaled(p, pr.downscale,
                                                          [&](Predictor& q) { return q.predict_bytes(pr.bytes, pr.name); });
                                  },
                                  pr.maps, record,
                                  /*with_image=*/false, pr.report ? &report : nullptr);
      if (status != 0) return;  // busy: answered
      mean_inference_s = 0.8 * mean_inference_s.load() + 0.2 * (now_seconds() - t0);
      if (pr.report) record["report_html"] = report.finish();
      res.set_content(record.dump(), "application/json");
    } catch (const Error& e) {
      json_error(res, 400, e.what());
    }
  }

  // Runs one page in a slot admitted for `pixels`; fills `record` (with maps when asked, and with the
  // page's own pixels as "image_png" when `with_image`: a browser cannot show a PDF or TIFF page) and adds
  // the page to `report` when given. Returns 0, or 503 after answering `res` when no slot was granted.
  int run_page(int64_t pixels, std::chrono::steady_clock::time_point deadline, httplib::Response& res,
               const std::function<Prediction(Predictor&)>& predict, bool maps, nlohmann::json& record,
               bool with_image, UploadReport* report) {
    const serve::Admission::Ticket ticket = admission.acquire(pixels, deadline);
    if (ticket.outcome != serve::Admission::Outcome::kRun) {
      busy(res, ticket);
      return 503;
    }
    struct Release {
      serve::Admission& a;
      const serve::Admission::Ticket& t;
      ~Release() { a.release(t); }
    } release{admission, ticket};
    Predictor& predictor = slots[size_t(ticket.slot)];
    if (opt.threads_per_slot > 0) set_this_thread_threads(opt.threads_per_slot);  // this connection thread
    Prediction p = predict(predictor);
    record = prediction_to_json(p);
    OverlayOptions ov;
    ov.floor = predictor.options().threshold;
    const at::Tensor drawn = maps || report ? render_overlay(p.rgb, p.prob, p.regions, ov) : at::Tensor();
    if (report) report->add(p, predictor, ov, drawn);
    if (maps) {
      record["maps"] = {{"prob_png", base64_encode(encode_png(prob_to_u8(p.prob)))},
                        {"overlay_png", base64_encode(encode_png(drawn))}};
      if (with_image) record["maps"]["image_png"] = base64_encode(encode_png(p.rgb));
    }
    return 0;
  }

  // A PDF or TIFF upload: {"file", "page_count", "pages": [record per page]}. A page that fails is a 400
  // naming it; no slot for a page is a 503 for the whole request (the client retries the document).
  void predict_document(const serve::PredictRequest& pr, httplib::Response& res,
                        std::chrono::steady_clock::time_point deadline) {
    try {
      DocumentOptions dopt = opt.documents;
      dopt.max_pixels = any().options().max_pixels;
      DocumentReader doc(pr.bytes, pr.name, dopt);
      nlohmann::json pages = nlohmann::json::array();
      UploadReport report;
      for (int64_t i = 0; i < doc.pages(); ++i) {
        const double t0 = now_seconds();
        DocumentPage page = doc.page(i);  // decoded or rendered outside the slots
        int64_t pixels = 0;
        if (page.rgb.defined()) {
          pixels = page.rgb.size(0) * page.rgb.size(1);
        } else {
          const ImageInfo info = read_image_info_bytes(page.encoded, page.name);
          pixels = info.width * info.height;
        }
        nlohmann::json record;
        auto one = [&](Predictor& p) {
          return predict_scaled(p, pr.downscale, [&](Predictor& q) { return q.predict_page(page); });
        };
        if (run_page(pixels, deadline, res, one, pr.maps, record,
                     /*with_image=*/true, pr.report ? &report : nullptr) != 0)
          return;
        mean_inference_s = 0.8 * mean_inference_s.load() + 0.2 * (now_seconds() - t0);
        pages.push_back(std::move(record));
      }
      nlohmann::json out = {{"file", valid_utf8(pr.name)}, {"page_count", doc.pages()}, {"pages", std::move(pages)}};
      if (pr.report) out["report_html"] = report.finish();
      res.set_content(out.dump(), "application/json");
    } catch (const Error& e) {
      json_error(res, 400, e.what());
    }
  }

  void routes() {
    http.set_payload_max_length(opt.max_upload_bytes);
    // Connection threads are many more than inference slots: clients that send slowly, idle keep-alive
    // connections and requests waiting for a slot each hold one, and /health and the page must still
    // find one free. Idle connections are dropped after the timeouts.
    const size_t threads = size_t(std::max(opt.connection_threads, int(slots.size()) + opt.max_queue + 4));
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_read_timeout(opt.read_timeout_s, 0);
    http.set_write_timeout(opt.read_timeout_s, 0);
    http.set_keep_alive_timeout(opt.keep_alive_timeout_s);
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const serve::Admission::Stats st = admission.stats();
      nlohmann::json j = {{"status", "ok"},
                          {"weights", valid_utf8(any().model().source)},
                          {"window", any().window()},
                          {"calibrated", any().model().calibration.has_value()},
                          {"workers", slots.size()},
                          {"threads_per_slot", opt.slot_threads()},
                          {"precision", any().precision()},
                          {"running", st.running},
                          {"waiting", st.waiting}};
      res.set_content(j.dump(), "application/json");
    });
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(serve::kIndexPage, "text/html; charset=utf-8");
    });
    http.Post("/predict", [this](const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader& reader) { predict(req, res, reader); });
    http.Get("/predict", [](const httplib::Request&, httplib::Response& res) {
      res.set_header("Allow", "POST");
      json_error(res, 405, "use POST with the image as the body or a multipart field 'file'");
    });
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

namespace {
std::vector<Predictor> one(Predictor p) {
  std::vector<Predictor> v;
  v.push_back(std::move(p));
  return v;
}
}  // namespace

Server::Server(Predictor predictor, ServeOptions options) : Server(one(std::move(predictor)), std::move(options)) {}

Server::Server(std::vector<Predictor> slots, ServeOptions options) {
  if (slots.empty()) throw Error("serve", "no inference slot");
  if (options.max_queue < 0) throw Error("max_queue", "must be >= 0");
  if (!(options.request_timeout_s > 0)) throw Error("request_timeout_s", "must be > 0");
  if (options.read_timeout_s < 1) throw Error("read_timeout_s", "must be >= 1");
  if (options.keep_alive_timeout_s < 1) throw Error("keep_alive_timeout_s", "must be >= 1");
  impl_ = std::make_unique<Impl>(std::move(slots), std::move(options));
  impl_->routes();
}

Server::~Server() { stop(); }

void Server::bind() {
  if (impl_->port >= 0) return;
  const ServeOptions& o = impl_->opt;
  if (o.port < 0 || o.port > 65535) throw Error("port", "must be in 0..65535");
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
  if (!impl_) return;
  impl_->admission.stop();
  impl_->http.stop();
}

}  // namespace diffnet
