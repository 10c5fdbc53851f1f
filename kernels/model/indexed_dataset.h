// Megatron-LM's indexed dataset (megatron/core/datasets/indexed_dataset.py):
// PREFIX.idx describes sequences of token ids that lie back to
// back in PREFIX.bin. Little-endian throughout:
//
//   .idx  magic "MMIDIDX\0\0" (9 bytes), version uint64 = 1, dtype code uint8
//         (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32,
//         8 uint16), sequence count S uint64, document count D uint64, then
//         int32 lengths[S] (tokens), int64 pointers[S] (byte offsets into
//         .bin), int64 document_indices[D]: document d is sequences
//         [document_indices[d], document_indices[d + 1]), so D is the number
//         of documents + 1 (Megatron writes [0, ..., S]).
//   .bin  the token ids in that dtype.
//
// open() checks every rule of the format before anything reads a token, and
// that every token is a non-negative integer; a broken file throws
// UsageError, one line naming the file and the rule.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sextant::model {

class IndexedDataset {
 public:
  // Reads PREFIX.idx and maps PREFIX.bin. `option` names the user's
  // parameter in error messages ("--set data=PREFIX").
  static std::shared_ptr<const IndexedDataset> open(const std::string& prefix,
                                                    const std::string& option = "--set data");
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  const std::string& prefix() const { return prefix_; }
  std::string idx_path() const { return prefix_ + ".idx"; }
  std::string bin_path() const { return prefix_ + ".bin"; }
  int dtype_code() const { return dtype_code_; }
  int64_t sequences() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t documents() const { return static_cast<int64_t>(document_indices_.size()) - 1; }
  int64_t tokens() const { return starts_.back(); }  // over every sequence
  int64_t max_token() const { return max_token_; }   // -1 when empty
  const std::vector<int64_t>& document_indices() const { return document_indices_; }

  // Tokens [start, start + count) of the sequences laid end to end in
  // sequence order (documents follow each other in that order).
  void read(int64_t start, int64_t count, int64_t* out) const;

 private:
  IndexedDataset() = default;
  void parse_index(const std::vector<char>& idx, const std::string& where);
  void check_pointers(int64_t bin_bytes, const std::string& where);
  void check_documents(const std::string& where);
  void map_bin(const std::string& where);
  void scan_tokens(const std::string& where);
  int64_t token(int64_t sequence, int64_t position) const;

  std::string prefix_;
  int dtype_code_ = 0;
  int64_t item_size_ = 0;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> pointers_, document_indices_;
  std::vector<int64_t> starts_ = {0};  // [S + 1]: first token of each sequence end to end
  int64_t max_token_ = -1;
  const unsigned char* bin_ = nullptr;  // mapped .bin
  size_t bin_bytes_ = 0;
};

// Writes documents (one sequence each, as Megatron's preprocess_data.py
// writes a document without sentence splitting) as PREFIX.idx and
// PREFIX.bin in the integer dtype of `dtype_code` (1, 2, 3, 4, 5 or 8).
// Throws RuntimeError when a file cannot be written or a token does not fit.
void write_indexed_dataset(const std::string& prefix, const std::vector<std::vector<int64_t>>& documents,
                           int dtype_code);

// Hex SHA-256 of a file's bytes (OpenSSL), for the results.
std::string file_sha256(const std::string& path);

}  // namespace sextant::model
