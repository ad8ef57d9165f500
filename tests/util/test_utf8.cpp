// test_utf8.cpp — first_invalid_utf8 against the well-formed sequences of RFC 3629 and
// the classic malformed ones (a lone continuation byte, a truncated sequence, overlong
// forms, surrogates, code points above U+10FFFF, 0xFE/0xFF), and escape_non_ascii.
#include <gtest/gtest.h>

#include <string>

#include "util/utf8.hpp"

using namespace cnnscale;

TEST(Utf8, WellFormedTextIsAccepted) {
  for (const std::string& s : {std::string(""), std::string("cat"), std::string("chat_\xC3\xA9t\xC3\xA9"),  // été
                              std::string("\xE2\x82\xAC"),                                              // €
                              std::string("\xF0\x9F\x90\x88"),                                          // 🐈
                              std::string("\xEF\xBF\xBF"), std::string("\xF4\x8F\xBF\xBF")})            // U+FFFF, U+10FFFF
    EXPECT_EQ(first_invalid_utf8(s), std::string::npos) << escape_non_ascii(s);
}

TEST(Utf8, MalformedBytesAreFoundWhereTheyStart) {
  EXPECT_EQ(first_invalid_utf8("ab\xFF"), 2u);
  EXPECT_EQ(first_invalid_utf8("\xFE\xFF"), 0u);
  EXPECT_EQ(first_invalid_utf8("x\x80"), 1u);               // a lone continuation byte
  EXPECT_EQ(first_invalid_utf8("ok\xC3"), 2u);              // truncated
  EXPECT_EQ(first_invalid_utf8("\xE2\x82"), 0u);            // truncated
  EXPECT_EQ(first_invalid_utf8("\xC0\xAF"), 0u);            // overlong '/'
  EXPECT_EQ(first_invalid_utf8("\xE0\x80\xAF"), 0u);        // overlong
  EXPECT_EQ(first_invalid_utf8("\xF0\x80\x80\xAF"), 0u);    // overlong
  EXPECT_EQ(first_invalid_utf8("a\xED\xA0\x80"), 1u);       // a surrogate (U+D800)
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);    // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("\xC3\xA9\xC3("), 2u);       // é, then a bad second byte
}

TEST(Utf8, EscapeShowsNonAsciiBytesAsHex) {
  EXPECT_EQ(escape_non_ascii("a\xFF" "b\xC3\xA9"), "a\\xFFb\\xC3\\xA9");
  EXPECT_EQ(escape_non_ascii("plain"), "plain");
}

// A rendezvous client's bytes in rank 0's warnings (fuzz_rendezvous found an ESC sequence and
// other control bytes reaching the terminal): control bytes, DEL and bytes from 0x80 up are
// shown as \xHH, printable ASCII as it is, and the text is cut at max_bytes with "...".
TEST(Utf8, EscapeUnprintableShowsControlBytesAndCuts) {
  EXPECT_EQ(escape_unprintable("CNSTORE\x02"), "CNSTORE\\x02");
  EXPECT_EQ(escape_unprintable("n\x1b[2Jde\x7f\xC3\xA9"), "n\\x1B[2Jde\\x7F\\xC3\\xA9");
  EXPECT_EQ(escape_unprintable("node01 ~!"), "node01 ~!");
  EXPECT_EQ(escape_unprintable("abcdef", 4), "abcd...");
  EXPECT_EQ(escape_unprintable("abcd", 4), "abcd");
  EXPECT_EQ(escape_unprintable(std::string("a\0b", 3)), "a\\x00b");
}
