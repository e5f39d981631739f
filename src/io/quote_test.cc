#include "io/quote.h"

#include <gtest/gtest.h>

namespace unipool::io {
namespace {

TEST(QuoteTest, KeepsShortTextAsIs) {
  EXPECT_EQ(Quote("gpus"), "'gpus'");
  EXPECT_EQ(Truncate("abc", 3), "abc");
}

TEST(QuoteTest, CutsLongTextAtACharacter) {
  EXPECT_EQ(Truncate(std::string(50, 'x'), 40), std::string(37, 'x') + "...");
  // "é" is two bytes; the cut moves before it rather than split it.
  EXPECT_EQ(Truncate(std::string(36, 'x') + "\xc3\xa9yyyy", 40), std::string(36, 'x') + "...");
}

TEST(QuoteTest, EscapesLineBreaks) {
  EXPECT_EQ(OneLine("a\nb\r\nc"), "a\\nb\\r\\nc");
  EXPECT_EQ(Quote("-si\n"), "'-si\\n'");
}

}  // namespace
}  // namespace unipool::io
