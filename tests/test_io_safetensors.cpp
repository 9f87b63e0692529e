// safetensors: round trips, layout, a Python-written file, hand-assembled buffers, strict validation.
#include <nlohmann/json.hpp>

#include <cstring>

#include "diffnet/common.h"
#include "diffnet/safetensors.h"
#include "test_io_util.h"
#include "testing.h"

using namespace diffnet;

namespace {

// Assembles a safetensors file from a header text and raw data (header padded to 8 with spaces).
std::vector<uint8_t> assemble(std::string header, const std::vector<uint8_t>& data, bool pad = true) {
  if (pad)
    while (header.size() % 8) header.push_back(' ');
  std::vector<uint8_t> out(8);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void expect_rejected(const std::vector<uint8_t>& bytes, const std::string& what) {
  try {
    parse_safetensors(bytes, "bad.safetensors");
    ADD_FAILURE() << "accepted; expected: " << what;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

std::map<std::string, at::Tensor> every_dtype() {
  at::manual_seed(9);
  return {
      {"f64", at::randn({3, 2}, at::kDouble)},
      {"f32", at::randn({2, 3, 4})},
      {"f16", at::randn({5}).to(at::kHalf)},
      {"bf16", at::randn({2, 2}).to(at::kBFloat16)},
      {"i64", at::randint(-(int64_t(1) << 50), int64_t(1) << 50, {4}, at::kLong)},
      {"i32", at::randint(-100000, 100000, {3}, at::kInt)},
      {"i16", at::randint(-30000, 30000, {3}, at::kShort)},
      {"i8", at::randint(-128, 128, {7}, at::kChar)},
      {"u8", at::randint(0, 256, {3, 3}, at::kByte)},
      {"bool", at::randint(0, 2, {5}, at::kByte).to(at::kBool)},
      {"scalar", at::scalar_tensor(3.5, at::kFloat)},
      {"empty", at::empty({0, 3}, at::kFloat)},
  };
}

}  // namespace

TEST(IoSafetensors, RoundTripEveryDtype) {
  auto tensors = every_dtype();
  tensors["noncontig"] = at::arange(12, at::kFloat).view({3, 4}).t();
  std::map<std::string, std::string> meta = {{"format", "diffnet"}, {"config", "{\"a\": 1}"}};
  std::string path = testutil::temp_dir("io-st") + "/t.safetensors";
  save_safetensors(path, tensors, meta);
  for (const SafeTensors& st : {load_safetensors(path), parse_safetensors(read_file(path), path)}) {
    EXPECT_EQ(st.metadata, meta);
    ASSERT_EQ(st.tensors.size(), tensors.size());
    for (const auto& [name, t] : tensors) {
      const at::Tensor& u = st.tensors.at(name);
      EXPECT_EQ(u.scalar_type(), t.scalar_type()) << name;
      EXPECT_EQ(u.sizes(), t.sizes()) << name;
      EXPECT_TRUE(u.is_contiguous()) << name;
      EXPECT_TRUE(at::equal(u, t)) << name;
    }
  }
}

TEST(IoSafetensors, WriterLayout) {
  auto bytes = serialize_safetensors(every_dtype(), {{"k", "v"}});
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  EXPECT_EQ(n % 8, 0u);
  std::string text(bytes.begin() + 8, bytes.begin() + 8 + n);
  EXPECT_EQ(text[0], '{');
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["__metadata__"]["k"], "v");
  // Data order: descending item size, then name; each tensor naturally aligned.
  std::vector<std::pair<uint64_t, std::string>> order;
  const std::map<std::string, int> item = {{"F64", 8}, {"I64", 8}, {"F32", 4}, {"I32", 4}, {"F16", 2}, {"BF16", 2},
                                           {"I16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const uint64_t b = it.value()["data_offsets"][0];
    EXPECT_EQ(b % item.at(it.value()["dtype"]), 0u) << it.key();
    order.emplace_back(b, it.key());
  }
  std::sort(order.begin(), order.end());
  std::vector<std::string> names;
  for (auto& o : order) names.push_back(o.second);
  // Equal offsets (the empty tensor) sort by name in this check; "empty" is F32 so it sits among the 4s.
  const std::vector<std::string> expect = {"f64", "i64", "empty", "f32", "i32", "scalar",
                                           "bf16", "f16", "i16", "bool", "i8", "u8"};
  EXPECT_EQ(names, expect);
  EXPECT_EQ(bytes.size(), 8 + n + j["u8"]["data_offsets"][1].get<uint64_t>());
}

TEST(IoSafetensors, ReadsPythonWrittenFile) {
  // tests/data/io/py_written.safetensors: written by make_safetensors.py (json + struct only).
  SafeTensors st = load_safetensors(testutil::data_path("io/py_written.safetensors"));
  EXPECT_EQ(st.metadata.at("writer"), "python json+struct");
  EXPECT_TRUE(at::equal(st.tensors.at("f32"), at::arange(6, at::kFloat).mul(0.5).view({2, 3})));
  EXPECT_EQ(st.tensors.at("f64")[0].item<double>(), 1e-300);
  EXPECT_EQ(st.tensors.at("f64")[1].item<double>(), -3.25);
  EXPECT_EQ(st.tensors.at("f16").scalar_type(), at::kHalf);
  EXPECT_EQ(st.tensors.at("f16")[1].item<float>(), 65504.0f);
  EXPECT_EQ(st.tensors.at("bf16").scalar_type(), at::kBFloat16);
  EXPECT_EQ(st.tensors.at("bf16")[1].item<float>(), -2.5f);
  EXPECT_EQ(st.tensors.at("bf16")[2].item<float>(), 3.140625f);
  EXPECT_EQ(st.tensors.at("i64")[0].item<int64_t>(), -(int64_t(1) << 40));
  EXPECT_EQ(st.tensors.at("i32")[0].item<int>(), -123456);
  EXPECT_EQ(st.tensors.at("i16")[0].item<int>(), -32768);
  EXPECT_EQ(st.tensors.at("i8")[0].item<int>(), -128);
  EXPECT_EQ(st.tensors.at("u8").sizes(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(st.tensors.at("u8")[1][0].item<int>(), 255);
  EXPECT_TRUE(st.tensors.at("bool")[0].item<bool>());
  EXPECT_EQ(st.tensors.at("scalar").dim(), 0);
  EXPECT_EQ(st.tensors.at("scalar").item<float>(), 42.0f);
  EXPECT_EQ(st.tensors.at("empty").sizes(), (std::vector<int64_t>{0, 4}));
}

TEST(IoSafetensors, HandAssembledBuffer) {
  // F32 [2] = {1.5, -2} -> 0x3FC00000, 0xC0000000 little-endian; U8 [3] = {1, 2, 3}.
  std::vector<uint8_t> data = {0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x00, 0xC0, 1, 2, 3};
  auto bytes = assemble(
      R"({"b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("__metadata__":{"x":"y"}})",
      data);
  SafeTensors st = parse_safetensors(bytes, "hand");
  EXPECT_EQ(st.tensors.at("a")[0].item<float>(), 1.5f);
  EXPECT_EQ(st.tensors.at("a")[1].item<float>(), -2.0f);
  EXPECT_TRUE(at::equal(st.tensors.at("b"), at::tensor({1, 2, 3}, at::kByte)));
  EXPECT_EQ(st.metadata.at("x"), "y");
  // An unpadded header is accepted too.
  EXPECT_NO_THROW(parse_safetensors(assemble(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", {7}, false), "u"));
}

TEST(IoSafetensors, CorruptHeadersRejected) {
  const std::vector<uint8_t> d16(16, 0);
  auto f32 = [](const std::string& name, int b, int e, const std::string& shape = "[2]") {
    return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(b) + "," +
           std::to_string(e) + "]}";
  };
  expect_rejected(assemble("{" + f32("w", 0, 8) + "," + f32("v", 4, 12) + "," + f32("z", 12, 16, "[1]") + "}", d16),
                  "tensor 'v': data overlaps tensor 'w'");
  expect_rejected(assemble("{" + f32("w", 0, 8) + "," + f32("gap", 12, 20) + "}", std::vector<uint8_t>(20)),
                  "tensor 'gap': gap of 4 bytes");
  expect_rejected(assemble("{" + f32("w", 0, 8) + "," + f32("big", 8, 16, "[3]") + "}", d16),
                  "tensor 'big': byte size 8 does not match");
  expect_rejected(assemble("{" + f32("w", 0, 8) + "}", d16), "8 bytes at the end of the data buffer");
  expect_rejected(assemble("{" + f32("w", 0, 8) + "," + f32("far", 8, 40) + "}", d16),
                  "tensor 'far': data_offsets [8, 40) run past");
  expect_rejected(assemble("{" + f32("w", 0, 8) + "," + f32("w", 8, 16) + "}", d16), "duplicate key 'w'");
  expect_rejected(assemble("{" + f32("w", 0, 8) + ",}", d16), "invalid safetensors JSON");
  expect_rejected(assemble("[1,2]", d16), "does not start with '{'");
  expect_rejected(assemble(R"({"q":{"dtype":"U16","shape":[8],"data_offsets":[0,16]}})", d16),
                  "tensor 'q': unsupported dtype 'U16'");
  expect_rejected(assemble(R"({"q":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", d16), "tensor 'q': shape");
  expect_rejected(assemble(R"({"q":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"x":1}})", d16),
                  "tensor 'q': unknown field 'x'");
  expect_rejected(assemble(R"({"__metadata__":{"a":1},"q":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", d16),
                  "__metadata__ value for 'a' is not a string");
  expect_rejected(assemble(R"({"q":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", {1, 2}),
                  "tensor 'q': BOOL value");
  // Header length: huge, past the end of the file, file too short.
  std::vector<uint8_t> huge = {0, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  const uint64_t big = 100'000'001;
  for (int i = 0; i < 8; ++i) huge[i] = static_cast<uint8_t>(big >> (8 * i));
  expect_rejected(huge, "exceeds 100 MB");
  std::vector<uint8_t> past = {64, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  expect_rejected(past, "runs past the end of the file");
  expect_rejected({1, 2, 3}, "too small");
  // Truncated data on disk.
  auto good = serialize_safetensors({{"w", at::ones({64})}});
  good.resize(good.size() - 10);
  const std::string p = testutil::write_temp_bytes("io-st", "bad.safetensors", good);
  try {
    load_safetensors(p);
    ADD_FAILURE() << "truncated file accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos);
  }
  EXPECT_THROW(load_safetensors("/nonexistent/x.safetensors"), Error);
}

TEST(IoSafetensors, WriterRejectsUnsupported) {
  EXPECT_THROW(serialize_safetensors({{"c", at::zeros({2}, at::kComplexFloat)}}), Error);
  EXPECT_THROW(serialize_safetensors({{"__metadata__", at::zeros({2})}}), Error);
}
