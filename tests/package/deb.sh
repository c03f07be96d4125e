#!/usr/bin/env bash
# The Debian package, used as a user would use it: `cpack -G DEB` in BUILD,
# then `apt-get install ./tsarchive_*.deb` (as root; the package is removed at
# the end) and, from the installed paths only:
#   - `man tsarchive` (every --help ends "See man tsarchive"),
#   - the bash, zsh and fish completions complete a command and an option,
#   - /usr/bin/tsarchive --version, inspect, and run (the torch layer found
#     next to the installed binary, libtorch through the package's dependencies).
# MODE=extract unpacks the package into a temporary root with dpkg -x instead
# of installing it (no root needed; the same checks, from that root).
# Usage: tests/package/deb.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
testdata=$PWD/testdata
mode=${MODE:-$([ "$(id -u)" -eq 0 ] && echo install || echo extract)}
fail() { echo "FAIL: $*" >&2; exit 1; }

. scripts/debian.sh
install_packages dpkg-dev man-db bash-completion zsh fish

rm -f "$build"/tsarchive_*.deb
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/tsarchive_*.deb)
echo "==> $deb"
dpkg-deb -f "$deb" Package Version Depends
# libzip is dlopen()ed (format/libzip.h), so dpkg-shlibdeps cannot find it.
dpkg-deb -f "$deb" Depends | grep -q 'libzip' || fail "the package does not depend on libzip"

root=
if [ "$mode" = install ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "./$deb" >/dev/null
  trap 'DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq tsarchive >/dev/null' EXIT
  manpath=()
else
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  dpkg -x "$deb" "$root"
  manpath=(-M "$root/usr/share/man")
fi
t=$root/usr/bin/tsarchive
[ -x "$t" ] || fail "no $t"
for f in usr/share/man/man1/tsarchive.1 usr/share/bash-completion/completions/tsarchive \
         usr/share/zsh/vendor-completions/_tsarchive usr/share/fish/vendor_completions.d/tsarchive.fish; do
  [ -f "$root/$f" ] || fail "the package has no /$f"
done

# man tsarchive, as every --help promises.
help=$("$t" inspect --help)
grep -q 'See man tsarchive' <<<"$help" || fail "inspect --help does not point at the man page"
page=$(MANPAGER=cat MANWIDTH=80 man "${manpath[@]}" tsarchive 2>&1)
grep -q '^NAME' <<<"$page" || fail "man tsarchive shows no page: $page"
grep -q 'tsarchive help' <<<"$page" || fail "man tsarchive lacks 'tsarchive help'"
echo "man tsarchive: ok"

# Completions, each in its own shell, from the installed files.
bash tests/cli/completions.sh "$root/usr/share/bash-completion/completions/tsarchive" \
  "$root/usr/share/zsh/vendor-completions/_tsarchive" "$root/usr/share/fish/vendor_completions.d/tsarchive.fish"

# The installed binary, and its torch layer found from where it is installed.
"$t" --version
# (Output captured first: under pipefail, grep -q closing the pipe early would fail the writer.)
version=$("$t" --version --verbose)
grep -q "^torch layer  $root/usr/bin/\.\./lib.*/tsarchive/libtsarchive_torch.so" <<<"$version" ||
  fail "the installed binary does not find its installed torch layer: $version"
out=$("$t" inspect "$testdata/mlp_scripted.pt")
grep -q '^.*mlp_scripted.pt: TorchScript archive$' <<<"$out" || fail "inspect: $out"
out=$("$t" run "$testdata/mlp_scripted.pt" --input 2x8 --iters 1 --warmup 0)
grep -q '^Outputs' <<<"$out" || fail "run: $out"
echo "installed tsarchive: inspect and run ok"
