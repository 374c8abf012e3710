#!/usr/bin/env bash
# Binary size budgets: fails when a connector's binary grows past its budget.
#
#   bench/size.sh [--max-ratio R] [--bundle] [--hello-bundle-max BYTES]
#                 [--billing-bundle-max BYTES] [--no-build]
#
# 1. Release builds (the profile a user ships without `cargo fusion bundle`) of examples/hello
#    and bench/plain-hello, each built alone so that no other package's features leak in,
#    stripped (`strip -o`): fails when hello ÷ plain-hello is over --max-ratio (default 1.5,
#    issue 22's target).
# 2. With --bundle, examples/hello and examples/billing (default features) built with the
#    settings of `cargo fusion bundle`'s `bundle` profile (release, strip, fat LTO, one codegen
#    unit): fails when hello is over --hello-bundle-max (default 8 MB) or billing over
#    --billing-bundle-max (default 15 MB), issue 27's targets.
#
# Sizes are exact and do not depend on the machine's load; the builds take minutes (a fat-LTO
# build of billing, ten or more on a loaded 2-core machine), which is why this is a script and
# not part of `cargo test`. Prints one line per binary and a verdict; exits 1 over a budget.
set -euo pipefail

max_ratio=1.5
bundle=0
hello_bundle_max=8000000
billing_bundle_max=15000000
build=1
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --max-ratio) max_ratio="$2"; shift 2 ;;
    --bundle) bundle=1; shift ;;
    --hello-bundle-max) hello_bundle_max="$2"; shift 2 ;;
    --billing-bundle-max) billing_bundle_max="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "size.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=0

# stripped PATH: the size in bytes of PATH once stripped.
stripped() {
  strip -o "$work/stripped" "$1"
  stat -c %s "$work/stripped"
}
# verdict NAME SIZE LIMIT_DESCRIPTION OK
verdict() {
  if [ "$4" = 1 ]; then echo "ok    $1 $2 ($3)"; else echo "OVER  $1 $2 ($3)"; failed=1; fi
}

if [ "$build" = 1 ]; then
  for package in hello plain-hello; do
    echo "== building $package (release)" >&2
    cargo build --release --quiet -p "$package"
  done
fi
hello="$(stripped "$target/release/hello")"
plain="$(stripped "$target/release/plain-hello")"
ratio="$(python3 -c "print(f'{$hello / $plain:.3f}')")"
echo "release, stripped: hello $hello bytes, plain-hello $plain bytes, hello ÷ plain $ratio"
verdict "hello ÷ plain-hello" "$ratio" "budget $max_ratio" \
  "$(python3 -c "print(int($hello / $plain <= $max_ratio))")"

if [ "$bundle" = 1 ]; then
  settings=(--config 'profile.bundle.inherits="release"' --config 'profile.bundle.strip=true'
    --config 'profile.bundle.lto=true' --config 'profile.bundle.codegen-units=1')
  for package in hello billing; do
    if [ "$build" = 1 ]; then
      echo "== building $package (bundle profile)" >&2
      cargo build --quiet "${settings[@]}" --profile bundle -p "$package" --bin "$package"
    fi
  done
  hello_bundle="$(stripped "$target/bundle/hello")"
  billing_bundle="$(stripped "$target/bundle/billing")"
  echo "bundle profile, stripped: hello $hello_bundle bytes, billing $billing_bundle bytes"
  verdict "hello (bundle)" "$hello_bundle" "budget $hello_bundle_max" \
    "$([ "$hello_bundle" -le "$hello_bundle_max" ] && echo 1 || echo 0)"
  verdict "billing (bundle)" "$billing_bundle" "budget $billing_bundle_max" \
    "$([ "$billing_bundle" -le "$billing_bundle_max" ] && echo 1 || echo 0)"
fi
exit "$failed"
