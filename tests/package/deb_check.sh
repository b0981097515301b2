#!/usr/bin/env bash
# The Debian package, installed and removed on this machine (root): `dpkg -i` of the package
# CPack builds from this build tree, then the installed /usr/bin/wanlab finds its own
# profiles and examples (not the source tree's), `doctor` runs and the main example
# validates by name; `dpkg -r` then leaves none of its files behind.
#   deb_check.sh BUILD_DIR
set -uo pipefail
build=$1
fail() { echo "FAIL: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "SKIPPED: dpkg -i needs root"; exit 0; }
command -v dpkg >/dev/null || fail "no dpkg: this test is for Debian and its derivatives"
# Never replace or remove a wanlab someone installed.
if [[ $(dpkg-query -W -f='${db:Status-Status}' wanlab 2>/dev/null) == installed ]]; then
  fail "a wanlab package is installed on this machine; this test installs and removes its own: dpkg -r wanlab first"
fi
[[ -e /usr/bin/wanlab ]] && fail "/usr/bin/wanlab exists and belongs to no package; move it away first"

work=$(mktemp -d /tmp/wanlab-deb-XXXXXX)
installed=0
cleanup() {
  ((installed)) && dpkg -r wanlab >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$build" && cpack -G DEB -B "$work/package") >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$work"/package/wanlab_*.deb 2>/dev/null | head -1)
[[ -n $deb ]] || fail "cpack made no .deb"

# What it declares.
fields=$(dpkg-deb -f "$deb" Depends Recommends Suggests)
echo "$fields"
for want in "Depends: .*iproute2" "Depends: .*libnl-3-200" "Depends: .*libnl-route-3-200" "Depends: .*libsqlite3-0" \
  "Recommends: .*qemu-system-x86.*busybox-static.*cpio.*kmod" "Suggests: .*iperf3.*wrk.*hping3.*nginx"; do
  grep -Eq "^$want" <<<"$fields" || fail "the package does not declare $want"
done
files=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\.||')
for f in /usr/bin/wanlab /usr/share/wanlab/examples/buffer-sweep.toml /usr/share/wanlab/profiles/link/transatlantic.toml \
  /usr/share/man/man1/wanlab.1 /usr/share/bash-completion/completions/wanlab /usr/share/zsh/vendor-completions/_wanlab \
  /usr/share/doc/wanlab/examples; do
  grep -qx -- "$f/\?" <<<"$files" || fail "the package lacks $f"
done

dpkg -i "$deb" >"$work/dpkg-i.log" 2>&1 || { cat "$work/dpkg-i.log"; fail "dpkg -i"; }
installed=1
[[ $(dpkg-query -W -f='${db:Status-Status}' wanlab) == installed ]] || fail "dpkg does not list wanlab as installed"

# The installed binary, run from a folder with no experiment files in it.
cd "$work"
/usr/bin/wanlab --version || fail "wanlab --version"
/usr/bin/wanlab doctor >"$work/doctor.log" 2>&1 || { cat "$work/doctor.log"; fail "wanlab doctor exited $?"; }
grep -q "^capabilities" "$work/doctor.log" || { cat "$work/doctor.log"; fail "doctor printed no capabilities line"; }
out=$(/usr/bin/wanlab validate buffer-sweep 2>&1) || { echo "$out"; fail "wanlab validate buffer-sweep"; }
echo "$out"
grep -qF "using the example /usr/share/wanlab/examples/buffer-sweep.toml" <<<"$out" ||
  fail "validate did not take the installed example"
grep -qF "/usr/share/wanlab/examples/buffer-sweep.toml: ok: 6 trials" <<<"$out" || fail "the installed example is not valid"
# The examples' own files (the nginx example's configuration) came along, and profiles are found.
/usr/bin/wanlab validate nginx-delayed-ack >/dev/null 2>&1 || fail "wanlab validate nginx-delayed-ack"
/usr/bin/wanlab profiles 2>&1 | grep -q transatlantic || fail "wanlab profiles does not list the installed profiles"
[[ $(readlink -f /usr/share/doc/wanlab/examples) == /usr/share/wanlab/examples ]] ||
  fail "share/doc/wanlab/examples does not point at the installed examples"

# Removed: not one of its files is left, and dpkg knows nothing of it.
dpkg -r wanlab >"$work/dpkg-r.log" 2>&1 || { cat "$work/dpkg-r.log"; fail "dpkg -r"; }
installed=0
left=()
while read -r f; do
  [[ -z $f || $f == */ ]] && continue
  [[ -e $f || -L $f ]] && left+=("$f")
done <<<"$files"
for d in /usr/share/wanlab /usr/share/doc/wanlab; do [[ -e $d ]] && left+=("$d"); done
((${#left[@]} == 0)) || fail "dpkg -r left: ${left[*]}"
status=$(dpkg-query -W -f='${db:Status-Status}' wanlab 2>/dev/null)
[[ -z $status || $status == not-installed ]] || fail "after dpkg -r, dpkg says wanlab is: $status"
echo "PASS: installed, ran (doctor, validate buffer-sweep from /usr/share/wanlab/examples), removed without a trace"
