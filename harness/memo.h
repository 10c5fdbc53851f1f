// A process-wide memo of expensive results: the float64 references and the
// one-device baselines, which depend on the problem but not on how a case
// parallelises it, so that the configs of a sweep compute them once. Keys
// are plain structs with a defaulted operator==; the memo keeps the most
// recent `capacity` entries (references of large problems are large).
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <utility>

namespace sextant {

template <class Key, class Value>
class Memo {
 public:
  explicit Memo(size_t capacity) : capacity_(capacity) {}

  // The value for key, computing it with compute() the first time. The
  // reference stays valid until capacity newer keys have been added.
  template <class Compute>
  const Value& get(const Key& key, Compute&& compute) {
    for (const auto& [k, v] : entries_)
      if (k == key) return *v;
    if (entries_.size() >= capacity_) entries_.pop_front();
    entries_.emplace_back(key, std::make_unique<Value>(compute()));
    return *entries_.back().second;
  }

 private:
  size_t capacity_;
  std::deque<std::pair<Key, std::unique_ptr<Value>>> entries_;
};

}  // namespace sextant
