// Byte layouts: int4x4 / int4x8 / dense sub-byte packing and TensorProto
// encoding for raw_data and every typed field.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/numeric.h"
#include "base/xxh64.h"
#include "doctest/doctest.h"
#include "formats/int4_packing.h"
#include "onnx/onnx_tensor.h"

namespace nibble {
namespace {

TEST_CASE("int4x4 packing: SPEC worked example bytes") {
  const std::vector<uint8_t> codes = {0, 15, 8, 9, 11, 7, 4, 10};  // rows x cols (4, 2)
  std::vector<uint8_t> words(4);
  PackInt4Interleaved(codes.data(), 4, 2, 4, words.data());
  CHECK(words == std::vector<uint8_t>{0x80, 0x4b, 0x9f, 0xa7});
  std::vector<uint8_t> back(8);
  UnpackInt4Interleaved(words.data(), 4, 2, 4, back.data());
  CHECK(back == codes);
}

TEST_CASE("int4x4 / int4x8 pack-unpack round trip on random codes") {
  std::mt19937 rng(3);
  for (int p : {4, 8}) {
    for (int64_t d0 : {8, 16, 64}) {
      for (int64_t row : {1, 3, 17}) {
        std::vector<uint8_t> codes(static_cast<size_t>(d0 * row));
        for (auto& c : codes) c = static_cast<uint8_t>(rng() & 0xF);
        std::vector<uint8_t> words(static_cast<size_t>(d0 * row / 2));
        PackInt4Interleaved(codes.data(), d0, row, p, words.data());
        std::vector<uint8_t> back(codes.size());
        UnpackInt4Interleaved(words.data(), d0, row, p, back.data());
        CHECK(back == codes);
        // Row r's nibble in its little-endian word.
        const int64_t r = d0 - 1, j = row - 1;
        uint64_t word = 0;
        for (int b = p / 2 - 1; b >= 0; --b) {
          word = (word << 8) | words[static_cast<size_t>(((r / p) * row + j) * p / 2 + b)];
        }
        CHECK(((word >> (4 * (r % p))) & 0xF) == codes[static_cast<size_t>(r * row + j)]);
      }
    }
  }
}

TEST_CASE("dense sub-byte packing: low bits first, last byte zero-padded") {
  const std::vector<uint8_t> c4 = {1, 2, 3};
  std::vector<uint8_t> p4(2);
  PackDense(c4.data(), 3, 4, p4.data());
  CHECK(p4 == std::vector<uint8_t>{0x21, 0x03});
  const std::vector<uint8_t> c2 = {1, 2, 3, 0, 3};
  std::vector<uint8_t> p2(2);
  PackDense(c2.data(), 5, 2, p2.data());
  CHECK(p2 == std::vector<uint8_t>{0x39, 0x03});  // 1 | 2<<2 | 3<<4 | 0<<6
  std::vector<uint8_t> back(5);
  UnpackDense(p2.data(), 5, 2, back.data());
  CHECK(back == c2);
}

TEST_CASE("TensorProto raw_data round trip") {
  const std::vector<int16_t> v = {1, -2, 300, -32768};
  TensorView view{DType::kInt16, {2, 2}, v.data(), 8};
  const auto p = TensorToProto(view, "w");
  CHECK(p.data_type() == 5);
  CHECK(p.raw_data().size() == 8);
  auto t = TensorFromProto(p);
  REQUIRE(t.ok());
  CHECK(t->shape() == Shape{2, 2});
  CHECK(std::memcmp(t->data(), v.data(), 8) == 0);
}

TEST_CASE("TensorProto typed fields") {
  nibble_onnx::TensorProto p;
  p.set_name("t");
  SUBCASE("float_data") {
    p.set_data_type(1);
    p.add_dims(2);
    p.add_float_data(1.5f);
    p.add_float_data(-2.0f);
    auto t = TensorFromProto(p);
    REQUIRE(t.ok());
    CHECK(t->data_as<float>()[1] == -2.0f);
  }
  SUBCASE("int32_data for int8 / uint16 / float16 / bfloat16") {
    p.add_dims(2);
    p.set_data_type(3);  // int8
    p.add_int32_data(-5);
    p.add_int32_data(127);
    auto t = TensorFromProto(p);
    REQUIRE(t.ok());
    CHECK(t->data_as<int8_t>()[0] == -5);
    p.set_data_type(10);  // float16 bit patterns
    p.clear_int32_data();
    p.add_int32_data(F16FromF32(1.0f));
    p.add_int32_data(F16FromF32(-0.5f));
    t = TensorFromProto(p);
    REQUIRE(t.ok());
    CHECK(F32FromF16(t->data_as<uint16_t>()[1]) == -0.5f);
  }
  SUBCASE("int32_data holds one packed byte per entry for int4 / uint2") {
    p.set_data_type(22);  // int4, 3 elements -> 2 bytes
    p.add_dims(3);
    p.add_int32_data(0x1F2);  // only & 0xFF counts
    p.add_int32_data(0x07);
    auto t = TensorFromProto(p);
    REQUIRE(t.ok());
    CHECK(t->size_bytes() == 2);
    CHECK(t->data_as<uint8_t>()[0] == 0xF2);
    CHECK(t->data_as<uint8_t>()[1] == 0x07);
  }
  SUBCASE("int64_data and uint64_data") {
    p.set_data_type(7);
    p.add_dims(1);
    p.add_int64_data(-7);
    auto t = TensorFromProto(p);
    REQUIRE(t.ok());
    CHECK(t->data_as<int64_t>()[0] == -7);
    p.set_data_type(12);  // uint32 via uint64_data
    p.clear_int64_data();
    p.add_uint64_data(0xFFFFFFF0u);
    t = TensorFromProto(p);
    REQUIRE(t.ok());
    CHECK(t->data_as<uint32_t>()[0] == 0xFFFFFFF0u);
  }
}

TEST_CASE("TensorProto errors name the tensor") {
  nibble_onnx::TensorProto p;
  p.set_name("w");
  p.set_data_type(1);
  p.add_dims(3);
  p.set_raw_data(std::string(8, '\0'));
  CHECK(TensorFromProto(p).status().message() ==
        "tensor 'w': raw_data has 8 bytes, float32 (3) needs 12");
  p.clear_raw_data();
  p.add_float_data(1.0f);
  CHECK(TensorFromProto(p).status().message() ==
        "tensor 'w': float_data has 1 entries, float32 (3) needs 3");
  p.set_data_type(99);
  CHECK(TensorFromProto(p).status().message() == "tensor 'w': unsupported data_type 99");
  p.set_data_type(1);
  p.set_data_location(nibble_onnx::TensorProto::EXTERNAL);
  CHECK(TensorFromProto(p).status().message() == "tensor 'w': external data is not supported here");
  nibble_onnx::TensorProto q;
  q.set_name("neg");
  q.set_data_type(1);
  q.add_dims(-1);
  CHECK(TensorFromProto(q).status().message() ==
        "tensor 'neg' has negative dimension -1 at axis 0 in shape (-1)");
}

TEST_CASE("protobuf file I/O: missing and corrupt files are clear errors") {
  nibble_onnx::ModelProto m;
  CHECK(ReadProtoFile("/nonexistent/model.onnx", &m)
            .message()
            .find("cannot open '/nonexistent/model.onnx'") == 0);
  const std::string path = "formats_test_corrupt.onnx";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f);
    const unsigned char junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
    std::fwrite(junk, 1, sizeof junk, f);
    std::fclose(f);
  }
  CHECK(ReadProtoFile(path, &m).message() ==
        "'formats_test_corrupt.onnx' is not a valid onnx.ModelProto (protobuf parse failed)");
  m.set_ir_version(10);
  REQUIRE(WriteProtoFile(path, m).ok());
  nibble_onnx::ModelProto back;
  REQUIRE(ReadProtoFile(path, &back).ok());
  CHECK(back.ir_version() == 10);
  std::remove(path.c_str());
  CHECK(!WriteProtoFile("/nonexistent-dir/x.onnx", m).ok());
}

}  // namespace
}  // namespace nibble

TEST_CASE("XXH64: the reference vectors, and any split of the stream gives the same digest") {
  auto one = [](const std::string& s) {
    nibble::Xxh64 h;
    h.Update(s.data(), s.size());
    return h.Digest();
  };
  // xxHash's published values for seed 0.
  CHECK(one("") == 0xEF46DB3751D8E999ull);
  CHECK(one("a") == 0xD24EC4F1A98C6E5Bull);
  CHECK(one("abc") == 0x44BC2CF5AD770999ull);
  std::string data;
  for (int i = 0; i < 771; ++i) data += static_cast<char>((i * 131 + 7) & 0xFF);
  const uint64_t whole = one(data);
  for (size_t a :
       {size_t{0}, size_t{1}, size_t{5}, size_t{31}, size_t{32}, size_t{33}, size_t{400}}) {
    for (size_t b : {a, a + 3, a + 32, a + 70, data.size()}) {
      if (b > data.size()) continue;
      nibble::Xxh64 h;
      h.Update(data.data(), a);
      h.Update(data.data() + a, b - a);
      h.Update(data.data() + b, data.size() - b);
      CHECK(h.Digest() == whole);
    }
  }
  CHECK(one(data.substr(0, 770)) != whole);
}
