// The indexed dataset reader on files written here byte by byte as
// Megatron's writer lays them out, and one broken file per rule of the format.
#include "kernels/model/indexed_dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "harness/error.h"
#include "kernels/model/testing/indexed_files.h"

namespace sextant::model {
namespace {

using testing::Files;
using testing::temp_dir;
namespace fs = std::filesystem;

Files sample() { return Files::of<uint16_t>({{1, 2, 3}, {256}, {}, {7, 8}}, 8, 2); }

std::vector<int64_t> read_all(const IndexedDataset& d) {
  std::vector<int64_t> out(static_cast<size_t>(d.tokens()));
  d.read(0, d.tokens(), out.data());
  return out;
}

// Opening fails with one line that names `file` (idx or bin) and says `rule`.
void expect_refused(const Files& f, const std::string& name, const std::string& file, const std::string& rule) {
  const std::string prefix = f.write(name);
  try {
    IndexedDataset::open(prefix);
    ADD_FAILURE() << name << ": opened a broken dataset";
  } catch (const UsageError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--set data=" + prefix), std::string::npos) << message;
    EXPECT_NE(message.find(prefix + "." + file), std::string::npos) << message;
    EXPECT_NE(message.find(rule), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(IndexedDataset, ReadsWhatMegatronWrites) {
  const auto d = IndexedDataset::open(sample().write("good"));
  EXPECT_EQ(d->dtype_code(), 8);
  EXPECT_EQ(d->sequences(), 4);
  EXPECT_EQ(d->documents(), 2);
  EXPECT_EQ(d->document_indices(), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(d->tokens(), 6);
  EXPECT_EQ(d->max_token(), 256);
  EXPECT_EQ(read_all(*d), (std::vector<int64_t>{1, 2, 3, 256, 7, 8}));
  int64_t window[3];
  d->read(2, 3, window);  // across two sequence boundaries and an empty sequence
  EXPECT_EQ(std::vector<int64_t>(window, window + 3), (std::vector<int64_t>{3, 256, 7}));
  EXPECT_THROW(d->read(4, 3, window), RuntimeError);
}

TEST(IndexedDataset, ReadsEveryDtype) {
  EXPECT_EQ(read_all(*IndexedDataset::open(Files::of<uint8_t>({{0, 255}}, 1).write("u8"))),
            (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(read_all(*IndexedDataset::open(Files::of<int8_t>({{5, 127}}, 2).write("i8"))),
            (std::vector<int64_t>{5, 127}));
  EXPECT_EQ(read_all(*IndexedDataset::open(Files::of<int16_t>({{300}}, 3).write("i16"))), std::vector<int64_t>{300});
  EXPECT_EQ(read_all(*IndexedDataset::open(Files::of<int32_t>({{70000}, {1}}, 4).write("i32"))),
            (std::vector<int64_t>{70000, 1}));
  EXPECT_EQ(read_all(*IndexedDataset::open(Files::of<int64_t>({{1LL << 40}}, 5).write("i64"))),
            std::vector<int64_t>{1LL << 40});
  EXPECT_EQ(read_all(*IndexedDataset::open(Files::of<double>({{3.0}}, 6).write("f64"))), std::vector<int64_t>{3});
  EXPECT_EQ(read_all(*IndexedDataset::open(Files::of<float>({{9.0f}}, 7).write("f32"))), std::vector<int64_t>{9});
}

TEST(IndexedDataset, RefusesEachBrokenRule) {
  Files f = sample();
  f.magic[3] = 'X';
  expect_refused(f, "magic", "idx", "bad magic");
  f = sample();
  f.version = 2;
  expect_refused(f, "version", "idx", "version 2");
  for (uint8_t code : {0, 9}) {
    f = sample();
    f.code = code;
    expect_refused(f, "code", "idx", "unknown dtype code");
  }
  f = sample();
  f.idx_cut = 8;  // the last document index is missing
  expect_refused(f, "cut", "idx", "truncated");
  f = sample();
  f.idx_cut = 30;  // inside the header
  expect_refused(f, "header", "idx", "header");
  f = sample();
  f.bin.pop_back();
  expect_refused(f, "bin", "bin", "truncated");
  f = sample();
  f.pointers[1] = 1000;
  expect_refused(f, "pointer_out", "idx", "outside");
  f = sample();
  f.pointers[0] = -2;
  expect_refused(f, "pointer_negative", "idx", "outside");
  f = sample();
  f.pointers[1] = 2;  // inside sequence 0
  expect_refused(f, "pointer_order", "idx", "pointers must ascend");
  f = sample();
  f.lengths[0] = -1;
  expect_refused(f, "length", "idx", "negative length");
  f = sample();
  f.documents = {0, 3, 2, 4};
  expect_refused(f, "doc_order", "idx", "out of order");
  f = sample();
  f.documents = {0, 2, 5};
  expect_refused(f, "doc_range", "idx", "outside [0, 4]");
  f = sample();
  f.documents = {1, 2, 4};
  expect_refused(f, "doc_first", "idx", "first document index");
  f = sample();
  f.documents = {0, 2};
  expect_refused(f, "doc_last", "idx", "last document index");
  f = sample();
  f.documents = {};
  expect_refused(f, "doc_none", "idx", "no document indices");
  expect_refused(Files::of<int8_t>({{3, -1}}, 2), "negative_token", "bin", "not a token id");
  expect_refused(Files::of<float>({{1.5f}}, 7), "fraction", "bin", "not a token id");
}

TEST(IndexedDataset, MissingFilesAreUsageErrors) {
  const std::string prefix = sample().write("missing");
  fs::remove(prefix + ".bin");
  EXPECT_THROW(IndexedDataset::open(prefix), UsageError);
  EXPECT_THROW(IndexedDataset::open(prefix + "_nowhere"), UsageError);
}

// The writer lays out the bytes Megatron's writer does (the fixture above)
// and the reader reads them back.
TEST(IndexedDataset, WritesWhatMegatronWrites) {
  const std::vector<std::vector<int64_t>> docs = {{1, 2, 3}, {256, 0}, {7}};
  const Files megatron = Files::of<uint16_t>({{1, 2, 3}, {256, 0}, {7}}, 8);
  const std::string theirs = megatron.write("theirs"), ours = (temp_dir() / "ours").string();
  write_indexed_dataset(ours, docs, 8);
  EXPECT_EQ(file_sha256(ours + ".idx"), file_sha256(theirs + ".idx"));
  EXPECT_EQ(file_sha256(ours + ".bin"), file_sha256(theirs + ".bin"));
  EXPECT_EQ(read_all(*IndexedDataset::open(ours)), (std::vector<int64_t>{1, 2, 3, 256, 0, 7}));
  EXPECT_THROW(write_indexed_dataset(ours, {{70000}}, 8), RuntimeError);
  EXPECT_THROW(write_indexed_dataset(ours, {{1}}, 7), RuntimeError);
}

TEST(IndexedDataset, Sha256OfAFile) {
  const std::string path = (temp_dir() / "abc").string();
  std::ofstream(path) << "abc";
  EXPECT_EQ(file_sha256(path), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace sextant::model
