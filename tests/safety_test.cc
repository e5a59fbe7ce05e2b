// The library's defences against hostile inputs and misuse: safe file
// opening, output-path checks, name escaping, thread-count and allocation
// limits, and the two-file publish of an ONNX model with external data.
#include <doctest/doctest.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/tensor.h"
#include "formats/atomic_file.h"
#include "formats/files.h"
#include "formats/safetensors_writer.h"
#include "kernels/scratch.h"
#include "onnx/onnx_writer.h"
#include "op/dequantizer.h"
#include "op/onnx.h"
#include "tests/sample_layers.h"

namespace nibble {
namespace {

namespace fs = std::filesystem;

fs::path FreshDir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("nibble_safety_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void WriteText(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

std::string ReadText(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST_CASE("EscapeBytes / JsonEscape / IsValidUtf8") {
  CHECK(IsValidUtf8("plain"));
  CHECK(IsValidUtf8("caf\xc3\xa9"));
  CHECK_FALSE(IsValidUtf8("a\xff"));
  CHECK_FALSE(IsValidUtf8("\xc0\x80"));      // overlong NUL
  CHECK_FALSE(IsValidUtf8("\xed\xa0\x80"));  // a surrogate
  CHECK_FALSE(IsValidUtf8("\xc3"));          // cut short
  CHECK(EscapeBytes("blk.\xff\xfe.w") == "blk.\\xff\\xfe.w");
  CHECK(EscapeBytes("caf\xc3\xa9\n\\") == "caf\xc3\xa9\\x0a\\\\");
  CHECK(JsonEscape("a\"b\\c\x01\xff") == "a\\\"b\\\\c\\u0001\\\\xff");
  CHECK(IsValidUtf8(JsonEscape("\xff\xfe\xc3")));
}

TEST_CASE("ReadOnlyFile refuses FIFOs, devices and directories without blocking") {
  const fs::path d = FreshDir("special");
  REQUIRE(::mkfifo((d / "fifo").c_str(), 0600) == 0);
  auto f = ReadOnlyFile::Open((d / "fifo").string());
  REQUIRE_FALSE(f.ok());
  CHECK(f.status().message().find("is a FIFO, not a regular file") != std::string::npos);
  CHECK(ReadOnlyFile::Open("/dev/zero").status().message() ==
        "'/dev/zero' is a character device, not a regular file");
  CHECK(ReadOnlyFile::Open(d.string()).status().message().find("is a directory") !=
        std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("ReadSmallFile checks the size cap before reading") {
  const fs::path d = FreshDir("cap");
  WriteText(d / "small.json", "{}");
  auto ok = ReadSmallFile((d / "small.json").string(), 16, "config");
  REQUIRE(ok.ok());
  CHECK(*ok == "{}");
  { std::ofstream(d / "big.json") << std::string(17, ' '); }
  auto big = ReadSmallFile((d / "big.json").string(), 16, "config");
  CHECK(big.status().message() ==
        "config '" + (d / "big.json").string() + "' has 17 bytes, more than the 16-byte limit");
  fs::remove_all(d);
}

TEST_CASE("PathInside refuses links and '..' that leave the folder") {
  const fs::path d = FreshDir("inside");
  fs::create_directories(d / "model");
  WriteText(d / "model" / "a.bin", "a");
  WriteText(d / "outside.bin", "o");
  fs::create_symlink("../outside.bin", d / "model" / "link.bin");
  fs::create_symlink("a.bin", d / "model" / "ok_link.bin");
  const std::string m = (d / "model").string();
  CHECK(PathInside(m, "a.bin", "x").ok());
  CHECK(PathInside(m, "ok_link.bin", "x").ok());
  CHECK(PathInside(m, "missing.bin", "x").ok());  // the open reports it
  auto bad = PathInside(m, "link.bin", "shard");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("outside the model folder") != std::string::npos);
  CHECK_FALSE(PathInside(m, "../outside.bin", "shard").ok());
  // The Hugging Face hub cache: snapshots/<rev>/ links into ../../blobs/.
  fs::create_directories(d / "repo" / "snapshots" / "rev");
  fs::create_directories(d / "repo" / "blobs");
  WriteText(d / "repo" / "blobs" / "123", "w");
  fs::create_symlink("../../blobs/123", d / "repo" / "snapshots" / "rev" / "w.bin");
  CHECK(PathInside((d / "repo" / "snapshots" / "rev").string(), "w.bin", "x").ok());
  fs::create_symlink("../../../outside.bin", d / "repo" / "snapshots" / "rev" / "o.bin");
  CHECK_FALSE(PathInside((d / "repo" / "snapshots" / "rev").string(), "o.bin", "x").ok());
  fs::remove_all(d);
}

TEST_CASE("CheckOutputPath: inputs by identity, links and special files refused") {
  const fs::path d = FreshDir("out");
  WriteText(d / "in.bin", "input");
  InputFiles inputs;
  REQUIRE(ReadOnlyFile::Open((d / "in.bin").string(), &inputs).ok());
  CHECK(inputs.size() == 1);
  CHECK(CheckOutputPath((d / "new.bin").string(), inputs).ok());
  WriteText(d / "other.bin", "x");
  CHECK(CheckOutputPath((d / "other.bin").string(), inputs).ok());  // replaced atomically
  const std::string spelled = d.string() + "/./in.bin";
  CHECK(CheckOutputPath(spelled, inputs).message().find("is the input file") != std::string::npos);
  fs::create_hard_link(d / "in.bin", d / "hard.bin");
  CHECK(CheckOutputPath((d / "hard.bin").string(), inputs).message().find("is the input file") !=
        std::string::npos);
  fs::create_symlink("other.bin", d / "sym.bin");
  CHECK(CheckOutputPath((d / "sym.bin").string(), inputs).message().find("symbolic link") !=
        std::string::npos);
  CHECK(CheckOutputPath("/dev/null", inputs).message() ==
        "output '/dev/null' exists and is a character device; refusing to replace it");
  CHECK(CheckOutputPath(d.string(), inputs, "external data output").message() ==
        "external data output '" + d.string() +
            "' exists and is a directory; refusing to replace it");
  fs::remove_all(d);
}

TEST_CASE("AtomicFile links straight to a free name and replaces an existing file") {
  const fs::path d = FreshDir("atomic");
  {
    AtomicFile f;
    REQUIRE(f.Create((d / "a").string()).ok());
    REQUIRE(f.Write("new", 3).ok());
    REQUIRE(f.Publish().ok());
  }
  CHECK(ReadText(d / "a") == "new");
  {
    AtomicFile f;
    REQUIRE(f.Create((d / "a").string()).ok());
    REQUIRE(f.Write("newer", 5).ok());
    REQUIRE(f.Publish().ok());
  }
  CHECK(ReadText(d / "a") == "newer");
  int n = 0;
  for (const auto& e : fs::directory_iterator(d)) n += e.is_regular_file() ? 1 : 0;
  CHECK(n == 1);  // no temporary left
  fs::remove_all(d);
}

TEST_CASE("CheckOutputFolder: absent or empty folders only, checked before any work") {
  const fs::path d = FreshDir("outfolder");
  InputFiles inputs;
  WriteText(d / "in.bin", "input");
  REQUIRE(ReadOnlyFile::Open((d / "in.bin").string(), &inputs).ok());
  CHECK(CheckOutputFolder((d / "new").string(), inputs).ok());
  CHECK(CheckOutputFolder((d / "new").string() + "/", inputs).ok());
  fs::create_directory(d / "empty");
  CHECK(CheckOutputFolder((d / "empty").string(), inputs).ok());
  fs::create_directory(d / "full");
  WriteText(d / "full" / "x", "x");
  CHECK(CheckOutputFolder((d / "full").string(), inputs).message() ==
        "output '" + (d / "full").string() +
            "' is a folder that is not empty (give a new path, or an empty folder)");
  // A file, with or without a trailing slash (lstat of "file/" fails with
  // ENOTDIR: not "absent").
  WriteText(d / "afile", "x");
  CHECK(CheckOutputFolder((d / "afile").string() + "/", inputs).message() ==
        "output '" + (d / "afile").string() +
            "/' exists and is a regular file, not a folder (a model folder is written here: "
            "give a new path, or an empty folder)");
  CHECK(CheckOutputFolder((d / "in.bin").string(), inputs).message().find("is the input file") !=
        std::string::npos);
  fs::create_directory_symlink("empty", d / "link");
  CHECK(CheckOutputFolder((d / "link").string(), inputs).message().find("symbolic link") !=
        std::string::npos);
  // Parents: missing, or not a folder; empty paths and NUL bytes.
  CHECK(CheckOutputFolder((d / "no" / "out").string(), inputs).message() ==
        "cannot write output '" + (d / "no" / "out").string() + "': its folder '" +
            (d / "no").string() + "': No such file or directory");
  CHECK(CheckOutputFolder((d / "afile" / "out").string(), inputs).message() ==
        "cannot write output '" + (d / "afile" / "out").string() + "': its folder '" +
            (d / "afile").string() + "' is a regular file");
  CHECK(CheckOutputFolder("", inputs).message() == "output path is empty");
  CHECK(CheckOutputFolder(std::string("a\0b", 3), inputs).message() ==
        "output 'a\\x00b': the path holds a NUL byte");
  CHECK(
      CheckOutputPath((d / "x.safetensors").string() + "/", inputs).message().find("ends in '/'") !=
      std::string::npos);
  fs::remove_all(d);
}

TEST_CASE("AtomicFolder: unique temporaries, removed on failure, published by rename") {
  const fs::path d = FreshDir("atomicfolder");
  const std::string dest = (d / "model").string();
  auto temporaries = [&] {
    std::vector<std::string> t;
    for (const auto& e : fs::directory_iterator(d)) {
      const std::string n = e.path().filename().string();
      if (n.find(".nibble-tmp-") != std::string::npos) t.push_back(n);
    }
    return t;
  };
  {
    AtomicFolder a, b;  // two writers of one destination never share
    REQUIRE(a.Create(dest).ok());
    REQUIRE(b.Create(dest).ok());
    CHECK(a.path() != b.path());
    CHECK(a.path().rfind(TempPrefixFor(dest), 0) == 0);
    CHECK(temporaries().size() == 2);
    WriteText(fs::path(a.path()) / "f", "a");
    WriteText(fs::path(b.path()) / "f", "b");
    REQUIRE(a.Publish().ok());
    const Status st = b.Publish();  // the destination is no longer empty
    CHECK(st.message() == "cannot publish '" + dest +
                              "': something else created it meanwhile (it is not an empty folder "
                              "now); this run's result is discarded");
  }
  CHECK(ReadText(fs::path(dest) / "f") == "a");
  CHECK(temporaries().empty());  // b's removed when it went out of scope
  {
    AtomicFolder c;  // never published: removed
    REQUIRE(c.Create((d / "other").string()).ok());
    WriteText(fs::path(c.path()) / "f", "c");
  }
  CHECK(temporaries().empty());
  CHECK_FALSE(fs::exists(d / "other"));
  fs::remove_all(d);
}

TEST_CASE("RemoveStaleTemporaries: only a dead process's, of this host, of that destination") {
  const fs::path d = FreshDir("stale");
  const std::string dest = (d / "out").string();
  // A pid that no longer runs: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  std::string prefix = TempPrefixFor(dest);  // "<dest>.nibble-tmp-<host>-<pid>-"
  const std::string mine = std::to_string(::getpid()) + "-";
  const std::string host_part = prefix.substr(0, prefix.size() - mine.size());
  const std::string dead = host_part + std::to_string(child) + "-AbC123";
  const std::string live = host_part + std::to_string(::getppid()) + "-AbC123";
  const std::string own = prefix + "AbC123";
  const std::string other_host =
      dest + ".nibble-tmp-elsewhere-" + std::to_string(child) + "-AbC123";
  const std::string other_dest = (d / "outx").string() + ".nibble-tmp-" +
                                 host_part.substr(dest.size() + 12) + std::to_string(child) +
                                 "-AbC123";
  const std::string bad_suffix = host_part + std::to_string(child) + "-short";
  fs::create_directory(dead);
  WriteText(fs::path(dead) / "shard", "partial");
  for (const std::string& p : {live, own, other_host, other_dest, bad_suffix}) {
    fs::create_directory(p);
  }
  WriteText(dest + ".unrelated", "keep");
  const std::vector<std::string> removed = RemoveStaleTemporaries(dest);
  REQUIRE(removed.size() == 1);
  CHECK(fs::path(removed[0]).filename() == fs::path(dead).filename());
  CHECK_FALSE(fs::exists(dead));
  for (const std::string& p : {live, own, other_host, other_dest, bad_suffix}) {
    CHECK_MESSAGE(fs::exists(p), p);
  }
  CHECK(fs::exists(dest + ".unrelated"));
  fs::remove_all(d);
}

TEST_CASE("External data may not take the model's own name") {
  CHECK(ExternalDataPathFor("d/m.onnx", "m.onnx").status().message() ==
        "external data name 'm.onnx' is the model's own file name: the data would overwrite the "
        "model");
  CHECK(ExternalDataPathFor("m.onnx", "m.onnx").status().message().find("own file name") !=
        std::string::npos);
  CHECK(ExternalDataPathFor("d/m.onnx", "./m.onnx")
            .status()
            .message()
            .find("must be a plain file name") != std::string::npos);
  CHECK(ExternalDataPathFor("d/m.onnx", "/abs/m.onnx")
            .status()
            .message()
            .find("must be a plain file name") != std::string::npos);
  CHECK(*ExternalDataPathFor("d/m.onnx", "") == "d/m.onnx.data");
  CHECK(OldDataNameFor("d/m.onnx.data").rfind("d/m.onnx.data.nibble-old-", 0) == 0);
}

// A tensor of `shape` whose byte k is Byte(seed, k), produced whole or in
// row ranges; row ranges are recorded in *calls.
uint8_t StreamByte(int seed, uint64_t k) {
  return static_cast<uint8_t>(static_cast<uint64_t>(seed) * 31 + k * 7 + k / 5);
}

SafetensorsOutput StreamTensor(const std::string& name, DType dtype, Shape shape, int seed,
                               bool rows, std::vector<std::pair<int64_t, int64_t>>* calls,
                               int fail_at_call = -1) {
  SafetensorsOutput o;
  o.name = name;
  o.dtype = dtype;
  o.shape = shape;
  uint64_t n = static_cast<uint64_t>(DTypeBits(dtype) / 8);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  const int64_t nrows = shape.empty() ? 1 : shape[0];
  if (!rows) {
    o.fill = [n, seed](uint8_t* dst) {
      for (uint64_t k = 0; k < n; ++k) dst[k] = StreamByte(seed, k);
      return Status::Ok();
    };
    return o;
  }
  o.open_rows = [=]() -> StatusOr<SafetensorsOutput::RowWriter> {
    if (fail_at_call == 0) return Status::Error("cannot open " + name);
    return SafetensorsOutput::RowWriter(
        [=](int64_t r0, int64_t r1, void* dst, size_t dst_bytes) -> Status {
          calls->emplace_back(r0, r1);
          if (static_cast<int>(calls->size()) == fail_at_call) {
            return Status::Error("rows of " + name + " failed");
          }
          const uint64_t row_bytes = n / static_cast<uint64_t>(nrows);
          const uint64_t begin = row_bytes * static_cast<uint64_t>(r0);
          const uint64_t count = row_bytes * static_cast<uint64_t>(r1 - r0);
          REQUIRE(dst_bytes >= count);
          REQUIRE(reinterpret_cast<uintptr_t>(dst) % 4096 == 0);
          auto* p = static_cast<uint8_t*>(dst);
          for (uint64_t k = 0; k < count; ++k) p[k] = StreamByte(seed, begin + k);
          return Status::Ok();
        });
  };
  return o;
}

TEST_CASE(
    "WriteSafetensorsStreaming: row chunks of any size == whole tensors, failures leave nothing") {
  const fs::path d = FreshDir("stream");
  struct Spec {
    const char* name;
    DType dtype;
    Shape shape;
  };
  const std::vector<Spec> specs = {
      {"a", DType::kFloat32, {7, 5}},      {"b", DType::kFloat16, {3}},
      {"empty", DType::kFloat32, {0, 4}},  {"s", DType::kFloat32, {}},
      {"c", DType::kBFloat16, {13, 3, 2}}, {"d", DType::kFloat16, {1, 9}}};
  auto outputs = [&](int mode, std::vector<std::pair<int64_t, int64_t>>* calls, int fail_at) {
    std::vector<SafetensorsOutput> outs;
    for (size_t i = 0; i < specs.size(); ++i) {
      // mode 0: all whole; 1: all in rows; 2: alternating.
      const bool rows = mode == 1 || (mode == 2 && i % 2 == 0);
      outs.push_back(StreamTensor(specs[i].name, specs[i].dtype, specs[i].shape,
                                  static_cast<int>(i), rows, calls, fail_at));
    }
    return outs;
  };
  std::vector<std::pair<int64_t, int64_t>> calls;
  SafetensorsWriteOptions wo;
  wo.metadata["format"] = "pt";
  REQUIRE(WriteSafetensorsStreaming((d / "whole.safetensors").string(), outputs(0, &calls, -1), wo)
              .ok());
  CHECK(calls.empty());
  const std::string want = ReadText(d / "whole.safetensors");
  for (uint64_t chunk : {uint64_t{1}, uint64_t{20}, uint64_t{64}, uint64_t{1} << 20}) {
    for (int mode : {1, 2}) {
      CAPTURE(chunk);
      CAPTURE(mode);
      calls.clear();
      wo.chunk_bytes = chunk;
      const fs::path p = d / "rows.safetensors";
      REQUIRE(WriteSafetensorsStreaming(p.string(), outputs(mode, &calls, -1), wo).ok());
      CHECK(ReadText(p) == want);
      // Each streamed tensor's ranges are consecutive and cover its rows.
      CHECK(!calls.empty());
      for (size_t k = 0; k + 1 < calls.size(); ++k) {
        CHECK((calls[k + 1].first == calls[k].second || calls[k + 1].first == 0));
      }
    }
  }
  // A producer failing at its open or at any chunk: an error, no file.
  fs::remove(d / "rows.safetensors");
  for (int fail_at : {0, 1, 2, 5}) {
    CAPTURE(fail_at);
    calls.clear();
    wo.chunk_bytes = 20;
    const fs::path p = d / "fail.safetensors";
    const Status st = WriteSafetensorsStreaming(p.string(), outputs(1, &calls, fail_at), wo);
    CHECK(!st.ok());
    CHECK(st.message().find(fail_at == 0 ? "cannot open a" : "failed") != std::string::npos);
    CHECK(!fs::exists(p));
  }
  int files = 0;
  for (const auto& e : fs::directory_iterator(d)) files += e.is_regular_file() ? 1 : 0;
  CHECK(files == 1);  // whole.safetensors only: no temporary left
  // A tensor that nothing produces is refused before anything is written.
  std::vector<SafetensorsOutput> none(1);
  none[0].name = "x";
  none[0].shape = {2};
  CHECK(WriteSafetensorsStreaming((d / "none.safetensors").string(), none, wo)
            .message()
            .find("nothing produces") != std::string::npos);
  CHECK(!fs::exists(d / "none.safetensors"));
  fs::remove_all(d);
}

TEST_CASE("A model that cannot be named puts back the data file it replaced") {
  const fs::path d = FreshDir("publish");
  fs::create_directories(d / "out.onnx");  // the model cannot be renamed over a folder
  WriteText(d / "out.onnx.data", "unrelated");
  nibble_onnx::ModelProto m;
  m.mutable_graph()->set_name("g");
  std::vector<StreamedTensor> t(1);
  t[0].meta.set_name("w");
  t[0].meta.set_data_type(1);
  t[0].meta.add_dims(4);
  t[0].bytes = 16;
  t[0].fill = [](uint8_t* dst) {
    std::fill(dst, dst + 16, uint8_t{7});
    return Status::Ok();
  };
  ModelWriteOptions o;
  o.external = true;
  const Status st = WriteModelStreaming((d / "out.onnx").string(), m, t, o);
  CHECK_FALSE(st.ok());
  CHECK(ReadText(d / "out.onnx.data") == "unrelated");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(d)) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 2);  // the folder and the data file, nothing else
  fs::remove_all(d);
}

TEST_CASE("An output over an input read in place is refused (not over a copied one)") {
  // int8 x [8, 64] per row (axis 0), float32 output: 2 KiB of output from
  // 512 bytes of codes, all in one arena so that the output can be placed
  // over each input.
  constexpr int64_t kR = 8, kC = 64;
  alignas(64) static uint8_t arena[1 << 16];
  uint8_t* const x = arena + 8192;  // codes
  auto* const s32 = reinterpret_cast<float*>(arena + 16384);
  auto* const s16 = reinterpret_cast<uint16_t*>(arena + 20480);
  for (int64_t i = 0; i < kR * kC; ++i) x[i] = static_cast<uint8_t>(i * 7 - 100);
  for (int64_t r = 0; r < kR; ++r) {
    s32[r] = 0.25f * static_cast<float>(r + 1);
    s16[r] = static_cast<uint16_t>(0x3400 + 0x400 * r);  // 0.25, 0.5, 1, ...
  }
  OnnxDequantizeAttributes a;
  a.axis = 0;
  a.has_axis = true;
  const TensorView xv{DType::kInt8, {kR, kC}, x, kR * kC};
  const size_t out_bytes = kR * kC * 4;
  auto out_at = [&](uint8_t* p) {
    return MutableTensorView{DType::kFloat32, {kR, kC}, p, out_bytes};
  };
  std::vector<float> want(static_cast<size_t>(kR * kC));
  {  // float32 scales: read in place
    auto d = PrepareOnnx(a, xv, {DType::kFloat32, {kR}, s32, kR * 4}, nullptr, {});
    REQUIRE(d.ok());
    REQUIRE(d->Run(MutableTensorView{DType::kFloat32, {kR, kC}, want.data(), out_bytes}, 1).ok());
    const Status in_x = d->Run(out_at(x - 100), 1);
    CHECK(in_x.message() ==
          "DequantizeLinear: the output overlaps input x, which is read while the output is "
          "written (use a separate output buffer)");
    CHECK(d->Run(out_at(arena + 16384 + 4 * kR - out_bytes), 1)
              .message()
              .find("overlaps input x_scale") != std::string::npos);
    REQUIRE(d->Run(out_at(x + kR * kC), 1).ok());  // just past the codes
    CHECK(std::memcmp(x + kR * kC, want.data(), out_bytes) == 0);
    CHECK(d->Run(out_at(x - out_bytes), 1).ok());  // just before them
    CHECK_FALSE(d->RunRows(2, 3, x + 10, 4 * kC, 1).ok());
    CHECK_FALSE(
        d->RunTransposed(MutableTensorView{DType::kFloat32, {kC, kR}, x, out_bytes}, 1).ok());
    // Tiles of 16 floats a row, `ld` apart: the codes between two rows
    // are allowed; a row over them is refused.
    uint8_t* const t0 = x - 16 * 4 - 16;                  // row 0 ends 16 bytes before x
    const int64_t ld = (kR * kC + 16 * 4 + 16 + 16) / 4;  // row 1 starts 16 bytes past the codes
    CHECK(d->RunTile(0, 2, 0, 16, t0, ld).ok());
    const Status tile = d->RunTile(0, 2, 0, 16, t0, ld - 8);
    CHECK(tile.message().rfind("RunTile: the output overlaps input x,", 0) == 0);
    CHECK(d->RunTile(0, 1, 0, 16, t0, ld - 8).ok());  // one row: ends before x
    for (int64_t i = 0; i < kR * kC; ++i) {           // the refusals wrote nothing
      CHECK(x[i] == static_cast<uint8_t>(i * 7 - 100));
    }
  }
  {  // float16 scales (and output) are widened into the Dequantizer: the
     // caller's scale memory is free to hold the output
    auto d = PrepareOnnx(a, xv, {DType::kFloat16, {kR}, s16, kR * 2}, nullptr, {});
    REQUIRE(d.ok());
    const size_t h_bytes = kR * kC * 2;
    auto h_at = [&](void* p) { return MutableTensorView{DType::kFloat16, {kR, kC}, p, h_bytes}; };
    std::vector<uint16_t> sep(static_cast<size_t>(kR * kC));
    REQUIRE(d->Run(h_at(sep.data()), 1).ok());
    uint8_t* const over = reinterpret_cast<uint8_t*>(s16) - 64;
    REQUIRE(d->Run(h_at(over), 1).ok());
    CHECK(std::memcmp(over, sep.data(), h_bytes) == 0);
    CHECK_FALSE(d->Run(h_at(x + 1), 1).ok());  // the codes are still read in place
  }
}

TEST_CASE("Thread counts are checked") {
  CHECK(CheckThreads(0).ok());
  CHECK(CheckThreads(kMaxThreads).ok());
  CHECK(CheckThreads(kMaxThreads + 1).message() ==
        "threads must be between 0 (all cores) and 1024 (got 1025)");
  CHECK_FALSE(CheckThreads(-1).ok());
  CHECK_FALSE(CheckThreads(int64_t{1} << 40).ok());
}

#if !defined(__SANITIZE_ADDRESS__)
// (AddressSanitizer aborts on impossible allocations instead of throwing,
// and needs more address space than RLIMIT_AS leaves.)
TEST_CASE("An allocation that fails inside PrepareOnnx is an out-of-memory status") {
  const int64_t n = int64_t{1} << 23;
  std::vector<uint8_t> x(static_cast<size_t>(n));
  std::vector<uint16_t> s(static_cast<size_t>(n), 0x3C00);  // float16 1.0
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // the child caps its address space, then prepares
    size_t vm = 0;
    std::ifstream st("/proc/self/status");
    for (std::string line; std::getline(st, line);) {
      if (line.rfind("VmSize:", 0) == 0) vm = std::stoull(line.substr(7)) * 1024;
    }
    const rlim_t cap = vm + (rlim_t{16} << 20);
    struct rlimit lim = {cap, cap};
    if (vm == 0 || ::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(3);
    OnnxDequantizeAttributes a;
    a.axis = 0;
    a.has_axis = true;
    // float16 scales are widened to float32 (32 MiB) while preparing.
    auto d = PrepareOnnx(a, {DType::kUInt8, {n, 1}, x.data(), x.size()},
                         {DType::kFloat16, {n}, s.data(), s.size() * 2}, nullptr, {});
    ::_exit(!d.ok() && d.status().message() == "out of memory in PrepareOnnx" ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("An allocation that cannot succeed is an out-of-memory status") {
  auto t = Tensor::Allocate(DType::kFloat32, {int64_t{1} << 30, int64_t{1} << 20});  // 4 PiB
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().message().rfind(kOutOfMemory, 0) == 0);
  CHECK(t.status().message().find("float32 (1073741824,1048576)") != std::string::npos);
}
#endif

}  // namespace
}  // namespace nibble

namespace nibble {
namespace {
TEST_CASE("ParamVector: populated large blocks and small ones hold, copy, grow and free") {
  // Below and above PopulatedAllocator's mapping threshold, and a vector
  // that grows across it (each block is freed with the size it had).
  for (size_t n : {size_t{10}, size_t{1} << 20}) {
    ParamVector<float> v(n, 1.5f);
    CHECK(v.size() == n);
    CHECK(v.front() == 1.5f);
    CHECK(v.back() == 1.5f);
    v.back() = 2.0f;
    ParamVector<float> copy = v;
    CHECK(copy.back() == 2.0f);
  }
  ParamVector<int32_t> grow;
  for (int32_t i = 0; i < (1 << 18); ++i) grow.push_back(i);
  CHECK(grow[12345] == 12345);
  CHECK(grow.back() == (1 << 18) - 1);
  // An impossible size fails as std::bad_alloc (the front ends turn it into
  // an out-of-memory error), not a crash.
  CHECK_THROWS_AS(PopulatedAllocator<float>().allocate(size_t{1} << 60), std::bad_alloc);
}

// Fills n floats with a pattern of `seed` and checks it back.
void FillAndCheck(float* p, size_t n, float seed) {
  for (size_t i = 0; i < n; ++i) p[i] = seed + static_cast<float>(i % 1000);
  bool same = true;
  for (size_t i = 0; i < n; ++i) same = same && p[i] == seed + static_cast<float>(i % 1000);
  CHECK(same);
}

TEST_CASE("ParamVector: freed blocks are reused by the freeing thread, within the limits") {
  ReleaseCachedParameterBlocks();
  PopulatedAllocator<float> a;
  const size_t big = size_t{1} << 18;  // 1 MiB of floats
  float* p = a.allocate(big);
  FillAndCheck(p, big, 1.0f);
  a.deallocate(p, big);
#ifdef __linux__
  // A request of at least half the block's size reuses it (whole, writable).
  float* q = a.allocate(big * 3 / 4);
  CHECK(q == p);
  FillAndCheck(q, big * 3 / 4, 2.0f);
  a.deallocate(q, big * 3 / 4);
  // Less than half: a new block (the cached one stays cached, so the
  // addresses differ).
  float* r = a.allocate(big / 4);
  CHECK(r != p);
  FillAndCheck(r, big / 4, 3.0f);
  // The larger block again, while r is live.
  float* s = a.allocate(big);
  CHECK(s == p);
  FillAndCheck(s, big, 4.0f);
  a.deallocate(r, big / 4);
  a.deallocate(s, big);
  // After a release nothing is reused.
  ReleaseCachedParameterBlocks();
  float* t = a.allocate(big);
  FillAndCheck(t, big, 5.0f);
  a.deallocate(t, big);
#endif
  // More blocks than the cache keeps, of many sizes, one larger than the
  // cache's byte limit: each is freed (kept or unmapped) and the survivors
  // are still whole when reused.
  std::vector<std::pair<float*, size_t>> blocks;
  for (size_t i = 0; i < 12; ++i) {
    const size_t n = (size_t{1} << 16) * (i + 1) + 7 * i;
    blocks.emplace_back(a.allocate(n), n);
    FillAndCheck(blocks.back().first, n, static_cast<float>(i));
  }
  const size_t huge = size_t{40} << 18;  // 40 MiB of floats
  blocks.emplace_back(a.allocate(huge), huge);
  FillAndCheck(blocks.back().first, huge, 99.0f);
  for (auto& [b, n] : blocks) a.deallocate(b, n);
  for (size_t i = 0; i < 12; ++i) {
    const size_t n = (size_t{1} << 16) * (12 - i);
    float* b = a.allocate(n);
    FillAndCheck(b, n, 7.0f);
    a.deallocate(b, n);
  }
  // A block allocated here, freed on another thread, is kept (and unmapped
  // at that thread's exit); one allocated there is freed here.
  float* mine = a.allocate(big);
  float* theirs = nullptr;
  std::thread other([&] {
    a.deallocate(mine, big);
    theirs = a.allocate(big / 2 + 1);
    FillAndCheck(theirs, big / 2 + 1, 8.0f);
  });
  other.join();
  FillAndCheck(theirs, big / 2 + 1, 9.0f);
  a.deallocate(theirs, big / 2 + 1);
  ReleaseCachedParameterBlocks();
}

// Runs f on a new thread whose stack size is `bytes` and waits for it.
void OnThreadWithStack(size_t bytes, const std::function<void()>& f) {
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, bytes) == 0);
  auto body = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  pthread_t thread;
  const int created = pthread_create(&thread, &attr, body, const_cast<std::function<void()>*>(&f));
  pthread_attr_destroy(&attr);
  REQUIRE(created == 0);
  REQUIRE(pthread_join(thread, nullptr) == 0);
}

// The bytes of a new thread's stack that glibc takes before the thread's
// function runs: the static TLS of every loaded library (OpenBLAS alone
// has 60 KiB) and the thread's descriptor, which glibc carves out of the
// stack size asked for (musl adds them to it).
size_t StackTakenAtStart() {
  size_t taken = 0;
  OnThreadWithStack(size_t{1} << 20, [&] {
    pthread_attr_t attr;
    void* lo = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      pthread_attr_getstack(&attr, &lo, &size);
      pthread_attr_destroy(&attr);
    }
    const char here = 0;
    const uintptr_t top = reinterpret_cast<uintptr_t>(lo) + size;
    const uintptr_t at = reinterpret_cast<uintptr_t>(&here);
    taken = lo != nullptr && at < top ? top - at : 0;
  });
  return taken;
}

// A runtime's threads may have small stacks (musl's default is 128 KiB,
// TLS besides): the column layouts' kernels (GPTQ, act-order, AWQ) and a
// block layout on every compiled target, every output type, give on such
// a thread the bytes they give on the main thread. (The largest kernel
// frames are 50-85 KiB; stages beyond that live in KernelScratch: with
// AVX2's AWQ stages back on the stack, 147 KiB, this test crashes.)
TEST_CASE("Kernels run on a thread with a 128 KiB stack (besides TLS)") {
  const SampleLayers layers(7, 5);
  const size_t stack = StackTakenAtStart() + (size_t{128} << 10);
  CAPTURE(stack);
  layers.ForEachTargetAndOutput([&](const std::vector<Dequantizer>& ds, DType out) {
    for (const Dequantizer& d : ds) {
      const int64_t rows = d.rows(), cols = d.cols();
      const size_t bytes = static_cast<size_t>(rows * cols * DTypeBits(out) / 8);
      std::vector<uint8_t> here(bytes), there(bytes, 0xEE);
      REQUIRE(d.RunTile(0, rows, 0, cols, here.data(), cols).ok());
      bool ok = false;
      OnThreadWithStack(stack, [&] {
        ok = d.RunTile(0, rows, 0, cols, there.data(), cols).ok();
        ReleaseKernelScratch();
      });
      CHECK(ok);
      CHECK(here == there);
    }
  });
}

TEST_CASE("KernelScratch: 64-byte aligned, grow-only, one block per thread, released") {
  ReleaseKernelScratch();
  auto aligned = [](const uint8_t* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; };
  uint8_t* const a = KernelScratch(100);
  REQUIRE(a != nullptr);
  CHECK(aligned(a));
  CHECK(KernelScratch(50) == a);  // smaller: the same block
  const size_t big = size_t{150} << 10;
  uint8_t* const b = KernelScratch(big);
  REQUIRE(b != nullptr);
  CHECK(aligned(b));
  std::memset(b, 0x5A, big);  // whole and writable
  CHECK(KernelScratch(1) == b);
  // Another thread has its own block.
  uint8_t* theirs = nullptr;
  std::thread other([&] {
    theirs = KernelScratch(big);
    if (theirs != nullptr) std::memset(theirs, 0x33, big);
  });
  other.join();
  CHECK(theirs != nullptr);
  CHECK(theirs != b);
  CHECK(b[0] == 0x5A);
  CHECK(b[big - 1] == 0x5A);
  // A size that cannot be had is nullptr (the callers then take another
  // path; only the rounding overflow here: a huge allocation would stop
  // the sanitizer build), and the thread gets memory again afterwards.
  CHECK(KernelScratch(SIZE_MAX) == nullptr);
  uint8_t* const c = KernelScratch(64);
  REQUIRE(c != nullptr);
  CHECK(aligned(c));
  ReleaseKernelScratch();
  uint8_t* const d = KernelScratch(4096);
  REQUIRE(d != nullptr);
  std::memset(d, 1, 4096);
  ReleaseKernelScratch();
}
}  // namespace
}  // namespace nibble
