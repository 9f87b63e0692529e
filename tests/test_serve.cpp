// `diffnet serve`: a server on an ephemeral port in a thread, exercised with httplib's client.
#include <httplib.h>

#include <chrono>
#include <thread>

#include "diffnet/common.h"
#include "diffnet/image_io.h"
#include "diffnet/serve.h"
#include "eval_testing.h"
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

struct RunningServer {
  Server server;
  std::thread thread;
  RunningServer(size_t max_upload)
      : server(Predictor(load_weights_or_random(testutil::tiny_model().path), PredictOptions{}), [&] {
          ServeOptions o;
          o.port = 0;
          o.max_upload_bytes = max_upload;
          return o;
        }()) {
    server.bind();
    thread = std::thread([this] { server.listen(); });
  }
  ~RunningServer() {
    server.stop();
    thread.join();
  }
};

nlohmann::json body_json(const httplib::Result& r) { return nlohmann::json::parse(r->body); }

}  // namespace

TEST(Serve, Base64KnownVectors) {
  auto enc = [](const std::string& s) { return base64_encode(std::vector<uint8_t>(s.begin(), s.end())); };
  EXPECT_EQ(enc(""), "");
  EXPECT_EQ(enc("f"), "Zg==");
  EXPECT_EQ(enc("fo"), "Zm8=");
  EXPECT_EQ(enc("foo"), "Zm9v");
  EXPECT_EQ(enc("foob"), "Zm9vYg==");
  EXPECT_EQ(enc("fooba"), "Zm9vYmE=");
  EXPECT_EQ(enc("foobar"), "Zm9vYmFy");
}

TEST(Serve, PredictHealthPageAndErrors) {
  RunningServer rs(200 * 1024);
  ASSERT_GT(rs.server.port(), 0);
  httplib::Client cli("127.0.0.1", rs.server.port());
  cli.set_read_timeout(120, 0);
  auto health = cli.Get("/health");
  for (int i = 0; i < 100 && !health; ++i) {  // listen() starts in the other thread
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    health = cli.Get("/health");
  }
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
  Predictor local(load_weights_or_random(testutil::tiny_model().path), PredictOptions{});
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
