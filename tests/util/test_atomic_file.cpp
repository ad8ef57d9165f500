// test_atomic_file.cpp — the output-file rule of util/atomic_file.hpp (issue 39) on real
// files in a fresh folder: a regular file is replaced whole; a symbolic link is written
// through (to a regular file, to a missing one, through a chain) and stays a link; a
// directory, a FIFO, a character device (mknod, as root; /dev/null is never touched), a
// link to one of them and a loop of links are refused with a message naming the path and
// what it is, and are left as they were; check_output_file also refuses a missing folder.
// Issue 48, as root (lchown makes another user's link, uid 65534): a link the kernel's
// fs.protected_symlinks rule would not follow (another user's, in a sticky folder anyone
// can write) is refused wherever it is on the path, and what it points at is untouched;
// links that rule follows still are; a replaced file keeps its mode; temporary files
// never open a name planted before them; remove_stale_temporaries knows every name form
// and never removes or follows a link.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/user_error.hpp"
#include "util/atomic_file.hpp"
#include "util/process.hpp"

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

// ---- issue 48 ----

constexpr uid_t kNobody = 65534;

// A folder for issue 48's cases, as root: "shared" (mode 1777, like /tmp), root's private
// file "private.txt" (0600, "secret") and "rootonly" (0700).
class HostileOutput : public AtomicFile {
 protected:
  void SetUp() override {
    AtomicFile::SetUp();
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: lchown makes a link of another user";
    fs::create_directory(p("shared"));
    ASSERT_EQ(::chmod(p("shared").c_str(), 01777), 0);
    fs::create_directory(p("rootonly"));
    ASSERT_EQ(::chmod(p("rootonly").c_str(), 0700), 0);
    std::ofstream(p("private.txt")) << "secret";
    ASSERT_EQ(::chmod(p("private.txt").c_str(), 0600), 0);
  }
  // A symbolic link `link` -> `to` owned by uid 65534, as `ln -s` run by nobody makes it.
  static void strangers_link(const std::string& to, const std::string& link) {
    fs::create_symlink(to, link);
    ASSERT_EQ(::lchown(link.c_str(), kNobody, kNobody), 0);
  }
  static mode_t mode_of(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
  }
  static uid_t owner_of(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? st.st_uid : 12345;
  }
  void expect_private_untouched() {
    EXPECT_EQ(read(p("private.txt")), "secret");
    EXPECT_EQ(mode_of(p("private.txt")), 0600u);
    EXPECT_EQ(owner_of(p("private.txt")), 0u);
  }
};

TEST_F(HostileOutput, StrangersLinkInAStickySharedFolderIsRefused) {
  const std::string link = p("shared/bench.json");
  strangers_link(p("private.txt"), link);
  const std::string e = user_error_of([&] { write_file_atomic(link, std::string("{}")); });
  EXPECT_NE(e.find("cannot write '" + link + "': it is a symbolic link owned by "), std::string::npos) << e;
  EXPECT_NE(e.find("uid 65534), in '" + p("shared") + "', a folder that anyone can write and that has the sticky bit"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("Remove the link (rm '" + link + "')"), std::string::npos) << e;
  EXPECT_NE(e.find("or give a path in a folder you own"), std::string::npos) << e;
  const std::string c = user_error_of([&] { check_output_file(link, "--json"); });
  EXPECT_NE(c.find("cannot write --json '" + link + "': it is a symbolic link owned by"), std::string::npos) << c;
  EXPECT_NE(user_error_of([&] { output_target(link); }), "");
  expect_private_untouched();
  EXPECT_EQ(type_of(link), S_IFLNK);
  EXPECT_EQ(std::distance(fs::directory_iterator(p("shared")), {}), 1);  // no temporary file either

  // A dangling one (train --timeline's case): no file made in a folder only root may write.
  strangers_link(p("rootonly/made.json"), p("shared/timeline.json"));
  EXPECT_NE(user_error_of([&] { write_file_atomic(p("shared/timeline.json"), std::string("x")); }), "");
  EXPECT_FALSE(fs::exists(p("rootonly/made.json")));
}

TEST_F(HostileOutput, StrangersLinkAnywhereOnThePathIsRefused) {
  // In a chain: the caller's own link leads to the stranger's.
  strangers_link(p("private.txt"), p("shared/hop"));
  fs::create_symlink("shared/hop", p("out.json"));
  const std::string chain = user_error_of([&] { write_file_atomic(p("out.json"), std::string("x")); });
  EXPECT_NE(chain.find("cannot write '" + p("out.json") + "': it goes through the symbolic link '" + p("shared/hop") +
                       "', owned by"),
            std::string::npos)
      << chain;
  // Among the folders: shared/d is the stranger's link to a folder of root's.
  fs::create_directory(p("realdir"));
  strangers_link(p("realdir"), p("shared/d"));
  const std::string folder = user_error_of([&] { write_file_atomic(p("shared/d/out.json"), std::string("x")); });
  EXPECT_NE(folder.find("it goes through the symbolic link '" + p("shared/d") + "'"), std::string::npos) << folder;
  // The same folder link reached through the caller's own link to "shared".
  fs::create_symlink("shared", p("via"));
  EXPECT_NE(user_error_of([&] { write_file_atomic(p("via/d/out.json"), std::string("x")); })
                .find("the symbolic link '" + p("shared/d") + "'"),
            std::string::npos);
  EXPECT_NE(user_error_of([&] { resolve_links(p("shared/d"), "the run directory"); })
                .find("the run directory '" + p("shared/d") + "': it is a symbolic link owned by"),
            std::string::npos);
  EXPECT_EQ(std::distance(fs::directory_iterator(p("realdir")), {}), 0);
  expect_private_untouched();
}

TEST_F(HostileOutput, LinksTheKernelRuleFollowsAreStillWrittenThrough) {
  // The caller's own link in the shared folder.
  write_file_atomic(p("mine.json"), std::string("old"));
  fs::create_symlink(p("mine.json"), p("shared/mine"));
  write_file_atomic(p("shared/mine"), std::string("new"));
  EXPECT_EQ(read(p("mine.json")), "new");
  EXPECT_EQ(type_of(p("shared/mine")), S_IFLNK);
  // A link of the folder's owner, in a sticky folder of its own.
  fs::create_directory(p("theirs"));
  ASSERT_EQ(::chmod(p("theirs").c_str(), 01777), 0);
  ASSERT_EQ(::chown(p("theirs").c_str(), kNobody, kNobody), 0);
  strangers_link(p("a.json"), p("theirs/a"));
  write_file_atomic(p("theirs/a"), std::string("a"));
  EXPECT_EQ(read(p("a.json")), "a");
  // Another user's link in a folder anyone can write but without the sticky bit: the
  // kernel's rule is about sticky folders only.
  fs::create_directory(p("open"));
  ASSERT_EQ(::chmod(p("open").c_str(), 0777), 0);
  strangers_link(p("b.json"), p("open/b"));
  write_file_atomic(p("open/b"), std::string("b"));
  EXPECT_EQ(read(p("b.json")), "b");
  // ".." after a link is the link target's parent, as the kernel has it.
  fs::create_directories(p("deep/er"));
  fs::create_symlink(p("deep/er"), p("jump"));
  EXPECT_EQ(output_target(p("jump/../c.json")), p("deep/c.json"));
}

TEST_F(HostileOutput, AReplacedFileKeepsItsModeAndANewOneGetsTheUmasks) {
  write_file_atomic(p("private.txt"), std::string("new secret"));
  EXPECT_EQ(read(p("private.txt")), "new secret");
  EXPECT_EQ(mode_of(p("private.txt")), 0600u);  // was widened to 0644
  fs::create_symlink("private.txt", p("to-private"));
  write_file_atomic(p("to-private"), std::string("via link"));
  EXPECT_EQ(mode_of(p("private.txt")), 0600u);
  std::ofstream(p("group.txt")) << "g";
  ASSERT_EQ(::chmod(p("group.txt").c_str(), 04750), 0);
  write_file_atomic(p("group.txt"), std::string("g2"));
  EXPECT_EQ(mode_of(p("group.txt")), 0750u);  // the permission bits, not set-user-ID
  const mode_t before = ::umask(002);
  write_file_atomic(p("new-002.json"), std::string("x"));
  ::umask(077);
  write_file_atomic(p("new-077.json"), std::string("x"));
  ::umask(before);
  EXPECT_EQ(mode_of(p("new-002.json")), 0664u);
  EXPECT_EQ(mode_of(p("new-077.json")), 0600u);
}

TEST_F(HostileOutput, TemporaryFilesNeverOpenAPlantedName) {
  // The name cnnscale used to write to, planted by a stranger: a link to root's file, a file of its own.
  const std::string old_name = ".tmp." + this_host() + "." + std::to_string(::getpid());
  strangers_link(p("private.txt"), p("shared/out.json") + old_name);
  std::ofstream(p("shared/b.json") + old_name) << "planted";
  ASSERT_EQ(::chown((p("shared/b.json") + old_name).c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(::chmod((p("shared/b.json") + old_name).c_str(), 0666), 0);
  const mode_t before = ::umask(022);
  write_file_atomic(p("shared/out.json"), std::string("out"));
  write_file_atomic(p("shared/b.json"), std::string("b"));
  ::umask(before);
  expect_private_untouched();
  EXPECT_EQ(read(p("shared/out.json")), "out");
  EXPECT_EQ(type_of(p("shared/out.json")), S_IFREG);
  EXPECT_EQ(read(p("shared/b.json")), "b");
  EXPECT_EQ(owner_of(p("shared/b.json")), 0u);  // root's, not the stranger's
  EXPECT_EQ(mode_of(p("shared/b.json")), 0644u);
  EXPECT_EQ(read(p("shared/b.json") + old_name), "planted");
  EXPECT_EQ(type_of(p("shared/out.json") + old_name), S_IFLNK);

  // Today's names, made predictable: a planted link and a planted file at the first two
  // names drawn are passed over (O_EXCL | O_NOFOLLOW), the third is used.
  std::vector<std::string> draws = {"Aaaaaaaaaaaa", "Bbbbbbbbbbbb", "Cccccccccccc"};
  size_t next = 0;
  set_temporary_suffix_source([&] { return draws[std::min(next++, draws.size() - 1)]; });
  const std::string prefix = p("shared/c.json") + old_name + ".";
  strangers_link(p("private.txt"), prefix + draws[0]);
  std::ofstream(prefix + draws[1]) << "planted";
  write_file_atomic(p("shared/c.json"), std::string("c"));
  set_temporary_suffix_source(nullptr);
  EXPECT_EQ(next, 3u);
  EXPECT_EQ(read(p("shared/c.json")), "c");
  EXPECT_EQ(read(prefix + draws[1]), "planted");
  EXPECT_EQ(type_of(prefix + draws[0]), S_IFLNK);
  EXPECT_FALSE(fs::exists(prefix + draws[2]));
  expect_private_untouched();

  // Drawn names: "<file>.tmp.<host>.<pid>.<12 letters and digits>", a new one each time.
  std::string t1, t2;
  const int f1 = create_temporary(p("d.json"), 0600, &t1);
  const int f2 = create_temporary(p("d.json"), 0600, &t2);
  ASSERT_GE(f1, 0);
  ASSERT_GE(f2, 0);
  ::close(f1);
  ::close(f2);
  EXPECT_NE(t1, t2);
  EXPECT_TRUE(std::regex_match(t1, std::regex(".*/d\\.json\\.tmp\\.[^/]+\\.[0-9]+\\.[A-Za-z][A-Za-z0-9]{11}"))) << t1;
  EXPECT_EQ(t1.rfind(p("d.json") + old_name + ".", 0), 0u) << t1;
}

TEST_F(HostileOutput, StaleTemporariesOfEveryNameFormAndNeverALink) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const std::string dead = std::to_string(child), live = std::to_string(::getpid()), host = this_host();
  fs::create_directory(p("run"));
  const std::string d = p("run");
  const std::vector<std::string> gone = {"a.json.tmp." + host + "." + dead + ".Xk3f9Qa2LmZ0",  // today's
                                         "b.json.tmp." + host + "." + dead,                    // before issue 48
                                         "c.json.tmp." + dead};                                // cnnscale 0.1
  const std::vector<std::string> kept = {"d.json.tmp." + host + "." + live + ".Xk3f9Qa2LmZ0",    // a live writer
                                         "e.json.tmp.other-node." + dead + ".Xk3f9Qa2LmZ0",      // another host's
                                         "f.json.tmp." + host + "." + dead + ".not-random"};     // no temporary
  for (const auto& n : gone) std::ofstream(d + "/" + n) << "x";
  for (const auto& n : kept) std::ofstream(d + "/" + n) << "x";
  // Links named like a dead writer's temporary file, to root's file: not followed, not removed.
  const std::vector<std::string> links = {"g.json.tmp." + host + "." + dead + ".Xk3f9Qa2LmZ0",
                                          "h.json.tmp." + host + "." + dead};
  for (const auto& n : links) strangers_link(p("private.txt"), d + "/" + n);
  std::vector<std::string> removed = remove_stale_temporaries(d);
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, gone);
  for (const auto& n : gone) EXPECT_FALSE(fs::exists(d + "/" + n)) << n;
  for (const auto& n : kept) EXPECT_TRUE(fs::exists(d + "/" + n)) << n;
  for (const auto& n : links) EXPECT_EQ(type_of(d + "/" + n), S_IFLNK) << n;
  expect_private_untouched();
}

}  // namespace
