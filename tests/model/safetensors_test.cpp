// Unit tests for the safetensors reader. Files are built by hand following the format's
// specification (huggingface/safetensors README): 8-byte LE header length, JSON header of
// {name: {dtype, shape, data_offsets}} relative to the data section, then the data.
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include "safetensors_writer.h"

namespace deepinfer {
namespace {

using testing::safetensors_image;

Result<std::map<std::string, TensorView>> parse(const std::string& image) {
  return parse_safetensors(reinterpret_cast<const uint8_t*>(image.data()), image.size(), "t.safetensors");
}

std::string error_of(const std::string& image) {
  auto r = parse(image);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

TEST(Safetensors, ParsesWellFormedFile) {
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\x40" "\x80\x3f\x00\x40", 12);
  const std::string image = safetensors_image(
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]}})",
      data);
  auto r = parse(image);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  const TensorView& a = r->at("a");
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(a.n_bytes, 8u);
  float v[2];
  std::memcpy(v, a.data, 8);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 2.0f);
  const TensorView& b = r->at("b");
  EXPECT_EQ(b.shape_str(), "[1, 2]");
  EXPECT_EQ(b.data, a.data + 8);
}

TEST(Safetensors, EmptyTensorAndScalar) {
  const std::string image = safetensors_image(
      R"({"e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
      std::string(4, '\0'));
  auto r = parse(image);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->at("e").numel(), 0);
  EXPECT_EQ(r->at("s").numel(), 1);
}

TEST(Safetensors, RejectsShortFiles) {
  EXPECT_NE(error_of("").find("too short"), std::string::npos);
  EXPECT_NE(error_of(std::string(7, '\0')).find("too short"), std::string::npos);
}

TEST(Safetensors, RejectsHeaderLongerThanFile) {
  std::string image = safetensors_image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd");
  image.resize(20);  // truncated inside the header
  EXPECT_NE(error_of(image).find("exceeds the file size"), std::string::npos);
  std::string huge(8, '\xff');
  EXPECT_NE(error_of(huge + "{}").find("too large"), std::string::npos);
}

TEST(Safetensors, RejectsTruncatedData) {
  const std::string image =
      safetensors_image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(10, '\0'));
  const std::string e = error_of(image);
  EXPECT_NE(e.find("tensor 'a'"), std::string::npos) << e;
  EXPECT_NE(e.find("outside the data section"), std::string::npos) << e;
}

TEST(Safetensors, RejectsMalformedHeaders) {
  EXPECT_NE(error_of(safetensors_image("{not json", "")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(safetensors_image("[1,2]", "")).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(safetensors_image(R"({"a":5})", "")).find("tensor 'a'"), std::string::npos);
  EXPECT_NE(error_of(safetensors_image(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "x"))
                .find("dtype Q4 is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(safetensors_image(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "xxxx"))
                .find("non-negative"),
            std::string::npos);
  EXPECT_NE(error_of(safetensors_image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "xxxx"))
                .find("data_offsets"),
            std::string::npos);
  EXPECT_NE(error_of(safetensors_image(R"({"a":{"dtype":"F32","shape":[1]}})", "xxxx")).find("data_offsets"),
            std::string::npos);
  EXPECT_NE(error_of(safetensors_image(R"({"__metadata__":3})", "")).find("__metadata__"), std::string::npos);
}

TEST(Safetensors, RejectsShapeByteMismatch) {
  const std::string e =
      error_of(safetensors_image(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", "xxxx"));
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("needs 6"), std::string::npos) << e;
}

TEST(Safetensors, RejectsHugeShapesWithoutOverflow) {
  const std::string e = error_of(safetensors_image(
      R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}})", "xxxx"));
  EXPECT_NE(e.find("too large"), std::string::npos) << e;
}

TEST(Safetensors, RejectsOverlapsAndDuplicates) {
  const std::string overlap = error_of(safetensors_image(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      std::string(8, '\0')));
  EXPECT_NE(overlap.find("overlaps"), std::string::npos) << overlap;
  const std::string dup = error_of(safetensors_image(
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      std::string(8, '\0')));
  EXPECT_NE(dup.find("'a' appears twice"), std::string::npos) << dup;
}

TEST(Checkpoint, ShardedIndexAndErrors) {
  testing::TempDir dir("ckpt");
  const auto& p = dir.path();
  testing::write_file(p / "model-00001-of-00002.safetensors",
                      safetensors_image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd"));
  testing::write_file(p / "model-00002-of-00002.safetensors",
                      safetensors_image(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "efgh"));
  testing::write_file(p / "model.safetensors.index.json",
                      R"({"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  auto c = Checkpoint::Open(p.string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_NE(c->find("a"), nullptr);
  ASSERT_NE(c->find("b"), nullptr);
  EXPECT_EQ(c->find("zz"), nullptr);
  EXPECT_EQ(c->total_bytes(), 8u);

  testing::write_file(p / "model.safetensors.index.json",
                      R"({"weight_map":{"a":"model-00002-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  auto wrong = Checkpoint::Open(p.string());
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("tensor 'a'"), std::string::npos) << wrong.status().message();

  testing::write_file(p / "model.safetensors.index.json", R"({"weight_map":{"a":"missing.safetensors"}})");
  auto missing = Checkpoint::Open(p.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing.safetensors"), std::string::npos);

  testing::write_file(p / "model.safetensors.index.json", R"({"weight_map":{"a":"../etc/passwd"}})");
  EXPECT_FALSE(Checkpoint::Open(p.string()).ok());
}

TEST(Checkpoint, TensorInTwoFilesIsAnError) {
  testing::TempDir dir("ckpt-dup");
  const std::string one = safetensors_image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd");
  testing::write_file(dir.path() / "x.safetensors", one);
  testing::write_file(dir.path() / "y.safetensors", one);
  auto c = Checkpoint::Open(dir.path().string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("tensor 'a' is also in"), std::string::npos) << c.status().message();
}

TEST(Checkpoint, EmptyFolder) {
  testing::TempDir dir("ckpt-empty");
  auto c = Checkpoint::Open(dir.path().string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("no .safetensors"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
