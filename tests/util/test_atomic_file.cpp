// test_atomic_file.cpp — the output-file rule of util/atomic_file.hpp (issue 39) on real
// files in a fresh folder: a regular file is replaced whole; a symbolic link is written
// through (to a regular file, to a missing one, through a chain) and stays a link; a
// directory, a FIFO, a character device (mknod, as root; /dev/null is never touched), a
// link to one of them and a loop of links are refused with a message naming the path and
// what it is, and are left as they were; check_output_file also refuses a missing folder.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/user_error.hpp"
#include "util/atomic_file.hpp"

using namespace cnnscale;
using cnnscale::test::user_error_of;
namespace fs = std::filesystem;

namespace {

class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cnnscale-atomic.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string p(const std::string& name) const { return dir_ + "/" + name; }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static mode_t type_of(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & S_IFMT) : 0;
  }
  // Only the names the test made: no temporary file is left behind.
  size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(dir_), {})); }
  std::string dir_;
};

TEST_F(AtomicFile, RegularFileIsReplacedWhole) {
  write_file_atomic(p("out.json"), "old");
  write_file_atomic(p("out.json"), std::string("new"));
  EXPECT_EQ(read(p("out.json")), "new");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFile, SymlinkToRegularFileIsWrittenThroughAndStays) {
  write_file_atomic(p("real.json"), "old");
  fs::create_symlink("real.json", p("link.json"));  // relative, as `ln -s` makes it
  write_file_atomic(p("link.json"), std::string("new"));
  EXPECT_EQ(type_of(p("link.json")), S_IFLNK);
  EXPECT_EQ(fs::read_symlink(p("link.json")).string(), "real.json");
  EXPECT_EQ(read(p("real.json")), "new");
  EXPECT_EQ(output_target(p("link.json")), p("real.json"));
  EXPECT_EQ(entries(), 2u);
}

TEST_F(AtomicFile, SymlinkToMissingFileCreatesItsTarget) {
  fs::create_directory(p("sub"));
  fs::create_symlink(p("sub/missing.json"), p("dangling.json"));  // absolute, into another folder
  fs::create_symlink("dangling.json", p("chain.json"));           // a link to the link
  write_file_atomic(p("chain.json"), std::string("made"));
  EXPECT_EQ(type_of(p("chain.json")), S_IFLNK);
  EXPECT_EQ(type_of(p("dangling.json")), S_IFLNK);
  EXPECT_EQ(type_of(p("sub/missing.json")), S_IFREG);
  EXPECT_EQ(read(p("sub/missing.json")), "made");
  EXPECT_EQ(std::distance(fs::directory_iterator(p("sub")), {}), 1);  // no temporary left there
}

TEST_F(AtomicFile, DirectoryIsRefusedAndKept) {
  fs::create_directory(p("d"));
  const std::string e = user_error_of([&] { write_file_atomic(p("d"), std::string("x")); });
  EXPECT_NE(e.find("cannot write '" + p("d") + "': it is a directory, not a regular file"), std::string::npos) << e;
  EXPECT_EQ(type_of(p("d")), S_IFDIR);
  fs::create_symlink("d", p("ld"));
  const std::string l = user_error_of([&] { write_file_atomic(p("ld"), std::string("x")); });
  EXPECT_NE(l.find("it is a symbolic link to '" + p("d") + "', a directory, not a regular file"), std::string::npos)
      << l;
  EXPECT_EQ(type_of(p("ld")), S_IFLNK);
  EXPECT_EQ(entries(), 2u);
}

TEST_F(AtomicFile, FifoIsRefusedAndKept) {
  ASSERT_EQ(::mkfifo(p("fifo").c_str(), 0644), 0);
  const std::string e = user_error_of([&] { write_file_atomic(p("fifo"), std::string("x")); });
  EXPECT_NE(e.find("it is a FIFO (named pipe), not a regular file"), std::string::npos) << e;
  EXPECT_EQ(type_of(p("fifo")), S_IFIFO);
  const std::string c = user_error_of([&] { check_output_file(p("fifo"), "--json"); });
  EXPECT_NE(c.find("cannot write --json '" + p("fifo") + "': it is a FIFO"), std::string::npos) << c;
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFile, CharacterDeviceIsRefusedAndKept) {
  // A private /dev/null (the same device numbers), never the real one.
  if (::mknod(p("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
    GTEST_SKIP() << "mknod needs root (CAP_MKNOD); the FIFO case covers the rule";
  fs::create_symlink("null", p("lnull"));
  for (const char* name : {"null", "lnull"}) {
    const std::string e = user_error_of([&] { write_file_atomic(p(name), std::string("x")); });
    EXPECT_NE(e.find("a character device, not a regular file"), std::string::npos) << e;
  }
  EXPECT_EQ(type_of(p("null")), S_IFCHR);
  EXPECT_EQ(type_of(p("lnull")), S_IFLNK);
  EXPECT_EQ(entries(), 2u);
}

TEST_F(AtomicFile, LoopOfLinksIsRefused) {
  fs::create_symlink("b", p("a"));
  fs::create_symlink("a", p("b"));
  const std::string e = user_error_of([&] { write_file_atomic(p("a"), std::string("x")); });
  EXPECT_NE(e.find("a loop of symbolic links"), std::string::npos) << e;
  EXPECT_EQ(type_of(p("a")), S_IFLNK);
}

TEST_F(AtomicFile, CheckOutputFileNamesAMissingFolder) {
  const std::string e = user_error_of([&] { check_output_file(p("nope/x.json"), "--json"); });
  EXPECT_NE(e.find("cannot write --json '" + p("nope/x.json") + "': its folder '" + p("nope") + "' does not exist"),
            std::string::npos)
      << e;
  EXPECT_EQ(user_error_of([&] { check_output_file(p("new.json"), "--json"); }), "");
  fs::create_symlink(p("nope/x.json"), p("dangling"));  // its target's folder is the one checked
  EXPECT_NE(user_error_of([&] { check_output_file(p("dangling"), "--json"); }).find("does not exist"),
            std::string::npos);
}

}  // namespace
