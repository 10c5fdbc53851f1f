#include "kernels/model/indexed_dataset.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::model {

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr int64_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

// Bytes per token of each dtype code (0: unknown code).
int64_t item_size_of(int code) {
  switch (code) {
    case 1:
    case 2: return 1;  // uint8, int8
    case 3:
    case 8: return 2;  // int16, uint16
    case 4:
    case 7: return 4;  // int32, float32
    case 5:
    case 6: return 8;  // int64, float64
    default: return 0;
  }
}

template <class T>
T load(const unsigned char* at) {
  T value;
  std::memcpy(&value, at, sizeof value);  // the file's little-endian bytes, on a little-endian host
  return value;
}

// The token at `at` as a double (exact for every integer a token id can be).
double token_value(int code, const unsigned char* at) {
  switch (code) {
    case 1: return load<uint8_t>(at);
    case 2: return load<int8_t>(at);
    case 3: return load<int16_t>(at);
    case 4: return load<int32_t>(at);
    case 5: return static_cast<double>(load<int64_t>(at));
    case 6: return load<double>(at);
    case 7: return load<float>(at);
    case 8: return load<uint16_t>(at);
    default: return -1;
  }
}

std::vector<char> read_file(const std::string& path, const std::string& where) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), cat(where, ": cannot open ", path, ": ", std::strerror(errno)));
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

std::shared_ptr<const IndexedDataset> IndexedDataset::open(const std::string& prefix, const std::string& option) {
  std::shared_ptr<IndexedDataset> d(new IndexedDataset());
  d->prefix_ = prefix;
  const std::string where = cat(option, "=", prefix);
  d->parse_index(read_file(d->idx_path(), where), where);
  d->map_bin(where);
  d->check_pointers(static_cast<int64_t>(d->bin_bytes_), where);
  d->check_documents(where);
  d->scan_tokens(where);
  return d;
}

IndexedDataset::~IndexedDataset() {
  if (bin_) munmap(const_cast<unsigned char*>(bin_), bin_bytes_);
}

void IndexedDataset::parse_index(const std::vector<char>& idx, const std::string& where) {
  const std::string file = idx_path();
  const auto* bytes = reinterpret_cast<const unsigned char*>(idx.data());
  const int64_t size = static_cast<int64_t>(idx.size());
  require(size >= kHeaderBytes,
          cat(where, ": ", file, " has ", size, " bytes, fewer than the ", kHeaderBytes, "-byte header"));
  require(std::memcmp(bytes, kMagic, sizeof kMagic) == 0,
          cat(where, ": ", file, ": bad magic (an indexed dataset's .idx starts with MMIDIDX\\x00\\x00)"));
  const uint64_t version = load<uint64_t>(bytes + 9);
  require(version == 1, cat(where, ": ", file, ": version ", version, ", only version 1 is known"));
  dtype_code_ = bytes[17];
  item_size_ = item_size_of(dtype_code_);
  require(item_size_ > 0, cat(where, ": ", file, ": unknown dtype code ", dtype_code_,
                              " (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)"));
  const uint64_t sequences = load<uint64_t>(bytes + 18), documents = load<uint64_t>(bytes + 26);
  // Each array must fit in what follows the header (checked by division: no overflow).
  const uint64_t room = static_cast<uint64_t>(size - kHeaderBytes);
  const bool fits = sequences <= room / 12 && documents <= (room - 12 * sequences) / 8;
  require(fits,
          cat(where, ": ", file, " is truncated: ", sequences, " sequences and ", documents, " document indices need ",
              kHeaderBytes, " + 12 x ", sequences, " + 8 x ", documents, " bytes, the file has ", size));
  const unsigned char* at = bytes + kHeaderBytes;
  lengths_.resize(sequences);
  pointers_.resize(sequences);
  document_indices_.resize(documents);
  if (sequences) std::memcpy(lengths_.data(), at, 4 * sequences);
  if (sequences) std::memcpy(pointers_.data(), at + 4 * sequences, 8 * sequences);
  if (documents) std::memcpy(document_indices_.data(), at + 12 * sequences, 8 * documents);
  starts_.assign(1, 0);
  for (uint64_t i = 0; i < sequences; ++i) {
    require(lengths_[i] >= 0, cat(where, ": ", file, ": sequence ", i, " has negative length ", lengths_[i]));
    starts_.push_back(starts_.back() + lengths_[i]);
  }
}

void IndexedDataset::map_bin(const std::string& where) {
  const std::string file = bin_path();
  const int fd = ::open(file.c_str(), O_RDONLY);
  require(fd >= 0, cat(where, ": cannot open ", file, ": ", std::strerror(errno)));
  struct stat st {};
  const bool stat_ok = fstat(fd, &st) == 0;
  bin_bytes_ = stat_ok ? static_cast<size_t>(st.st_size) : 0;
  void* mapped = bin_bytes_ ? mmap(nullptr, bin_bytes_, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  ::close(fd);
  if (!stat_ok || mapped == MAP_FAILED)
    throw RuntimeError(cat(where, ": cannot map ", file, ": ", std::strerror(errno)));
  bin_ = static_cast<const unsigned char*>(mapped);
}

void IndexedDataset::check_pointers(int64_t bin_bytes, const std::string& where) {
  const std::string file = idx_path();
  int64_t end_of_previous = 0;
  for (size_t i = 0; i < pointers_.size(); ++i) {
    const int64_t p = pointers_[i];
    require(p >= 0 && p <= bin_bytes, cat(where, ": ", file, ": pointer ", p, " of sequence ", i, " is outside ",
                                          bin_path(), " (", bin_bytes, " bytes)"));
    require(p >= end_of_previous,
            cat(where, ": ", file, ": pointer ", p, " of sequence ", i, " is before the end of sequence ", i - 1,
                " (byte ", end_of_previous, "): pointers must ascend and sequences must not overlap"));
    const int64_t end = p + lengths_[i] * item_size_;
    require(end <= bin_bytes, cat(where, ": ", bin_path(), " is truncated: sequence ", i, " (", lengths_[i],
                                  " tokens from byte ", p, ") ends at byte ", end, ", the file has ", bin_bytes));
    end_of_previous = end;
  }
}

void IndexedDataset::check_documents(const std::string& where) {
  const std::string file = idx_path();
  const int64_t sequences = static_cast<int64_t>(lengths_.size());
  require(!document_indices_.empty(), cat(where, ": ", file, ": no document indices (Megatron writes at least [0])"));
  require(document_indices_.front() == 0,
          cat(where, ": ", file, ": the first document index is ", document_indices_.front(), ", not 0"));
  for (size_t d = 0; d < document_indices_.size(); ++d) {
    const int64_t v = document_indices_[d];
    require(v >= 0 && v <= sequences,
            cat(where, ": ", file, ": document index ", d, " is ", v, ", outside [0, ", sequences, "] sequences"));
    require(d == 0 || v >= document_indices_[d - 1], cat(where, ": ", file, ": document indices out of order: index ",
                                                         d, " is ", v, " after ", document_indices_[d - 1]));
  }
  require(document_indices_.back() == sequences,
          cat(where, ": ", file, ": the last document index is ", document_indices_.back(), ", not the sequence count ",
              sequences, " (every sequence belongs to a document)"));
}

void IndexedDataset::scan_tokens(const std::string& where) {
  for (size_t i = 0; i < lengths_.size(); ++i)
    for (int64_t t = 0; t < lengths_[i]; ++t) {
      const double v = token_value(dtype_code_, bin_ + pointers_[i] + t * item_size_);
      require(v >= 0 && std::floor(v) == v && v < 9.0e15,
              cat(where, ": ", bin_path(), ": token ", t, " of sequence ", i, " is ", v,
                  ", not a token id (a non-negative integer)"));
      max_token_ = std::max(max_token_, static_cast<int64_t>(v));
    }
}

int64_t IndexedDataset::token(int64_t sequence, int64_t position) const {
  return static_cast<int64_t>(token_value(dtype_code_, bin_ + pointers_[sequence] + position * item_size_));
}

void IndexedDataset::read(int64_t start, int64_t count, int64_t* out) const {
  if (start < 0 || count < 0 || start + count > tokens())
    throw RuntimeError(cat("IndexedDataset ", prefix_, ": tokens [", start, ", ", start + count, ") outside the ",
                           tokens(), " it holds"));
  // The sequence holding `start`: the last one that starts at or before it.
  int64_t seq = std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin() - 1;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t at = start + i;
    while (at >= starts_[seq + 1]) ++seq;  // skips empty sequences too
    out[i] = token(seq, at - starts_[seq]);
  }
}

namespace {
template <class T>
void put(std::ofstream& out, T value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof value);  // little-endian host, little-endian file
}

template <class T>
void put_token(std::ofstream& out, int64_t token, const std::string& file) {
  if (token < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      token > static_cast<int64_t>(std::numeric_limits<T>::max()))
    throw RuntimeError(cat("write_indexed_dataset ", file, ": token ", token, " does not fit its dtype"));
  put(out, static_cast<T>(token));
}
}  // namespace

void write_indexed_dataset(const std::string& prefix, const std::vector<std::vector<int64_t>>& documents,
                           int dtype_code) {
  const int64_t item = item_size_of(dtype_code);
  if (item == 0 || dtype_code == 6 || dtype_code == 7)
    throw RuntimeError(cat("write_indexed_dataset: dtype code ", dtype_code, " is not an integer dtype"));
  const std::string bin_file = prefix + ".bin", idx_file = prefix + ".idx";
  std::ofstream bin(bin_file, std::ios::binary | std::ios::trunc);
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers;
  int64_t offset = 0;
  for (const std::vector<int64_t>& doc : documents) {
    lengths.push_back(static_cast<int32_t>(doc.size()));
    pointers.push_back(offset);
    offset += static_cast<int64_t>(doc.size()) * item;
    for (int64_t t : doc) switch (dtype_code) {
        case 1: put_token<uint8_t>(bin, t, bin_file); break;
        case 2: put_token<int8_t>(bin, t, bin_file); break;
        case 3: put_token<int16_t>(bin, t, bin_file); break;
        case 4: put_token<int32_t>(bin, t, bin_file); break;
        case 5: put_token<int64_t>(bin, t, bin_file); break;
        default: put_token<uint16_t>(bin, t, bin_file); break;
      }
  }
  std::ofstream idx(idx_file, std::ios::binary | std::ios::trunc);
  idx.write(kMagic, sizeof kMagic);
  put<uint64_t>(idx, 1);
  put<uint8_t>(idx, static_cast<uint8_t>(dtype_code));
  put<uint64_t>(idx, lengths.size());
  put<uint64_t>(idx, lengths.size() + 1);
  for (int32_t n : lengths) put(idx, n);
  for (int64_t p : pointers) put(idx, p);
  for (size_t d = 0; d <= lengths.size(); ++d) put<int64_t>(idx, static_cast<int64_t>(d));
  bin.close();
  idx.close();
  if (!bin || !idx) throw RuntimeError(cat("write_indexed_dataset: cannot write ", prefix, ".{bin,idx}"));
}

std::string file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError(cat("cannot open ", path, " to hash it: ", std::strerror(errno)));
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw RuntimeError("OpenSSL: cannot start a SHA-256 digest");
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), chunk.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) out += {hex[digest[i] >> 4], hex[digest[i] & 15]};
  return out;
}

}  // namespace sextant::model
