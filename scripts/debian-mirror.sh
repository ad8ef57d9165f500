#!/usr/bin/env bash
# debian-mirror.sh — the Debian mirror apt is configured with, for debootstrap: the one
# place that reads apt's sources (tests/tools/gpu_kit.sh's minimal root, docs/install.md's
# fresh-machine recipe). Run it (prints the URL) or source it (defines debian_mirror).
#
#   scripts/debian-mirror.sh [SUITE]      # default bookworm; exit 1 with one error line
#
# $CNNSCALE_DEBIAN_MIRROR, when set, is the answer (nothing is read). Otherwise the
# enabled sources that apt itself reads, in apt's order: $CNNSCALE_APT_DIR (default
# /etc/apt)/sources.list, then sources.list.d/*.list (one-line format, `[options]`
# allowed) and sources.list.d/*.sources (deb822; a paragraph with `Enabled: no` is
# skipped). Any other name (`x.sources.disabled`, `.save`, `.dpkg-old`) is not read, as
# apt does not read it. A candidate is a `deb` entry with the component `main` for SUITE;
# failing that, for SUITE-updates / -backports / -proposed-updates (they live in the same
# archive, so it serves SUITE too). SUITE-security never: it is a separate archive
# without SUITE. Among candidates, Debian's archive first (a host under debian.org, a
# path ending in /debian, or Signed-By Debian's archive keyring), then apt's order — so a
# third-party repository (NodeSource's `nodistro`, NVIDIA's CUDA `/`, Google's
# `cloud-sdk-bookworm`) is never taken, wherever it sorts. debootstrap checks what it
# fetches against Debian's archive keyring anyway.
# The reader: one line per candidate, "rank <TAB> order <TAB> URI" (lowest first wins).
DEBIAN_MIRROR_AWK=$(cat <<'AWK'
function lc(s) { return tolower(s) }
# rank: suite class (0 SUITE, 1 same-archive SUITE-*) * 2 + (0 Debian, 1 other)
function consider(uri, s, comps, keyring,   n, c, i, cls, deb, host) {
  if (uri !~ /^(https?|ftp|file):/) return
  if (s == suite) cls = 0
  else if (s == suite "-updates" || s == suite "-backports" || s == suite "-proposed-updates") cls = 1
  else return
  n = split(comps, c, /[ \t]+/)
  for (i = 1; i <= n; i++) if (c[i] == "main") break
  if (i > n) return
  host = uri; sub(/^[a-z]+:\/\/([^@\/]*@)?/, "", host); sub(/[:\/].*$/, "", host)
  deb = (lc(host) ~ /(^|\.)debian\.org$/ || uri ~ /\/debian\/?$/ || lc(keyring) ~ /debian-archive-keyring/)
  order++
  printf "%d\t%06d\t%s\n", cls * 2 + (deb ? 0 : 1), order, uri
}
function flush(   nu, u, ns, s, i, j, t, isdeb, nt) {
  if (para) {
    nt = split(F["types"], t, /[ \t]+/); isdeb = 0
    for (i = 1; i <= nt; i++) if (t[i] == "deb") isdeb = 1
    if (isdeb && lc(F["enabled"]) !~ /^[ \t]*(no|false|off|without|disable)[ \t]*$/) {
      nu = split(F["uris"], u, /[ \t]+/); ns = split(F["suites"], s, /[ \t]+/)
      for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
        if (u[i] != "" && s[j] != "") consider(u[i], s[j], F["components"], F["signed-by"])
    }
  }
  split("", F); para = 0; key = ""
}
FNR == 1 { flush(); deb822 = (FILENAME ~ /\.sources$/) }
deb822 {
  if ($0 ~ /^#/) next
  if ($0 ~ /^[ \t]*$/) { flush(); next }
  if ($0 ~ /^[ \t]/) { if (key != "") F[key] = F[key] " " $0; next }
  if (match($0, /^[A-Za-z0-9-]+:/)) {
    key = lc(substr($0, 1, RLENGTH - 1)); F[key] = substr($0, RLENGTH + 1); para = 1
  }
  next
}
{
  line = $0; sub(/#.*/, "", line); n = split(line, w, /[ \t]+/)
  i = 1; if (w[i] == "") i++
  if (w[i] != "deb") next
  i++; opts = ""
  if (substr(w[i], 1, 1) == "[") {
    while (i <= n) { opts = opts " " w[i]; if (w[i] ~ /\]$/) { i++; break }; i++ }
  }
  comps = ""; for (j = i + 2; j <= n; j++) comps = comps " " w[j]
  consider(w[i], w[i + 1], comps, opts)
}
END { flush() }
AWK
)
debian_mirror() {
  local suite=${1:-bookworm} dir=${CNNSCALE_APT_DIR:-/etc/apt} f files=() best
  if [ -n "${CNNSCALE_DEBIAN_MIRROR:-}" ]; then
    echo "${CNNSCALE_DEBIAN_MIRROR%/}"
    return 0
  fi
  [ -f "$dir/sources.list" ] && files+=("$dir/sources.list")
  # then sources.list.d in the C locale's sort order, both formats interleaved (as apt)
  while IFS= read -r f; do
    [ -f "$f" ] && files+=("$f")
  done < <(printf '%s\n' "$dir"/sources.list.d/*.list "$dir"/sources.list.d/*.sources | LC_ALL=C sort)
  best=""
  if [ ${#files[@]} -gt 0 ]; then
    best=$(awk -v suite="$suite" "$DEBIAN_MIRROR_AWK" "${files[@]}" | LC_ALL=C sort -t "$(printf '\t')" -k1,1n -k2,2n |
      head -n 1 | cut -f 3)
  fi
  if [ -z "$best" ]; then
    echo "debian-mirror: error: no enabled apt source serves Debian's $suite main (read: ${files[*]:-nothing under $dir}); set CNNSCALE_DEBIAN_MIRROR to a Debian mirror, e.g. CNNSCALE_DEBIAN_MIRROR=http://deb.debian.org/debian" >&2
    return 1
  fi
  echo "${best%/}"
}
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  debian_mirror "$@"
fi
