#include "harness/strings.h"

#include <gtest/gtest.h>

#include "harness/error.h"

namespace sextant {
namespace {

TEST(Strings, BytesParseAndFormat) {
  EXPECT_EQ(parse_bytes("64", "--min-bytes"), 64);
  EXPECT_EQ(parse_bytes("4K", "--min-bytes"), 4096);
  EXPECT_EQ(parse_bytes("1M", "--min-bytes"), 1 << 20);
  EXPECT_THROW(parse_bytes("1X", "--min-bytes"), UsageError);
  EXPECT_THROW(parse_bytes("", "--min-bytes"), UsageError);
  EXPECT_EQ(format_bytes(1 << 20), "1M");
  EXPECT_EQ(format_bytes(1000), "1000");
  EXPECT_EQ(split("a,b,", ','), (std::vector<std::string>{"a", "b", ""}));
  EXPECT_EQ(join(std::vector<int>{1, 2, 4}, ","), "1,2,4");
}

TEST(Strings, RequireDividesNamesBothNumbers) {
  try {
    require_divides("--tp", 3, "--heads", 8);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--tp 3 must divide --heads 8");
  }
  EXPECT_NO_THROW(require_divides("--tp", 2, "--heads", 8));
}

}  // namespace
}  // namespace sextant
