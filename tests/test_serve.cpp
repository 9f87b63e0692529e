// `diffnet serve`: a server on an ephemeral port in a thread, exercised with httplib's client.
#include <ATen/Parallel.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <regex>
#include <thread>

#include "diffnet/common.h"
#include "diffnet/image_io.h"
#include "diffnet/report.h"
#include "diffnet/serve.h"
#include "eval_testing.h"
#include "serve/admission.h"
#include "testing.h"

using namespace diffnet;

namespace {

// Independent base64 decoder (RFC 4648) for checking the maps.
std::vector<uint8_t> base64_decode(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::vector<uint8_t> out;
  uint32_t buf = 0;
  int bits = 0;
  for (char c : s) {
    int v = val(c);
    if (v < 0) break;  // '=' padding ends the data
    buf = buf << 6 | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(uint8_t(buf >> bits));
    }
  }
  return out;
}

ServeOptions test_options(size_t max_upload) {
  ServeOptions o;
  o.port = 0;
  o.max_upload_bytes = max_upload;
  return o;
}

struct RunningServer {
  Server server;
  std::thread thread;
  explicit RunningServer(size_t max_upload) : RunningServer(test_options(max_upload)) {}
  explicit RunningServer(const ServeOptions& o, const PredictOptions& po = PredictOptions{})
      : server(Predictor(load_weights(testutil::tiny_model().path), po), o) {
    server.bind();
    thread = std::thread([this] { server.listen(); });
  }
  ~RunningServer() {
    server.stop();
    thread.join();
  }
};

nlohmann::json body_json(const httplib::Result& r) { return nlohmann::json::parse(r->body); }

// GET /health until the server answers (listen() starts in another thread).
httplib::Result wait_health(httplib::Client& cli) {
  auto health = cli.Get("/health");
  for (int i = 0; i < 100 && !health; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    health = cli.Get("/health");
  }
  return health;
}

// A raw TCP client on 127.0.0.1:port (for clients that misbehave); -1 on failure. Reads time out after 10 s.
int raw_connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

// An inference slot's thread count (serve --workers N gives each a share of the cores) is reported by
// /health, holds on the connection thread that runs the page, and leaves the process's count alone.
TEST(Serve, SlotThreadsAreTheSlotsOwn) {
  const int process = at::get_num_threads();
  ServeOptions o = test_options(200 * 1024);
  o.threads_per_slot = 1;
  RunningServer rs(o);
  httplib::Client cli("127.0.0.1", rs.server.port());
  cli.set_read_timeout(120, 0);
  auto health = wait_health(cli);
  ASSERT_TRUE(health);
  EXPECT_EQ(body_json(health)["threads_per_slot"], 1);
  const std::vector<uint8_t> png = encode_png(testutil::test_page(50, 90, 21));
  auto r = cli.Post("/predict", reinterpret_cast<const char*>(png.data()), png.size(), "image/png");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Predictor local(load_weights(testutil::tiny_model().path), PredictOptions{});
  EXPECT_NEAR(body_json(r)["image_score"].get<double>(), local.predict_bytes(png, "upload").image_score, 1e-5);
  EXPECT_EQ(at::get_num_threads(), process);
  // Without the option a slot runs the process's count.
  RunningServer plain(200 * 1024);
  httplib::Client cli2("127.0.0.1", plain.server.port());
  auto h2 = wait_health(cli2);
  ASSERT_TRUE(h2);
  EXPECT_EQ(body_json(h2)["threads_per_slot"], process);
  EXPECT_EQ(body_json(h2)["precision"], "f32");
}

// /health says which precision the slots run (what --precision auto chose at start-up), as records do.
TEST(Serve, HealthReportsThePrecision) {
  PredictOptions po;
  po.precision = "bf16";
  RunningServer rs(test_options(200 * 1024), po);
  httplib::Client cli("127.0.0.1", rs.server.port());
  cli.set_read_timeout(120, 0);
  auto health = wait_health(cli);
  ASSERT_TRUE(health);
  EXPECT_EQ(body_json(health)["precision"], "bf16");
  const std::vector<uint8_t> png = encode_png(testutil::test_page(50, 90, 22));
  auto r = cli.Post("/predict", reinterpret_cast<const char*>(png.data()), png.size(), "image/png");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_json(r)["precision"], "bf16");
}

TEST(Serve, PredictHealthPageAndErrors) {
  RunningServer rs(200 * 1024);
  ASSERT_GT(rs.server.port(), 0);
  httplib::Client cli("127.0.0.1", rs.server.port());
  cli.set_read_timeout(120, 0);
  auto health = wait_health(cli);
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(body_json(health)["status"], "ok");
  EXPECT_EQ(body_json(health)["window"], 64);

  auto page = cli.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<form"), std::string::npos);
  EXPECT_NE(page->body.find("/predict"), std::string::npos);
  // The page's legend (colour ramp from the threshold, boxes = peak p) and the calibrated/uncalibrated note.
  EXPECT_NE(page->body.find("id=\"legend\""), std::string::npos);
  EXPECT_NE(page->body.find("score_kind"), std::string::npos);
  // A page the server warns is a very fine scan can be checked again at a quarter of the size.
  EXPECT_NE(page->body.find("id=\"rescale\""), std::string::npos);
  EXPECT_NE(page->body.find("'&downscale=' + job.downscale"), std::string::npos);
  EXPECT_EQ(body_json(health)["calibrated"], false);

  // Raw body: the record of `diffnet predict`, equal to an in-process prediction of the same bytes.
  const std::vector<uint8_t> png = encode_png(testutil::test_page(50, 90, 21));
  auto r = cli.Post("/predict", reinterpret_cast<const char*>(png.data()), png.size(), "image/png");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  nlohmann::json j = body_json(r);
  EXPECT_EQ(j["file"], "upload");
  EXPECT_EQ(j["width"], 90);
  EXPECT_EQ(j["height"], 50);
  EXPECT_FALSE(j.contains("maps"));
  Predictor local(load_weights(testutil::tiny_model().path), PredictOptions{});
  Prediction want = local.predict_bytes(png, "upload");
  EXPECT_NEAR(j["image_score"].get<double>(), want.image_score, 1e-9);
  EXPECT_EQ(j["decision"], want.decision);
  EXPECT_EQ(j["score_kind"], "uncalibrated");

  // ?maps=1: base64 PNGs of the map and the overlay at the image size.
  r = cli.Post("/predict?maps=1&name=doc.png", reinterpret_cast<const char*>(png.data()), png.size(), "image/png");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  j = body_json(r);
  EXPECT_EQ(j["file"], "doc.png");
  at::Tensor prob = decode_mask_bytes(base64_decode(j["maps"]["prob_png"]), "prob");
  EXPECT_EQ(prob.sizes(), (std::vector<int64_t>{50, 90}));
  EXPECT_EQ(testutil::max_abs_diff(prob, prob_to_u8(want.prob)), 0.0);
  at::Tensor overlay = decode_image_bytes(base64_decode(j["maps"]["overlay_png"]), "overlay");
  EXPECT_EQ(overlay.sizes(), (std::vector<int64_t>{50, 90, 3}));
  // The overlay is the one predict draws (floor = the threshold): identical bytes.
  OverlayOptions ov;
  ov.floor = 0.5;
  EXPECT_EQ(testutil::max_abs_diff(overlay, render_overlay(want.rgb, want.prob, want.regions, ov)), 0.0);

  // ?downscale=2: this upload runs at half size, as a local predictor set to 2 runs it; the slot's own
  // setting (auto, the default: this small page at full size) is back for the next upload. ?downscale=auto is
  // that setting asked for; anything but auto or a factor 1..8 is a 400.
  r = cli.Post("/predict?downscale=2", reinterpret_cast<const char*>(png.data()), png.size(), "image/png");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  j = body_json(r);
  PredictOptions half;
  half.downscale = 2;
  const Prediction want_half = Predictor(load_weights(testutil::tiny_model().path), half).predict_bytes(png, "upload");
  EXPECT_EQ(j["downscale"], 2);
  EXPECT_EQ(j["downscale_rule"], "fixed");
  EXPECT_EQ(j["width"], 90);
  EXPECT_NEAR(j["image_score"].get<double>(), want_half.image_score, 1e-9);
  EXPECT_NE(want_half.image_score, want.image_score) << "the test needs the two scales to differ";
  r = cli.Post("/predict", reinterpret_cast<const char*>(png.data()), png.size(), "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(body_json(r)["downscale"], 1);
  EXPECT_EQ(body_json(r)["downscale_rule"], "auto");
  EXPECT_NEAR(body_json(r)["image_score"].get<double>(), want.image_score, 1e-9);
  r = cli.Post("/predict?downscale=auto", reinterpret_cast<const char*>(png.data()), png.size(), "image/png");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(body_json(r)["downscale_rule"], "auto");
  EXPECT_NEAR(body_json(r)["image_score"].get<double>(), want.image_score, 1e-9);
  for (const char* bad : {"9", "0", "x", "22", "AUTO", ""}) {
    r = cli.Post(std::string("/predict?downscale=") + bad, reinterpret_cast<const char*>(png.data()), png.size(),
                 "image/png");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_NE(body_json(r)["error"].get<std::string>().find("downscale"), std::string::npos) << r->body;
  }

  // Multipart field "file" (a JPEG: DCT from the file).
  const std::vector<uint8_t> jpeg = encode_jpeg(testutil::test_page(64, 64, 22), 90);
  httplib::MultipartFormDataItems items = {{"file", std::string(jpeg.begin(), jpeg.end()), "scan.jpg", "image/jpeg"}};
  r = cli.Post("/predict", items);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  j = body_json(r);
  EXPECT_EQ(j["file"], "scan.jpg");
  EXPECT_EQ(j["dct_source"], "file");

  // Errors: JSON bodies with a message.
  httplib::MultipartFormDataItems wrong = {{"image", "xx", "a.jpg", "image/jpeg"}};
  r = cli.Post("/predict", wrong);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(body_json(r)["error"].get<std::string>().find("'file'"), std::string::npos);

  r = cli.Post("/predict?name=junk.jpg", "this is not an image", "application/octet-stream");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(body_json(r)["error"].get<std::string>().find("junk.jpg"), std::string::npos) << r->body;

  r = cli.Post("/predict", "", "application/octet-stream");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(body_json(r).contains("error"));

  std::string big(300 * 1024, 'x');
  r = cli.Post("/predict", big, "application/octet-stream");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(body_json(r).contains("error"));

  r = cli.Get("/nope");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(body_json(r).contains("error"));
}

TEST(Serve, PdfAndTiffUploadsGiveOneRecordPerPage) {
  if (!pdf_supported() || !tiff_supported()) GTEST_SKIP() << "built without PDF/TIFF input";
  ServeOptions o = test_options(1 << 20);
  o.documents.max_pages = 3;
  RunningServer rs(o);
  httplib::Client cli("127.0.0.1", rs.server.port());
  cli.set_read_timeout(120, 0);
  ASSERT_TRUE(wait_health(cli));
  Predictor local(load_weights(testutil::tiny_model().path), PredictOptions{});
  // A scanned PDF (two JPEG pages): each page's record is the prediction of its JPEG given directly.
  const std::vector<uint8_t> pdf = read_file(testutil::data_path("io/scan2.pdf"));
  httplib::MultipartFormDataItems items = {{"file", std::string(pdf.begin(), pdf.end()), "scan.pdf", "application/pdf"}};
  auto r = cli.Post("/predict?maps=1", items);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  nlohmann::json j = body_json(r);
  EXPECT_EQ(j["file"], "scan.pdf");
  EXPECT_EQ(j["page_count"], 2);
  ASSERT_EQ(j["pages"].size(), 2u);
  const char* jpegs[] = {"io/doc_q80_420.jpg", "io/doc_q90_444.jpg"};
  for (int i = 0; i < 2; ++i) {
    const nlohmann::json& pg = j["pages"][size_t(i)];
    EXPECT_EQ(pg["file"], "scan.pdf#" + std::to_string(i + 1));
    EXPECT_EQ(pg["page"], i + 1);
    EXPECT_EQ(pg["page_source"], "pdf-jpeg");
    Prediction want = local.predict_file(testutil::data_path(jpegs[i]));
    EXPECT_EQ(pg["image_score"].get<double>(), want.image_score);
    at::Tensor prob = decode_mask_bytes(base64_decode(pg["maps"]["prob_png"]), "prob");
    EXPECT_EQ(testutil::max_abs_diff(prob, prob_to_u8(want.prob)), 0.0);
  }
  EXPECT_FALSE(j.contains("report_html"));
  // ?downscale=2 reaches every page: each record is its JPEG predicted at half size.
  r = cli.Post("/predict?downscale=2", items);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  PredictOptions half;
  half.downscale = 2;
  Predictor local_half(load_weights(testutil::tiny_model().path), half);
  const nlohmann::json scaled = body_json(r);
  for (int i = 0; i < 2; ++i) {
    const nlohmann::json& pg = scaled["pages"][size_t(i)];
    EXPECT_EQ(pg["downscale"], 2);
    EXPECT_EQ(pg["image_score"].get<double>(), local_half.predict_file(testutil::data_path(jpegs[i])).image_score);
  }
  // ?report=1: the HTML report `diffnet predict --report` writes for the same pages, byte for byte; its
  // temporary folder is gone afterwards.
  auto report_dirs = [] {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(std::filesystem::temp_directory_path()))
      n += e.path().filename().string().rfind("diffnet-report-", 0) == 0;
    return n;
  };
  const int dirs_before = report_dirs();
  r = cli.Post("/predict?report=1", items);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  j = body_json(r);
  EXPECT_EQ(report_dirs(), dirs_before);
  EXPECT_FALSE(j["pages"][0].contains("maps"));
  {
    const std::string dir = testutil::temp_dir("serve-report");
    ReportOptions ro;
    ro.model = local.model().source;
    ro.threshold = local.page_threshold();
    ro.overlay.floor = local.options().threshold;
    HtmlReport want(dir + "/want.html", ro);
    DocumentReader doc(pdf, "scan.pdf");
    for (int64_t i = 0; i < doc.pages(); ++i) want.add(local.predict_page(doc.page(i)));
    want.finish();
    const std::vector<uint8_t> bytes = read_file(dir + "/want.html");
    // The header's date (to the minute, when the report was made) may differ between the two.
    const std::regex date(R"([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2} [A-Za-z0-9+-]*)");
    const std::string got = std::regex_replace(j["report_html"].get<std::string>(), date, "DATE");
    const std::string expected = std::regex_replace(std::string(bytes.begin(), bytes.end()), date, "DATE");
    EXPECT_EQ(got.size(), expected.size());
    EXPECT_TRUE(got == expected);
    EXPECT_NE(got.find("scan.pdf#2"), std::string::npos);
  }
  // A TIFF as the raw body: four pages, over the server's limit of three.
  const std::vector<uint8_t> tif = read_file(testutil::data_path("io/pages.tif"));
  r = cli.Post("/predict?name=pages.tif", reinterpret_cast<const char*>(tif.data()), tif.size(), "image/tiff");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(body_json(r)["error"].get<std::string>().find("more than 3 pages"), std::string::npos) << r->body;
  // An encrypted PDF: 400 naming the reason.
  const std::vector<uint8_t> enc = read_file(testutil::data_path("io/encrypted.pdf"));
  r = cli.Post("/predict?name=locked.pdf", reinterpret_cast<const char*>(enc.data()), enc.size(), "application/pdf");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(body_json(r)["error"].get<std::string>().find("encrypted"), std::string::npos) << r->body;
}

TEST(Serve, AdmissionIsFifoBoundedAndCostAware) {
  using namespace std::chrono;
  using Outcome = serve::Admission::Outcome;
  serve::Admission a(/*slots=*/1, /*max_waiting=*/2, /*max_pixels=*/1000);
  const auto far = steady_clock::now() + seconds(60);
  auto wait_for = [&](int waiting) {
    for (int i = 0; i < 500 && a.stats().waiting != waiting; ++i) std::this_thread::sleep_for(milliseconds(2));
    ASSERT_EQ(a.stats().waiting, waiting);
  };
  serve::Admission::Ticket first = a.acquire(100, far);
  ASSERT_EQ(first.outcome, Outcome::kRun);
  EXPECT_EQ(first.slot, 0);
  // Two waiters, in arrival order; a third request finds the queue full.
  std::vector<int> order;
  std::mutex om;
  auto waiter = [&](int id) {
    serve::Admission::Ticket t = a.acquire(100, far);
    EXPECT_EQ(t.outcome, Outcome::kRun);
    {
      std::lock_guard<std::mutex> l(om);
      order.push_back(id);
    }
    std::this_thread::sleep_for(milliseconds(20));
    a.release(t);
  };
  std::thread w1(waiter, 1);
  wait_for(1);
  std::thread w2(waiter, 2);
  wait_for(2);
  serve::Admission::Ticket full = a.acquire(100, far);
  EXPECT_EQ(full.outcome, Outcome::kQueueFull);
  EXPECT_EQ(full.waiting_ahead, 2);
  EXPECT_EQ(a.stats().pixels, 300);
  a.release(first);
  w1.join();
  w2.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(a.stats().pixels, 0);
  // Cost: 600 pixels running, 500 more would exceed the budget of 1000, 400 fit (and wait).
  serve::Admission::Ticket big = a.acquire(600, far);
  ASSERT_EQ(big.outcome, Outcome::kRun);
  EXPECT_EQ(a.acquire(500, far).outcome, Outcome::kTooManyPixels);
  // Deadline: a waiter gives up after its deadline and leaves the queue and the budget.
  const auto t0 = steady_clock::now();
  EXPECT_EQ(a.acquire(400, steady_clock::now() + milliseconds(80)).outcome, Outcome::kTimedOut);
  EXPECT_GE(ms_since(t0), 79.0);
  EXPECT_EQ(a.stats().waiting, 0);
  EXPECT_EQ(a.stats().pixels, 600);
  a.release(big);
  // Alone, a request above the whole budget still runs (the decoder's pixel limit bounds it).
  serve::Admission::Ticket huge = a.acquire(5000, far);
  EXPECT_EQ(huge.outcome, Outcome::kRun);
  a.release(huge);
  // stop() wakes a waiter.
  serve::Admission::Ticket hold = a.acquire(10, far);
  ASSERT_EQ(hold.outcome, Outcome::kRun);
  std::thread stopped([&] { EXPECT_EQ(a.acquire(1, far).outcome, Outcome::kStopped); });
  wait_for(1);
  a.stop();
  stopped.join();
  a.release(hold);
  EXPECT_EQ(a.acquire(1, far).outcome, Outcome::kStopped) << "nothing is admitted after stop()";
}

TEST(Serve, SlowClientsDoNotStallHealthAndAreDropped) {
  ServeOptions o = test_options(1 << 20);
  o.read_timeout_s = 1;
  RunningServer rs(o);
  httplib::Client cli("127.0.0.1", rs.server.port());
  cli.set_read_timeout(60, 0);
  ASSERT_TRUE(wait_health(cli));
  // 20 clients that start a request and then send nothing more (1 byte/s or slower).
  std::vector<int> slow;
  for (int i = 0; i < 20; ++i) {
    int fd = raw_connect(rs.server.port());
    ASSERT_GE(fd, 0);
    const std::string head = "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nabc";
    ASSERT_EQ(::send(fd, head.data(), head.size(), 0), ssize_t(head.size()));
    slow.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  httplib::Client fresh("127.0.0.1", rs.server.port());
  auto t0 = std::chrono::steady_clock::now();
  auto health = fresh.Get("/health");
  const double health_ms = ms_since(t0);
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(health_ms, 1000.0) << "target < 50 ms on an idle machine";
  // A normal request is served meanwhile.
  const std::vector<uint8_t> png = encode_png(testutil::test_page(40, 40, 3));
  auto r = fresh.Post("/predict", reinterpret_cast<const char*>(png.data()), png.size(), "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // The silent clients are dropped after the read timeout (1 s): the server closes their connections.
  t0 = std::chrono::steady_clock::now();
  for (int fd : slow) {
    char buf[512];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {  // a 408/400 answer, if any, then the close
    }
    EXPECT_EQ(n, 0) << "closed by the server, not timed out here";
    ::close(fd);
  }
  EXPECT_LT(ms_since(t0), 8000.0);
}

TEST(Serve, TricklingUploadGets408AtTheRequestDeadline) {
  // A client that keeps sending one byte every 200 ms never trips the read timeout (5 s) but must not
  // hold its request longer than the whole-request deadline (1.5 s): it gets 408 then.
  ServeOptions o = test_options(1 << 20);
  o.read_timeout_s = 5;
  o.request_timeout_s = 1.5;
  RunningServer rs(o);
  httplib::Client cli("127.0.0.1", rs.server.port());
  ASSERT_TRUE(wait_health(cli));
  int fd = raw_connect(rs.server.port());
  ASSERT_GE(fd, 0);
  const std::string head = "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\na";
  ASSERT_EQ(::send(fd, head.data(), head.size(), MSG_NOSIGNAL), ssize_t(head.size()));
  const auto t0 = std::chrono::steady_clock::now();
  std::string answer;
  timeval tv{0, 200 * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  while (ms_since(t0) < 10000) {
    char buf[512];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) answer.append(buf, size_t(n));
    if (n == 0 || answer.find("(--request-timeout)\"}") != std::string::npos) break;  // closed, or the whole answer
    if (::send(fd, "b", 1, MSG_NOSIGNAL) != 1 && !answer.empty()) break;
  }
  const double ms = ms_since(t0);
  ::close(fd);
  EXPECT_NE(answer.find("HTTP/1.1 408"), std::string::npos) << answer;
  EXPECT_NE(answer.find("request body not received within 1.5 s"), std::string::npos) << answer;
  EXPECT_GT(ms, 1400.0);
  EXPECT_LT(ms, 5000.0) << "the deadline, not the read timeout, ended it";
  // The server still answers.
  auto health = cli.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST(Serve, FullQueueAnswers503WithRetryAfter) {
  ServeOptions o = test_options(64 << 20);
  o.max_queue = 0;  // nothing waits: a second request while one runs is refused at once
  RunningServer rs(o);
  httplib::Client cli("127.0.0.1", rs.server.port());
  cli.set_read_timeout(300, 0);
  ASSERT_TRUE(wait_health(cli));
  const std::vector<uint8_t> slow_png = encode_png(testutil::test_page(1536, 1536, 4));
  std::thread first([&] {
    httplib::Client c("127.0.0.1", rs.server.port());
    c.set_read_timeout(300, 0);
    auto r = c.Post("/predict", reinterpret_cast<const char*>(slow_png.data()), slow_png.size(), "image/png");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  });
  bool saw_running = false;
  for (int i = 0; i < 2000 && !saw_running; ++i) {
    auto h = cli.Get("/health");
    saw_running = h && body_json(h)["running"] == 1;
    if (!saw_running) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(saw_running);
  const std::vector<uint8_t> png = encode_png(testutil::test_page(40, 40, 3));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = cli.Post("/predict", reinterpret_cast<const char*>(png.data()), png.size(), "image/png");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_LT(ms_since(t0), 1000.0);
  ASSERT_TRUE(r->has_header("Retry-After"));
  EXPECT_GE(std::stoi(r->get_header_value("Retry-After")), 1);
  EXPECT_NE(body_json(r)["error"].get<std::string>().find("queue full"), std::string::npos);
  first.join();
  // Refused images never enter the queue: a non-image is a 400 even while busy.
  auto bad = cli.Post("/predict", "not an image", "application/octet-stream");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  // curl --data-binary sends a form content type: the image is still read whole (not capped at 8 KB).
  const std::vector<uint8_t> big = encode_png(testutil::test_page(300, 300, 5));
  ASSERT_GT(big.size(), 8192u);
  auto form = cli.Post("/predict", reinterpret_cast<const char*>(big.data()), big.size(),
                       "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 200) << form->body;
  auto get = cli.Get("/predict");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 405);
  EXPECT_EQ(get->get_header_value("Allow"), "POST");
  // A name that is not UTF-8 is a 400, never a 500.
  auto odd = cli.Post("/predict?name=a%FFb.png", reinterpret_cast<const char*>(png.data()), png.size(), "image/png");
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->status, 400) << odd->body;
}
