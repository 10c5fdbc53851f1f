// Indexed dataset files for tests, written byte by byte as Megatron's
// writer lays them out (megatron/core/datasets/indexed_dataset.py), with
// every field open to breaking.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sextant::model::testing {

// This process's scratch folder, removed at exit.
struct TempDir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("sextant_indexed_dataset_" + std::to_string(::getpid()));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};
inline const std::filesystem::path& temp_dir() {
  static TempDir dir;
  return dir.path;
}

// An indexed dataset in memory: the fields of .idx and the bytes of .bin.
struct Files {
  std::string magic = std::string("MMIDIDX\0\0", 9);
  uint64_t version = 1;
  uint8_t code = 8;  // uint16
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers, documents;
  std::vector<unsigned char> bin;
  int64_t idx_cut = 0;  // bytes dropped from the end of .idx

  // Megatron's writer: sequences back to back, one document per `per_document` sequences.
  template <class T>
  static Files of(const std::vector<std::vector<T>>& sequences, uint8_t code, size_t per_document = 1) {
    Files f;
    f.code = code;
    f.documents = {0};
    for (size_t i = 0; i < sequences.size(); ++i) {
      f.lengths.push_back(static_cast<int32_t>(sequences[i].size()));
      f.pointers.push_back(static_cast<int64_t>(f.bin.size()));
      for (T v : sequences[i]) {
        unsigned char bytes[sizeof(T)];
        std::memcpy(bytes, &v, sizeof v);
        f.bin.insert(f.bin.end(), bytes, bytes + sizeof v);
      }
      if ((i + 1) % per_document == 0 || i + 1 == sequences.size()) f.documents.push_back(static_cast<int64_t>(i + 1));
    }
    return f;
  }

  std::string write(const std::string& name) const {
    const std::string prefix = (temp_dir() / name).string();
    std::string idx = magic;
    auto put = [&](const void* p, size_t n) { idx.append(static_cast<const char*>(p), n); };
    put(&version, 8);
    put(&code, 1);
    const uint64_t s = lengths.size(), d = documents.size();
    put(&s, 8);
    put(&d, 8);
    put(lengths.data(), 4 * lengths.size());
    put(pointers.data(), 8 * pointers.size());
    put(documents.data(), 8 * documents.size());
    idx.resize(idx.size() - static_cast<size_t>(idx_cut));
    std::ofstream(prefix + ".idx", std::ios::binary).write(idx.data(), static_cast<std::streamsize>(idx.size()));
    std::ofstream(prefix + ".bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(bin.data()), static_cast<std::streamsize>(bin.size()));
    return prefix;
  }
};

}  // namespace sextant::model::testing
