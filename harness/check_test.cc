#include "harness/check.h"

#include <gtest/gtest.h>

#include <string>

namespace sextant {
namespace {

TEST(DumpFolderName, ShortIdsKeepTheirTextWithPathCharactersReplaced) {
  EXPECT_EQ(dump_folder_name("ops/gelu n=64 f32"), "ops_gelu_n_64_f32");
}

// A packed attention id repeats its sequence lengths and can pass a file
// name's 255 bytes: the folder keeps a prefix and a hash of the whole id.
TEST(DumpFolderName, LongIdsAreCutToAPrefixAndAHashThatTellsThemApart) {
  const std::string a = "attention/p2p " + std::string(300, 'x') + " seq_lens=40,8,16";
  const std::string b = "attention/p2p " + std::string(300, 'x') + " seq_lens=40,16,8";
  const std::string name_a = dump_folder_name(a), name_b = dump_folder_name(b);
  EXPECT_LE(name_a.size(), 120u);
  EXPECT_EQ(name_a.substr(0, 14), "attention_p2p_");
  EXPECT_NE(name_a, name_b);
  EXPECT_EQ(name_a, dump_folder_name(a));
  EXPECT_EQ(name_a.find('/'), std::string::npos);
}

}  // namespace
}  // namespace sextant
