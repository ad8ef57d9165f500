#!/usr/bin/env bash
# debian_mirror.sh — scripts/debian-mirror.sh (the Debian mirror for debootstrap, issue 39
# item 2) on made-up apt trees ($CNNSCALE_APT_DIR): only enabled sources count (a deb822
# paragraph with `Enabled: no`, a `*.sources.disabled…` or `*.list.disabled` file are not
# read), a third-party list that sorts first (NVIDIA's CUDA `/`, NodeSource's `nodistro`, a
# vendor's own `bookworm main`) is passed over for Debian's archive, the one-line format
# with `[options]` is read, bookworm-updates serves when nothing else does, security never;
# with none found it exits 1 with one line naming CNNSCALE_DEBIAN_MIRROR, which, when set,
# is the answer. And it is the one reader: no other script or test parses a source, and
# every debootstrap (tests/tools/gpu_kit.sh, docs/install.md's recipe) takes its mirror.
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
M="$CNNSCALE_SOURCE/scripts/debian-mirror.sh"
DEBIAN='Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg'
# tree NAME: a fresh fake /etc/apt in $TMP/NAME (files added by the case)
tree() { A="$TMP/$1"; mkdir -p "$A/sources.list.d"; }
# mirror NAME EXPECTED: the script on tree NAME prints EXPECTED and exits 0
mirror() {
  local out st
  out=$(env -u CNNSCALE_DEBIAN_MIRROR CNNSCALE_APT_DIR="$TMP/$1" "$M" 2>"$TMP/$1.err")
  st=$?
  expect_eq "$1: exit status" 0 "$st"
  expect_eq "$1: the mirror" "$2" "$out"
  [ "$st" -eq 0 ] || sed 's/^/    | /' "$TMP/$1.err"
}

# A disabled NodeSource file beside debian.sources (a machine of the issue), and a
# Debian-looking one-line list that is disabled by its name.
tree disabled
printf 'Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n' \
  >"$A/sources.list.d/nodesource.sources.disabled-by-farm"
echo 'deb http://ftp.de.debian.org/debian bookworm main' >"$A/sources.list.d/aaa.list.disabled"
printf '%s\n' "$DEBIAN" >"$A/sources.list.d/debian.sources"
mirror disabled http://deb.debian.org/debian

# deb822 with Enabled: no on the paragraph that sorts first (same file and an earlier file).
tree enabled_no
printf 'Types: deb\nURIs: http://ftp.de.debian.org/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n\n%s\n' \
  "$DEBIAN" >"$A/sources.list.d/debian.sources"
printf 'Types: deb\nURIs: http://ftp.fr.debian.org/debian/\nSuites: bookworm\nComponents: main contrib\nenabled:  No\n' \
  >"$A/sources.list.d/aaa.sources"
mirror enabled_no http://deb.debian.org/debian

# NVIDIA's CUDA list sorts before debian.sources; a vendor repository with its own
# "bookworm main" too: Debian's archive is taken.
tree cuda
echo 'deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/ /' \
  >"$A/sources.list.d/cuda-debian12-x86_64.list"
echo 'deb [arch=amd64 signed-by=/usr/share/keyrings/vendor.gpg] https://repo.vendor.example/apt bookworm main' \
  >"$A/sources.list.d/a-vendor.list"
printf '%s\n' "$DEBIAN" >"$A/sources.list.d/debian.sources"
mirror cuda http://deb.debian.org/debian

# The one-line format with [options] (spaced or not), deb-src and comments ignored, a
# local mirror recognised by Debian's keyring; security listed first is never taken.
tree oneline
cat >"$A/sources.list" <<'EOF'
# deb http://commented.debian.org/debian bookworm main
deb http://security.debian.org/debian-security bookworm-security main
deb-src http://deb.debian.org/debian bookworm main
deb [ arch=amd64 ] https://download.docker.com/linux/debian bookworm stable
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://10.0.0.5:3142/deb bookworm contrib main # local cache
EOF
mirror oneline http://10.0.0.5:3142/deb
# sources.list is read before sources.list.d (both Debian's): its entry wins.
printf '%s\n' "$DEBIAN" >"$A/sources.list.d/debian.sources"
mirror oneline http://10.0.0.5:3142/deb

# Only bookworm-updates: the same archive, so it serves bookworm.
tree updates
echo 'deb http://ftp.nl.debian.org/debian bookworm-updates main' >"$A/sources.list"
mirror updates http://ftp.nl.debian.org/debian

# None: only security, disabled files and third-party lists -> one error line, exit 1.
tree none
echo 'deb http://security.debian.org/debian-security bookworm-security main' >"$A/sources.list"
cp "$TMP/cuda/sources.list.d/cuda-debian12-x86_64.list" "$A/sources.list.d/"
printf 'Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n' \
  >"$A/sources.list.d/nodesource.sources"
printf '%s\n' "$DEBIAN" >"$A/sources.list.d/debian.sources.disabled"
env -u CNNSCALE_DEBIAN_MIRROR CNNSCALE_APT_DIR="$A" "$M" >"$TMP/none.out" 2>"$TMP/none.err"
expect_eq "none found: exit status 1" 1 "$?"
expect_eq "none found: nothing on stdout" "" "$(cat "$TMP/none.out")"
expect_eq "none found: one line" 1 "$(wc -l <"$TMP/none.err")"
expect_grep "none found: says so, and how to set it" \
  "^debian-mirror: error: no enabled apt source serves Debian's bookworm main \(read: .*sources\.list .*\); set CNNSCALE_DEBIAN_MIRROR to a Debian mirror" \
  "$TMP/none.err"
out=$(CNNSCALE_DEBIAN_MIRROR=http://mirror.example/debian/ CNNSCALE_APT_DIR="$A" "$M")
expect_eq "CNNSCALE_DEBIAN_MIRROR is the answer" http://mirror.example/debian "$out"
env -u CNNSCALE_DEBIAN_MIRROR CNNSCALE_APT_DIR="$TMP/nothing-here" "$M" >/dev/null 2>"$TMP/empty.err"
expect_eq "no apt folder at all: exit status 1" 1 "$?"
# Sourced, as gpu_kit.sh uses it: the function, and the caller's shell survives a failure.
out=$(source "$M" && CNNSCALE_DEBIAN_MIRROR="" CNNSCALE_APT_DIR="$TMP/cuda" debian_mirror)
expect_eq "sourced: debian_mirror" http://deb.debian.org/debian "$out"

# The one reader: nothing else parses a deb822 source (URIs:), and every script that
# runs debootstrap takes its mirror from here.
others=$(cd "$CNNSCALE_SOURCE" && grep -rlE --include='*.sh' --include='*.py' 'URIs:' scripts tests bench slurm 2>/dev/null |
  grep -vxE 'scripts/debian-mirror\.sh|tests/tools/debian_mirror\.sh')
expect_eq "no other script or test reads apt's sources" "" "$others"
for f in $(cd "$CNNSCALE_SOURCE" && grep -rlE '^[^#]*debootstrap +-' scripts tests bench slurm); do
  expect_grep "$f runs debootstrap with scripts/debian-mirror.sh's mirror" 'debian-mirror\.sh' "$CNNSCALE_SOURCE/$f"
done
expect_grep "docs/install.md's debootstrap line takes scripts/debian-mirror.sh's mirror" \
  '^debootstrap .*"\$\(scripts/debian-mirror\.sh\)"' "$CNNSCALE_SOURCE/docs/install.md"
finish
