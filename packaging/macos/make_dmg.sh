#!/usr/bin/env bash
# make_dmg.sh APP DMG — a compressed disk image holding APP and a link to /Applications
# (drag-to-install). Needs macOS (hdiutil). The app is ad-hoc signed by PyInstaller, not
# notarized: see docs/packaging.md for what a signed release needs.
set -euo pipefail
app=$1 dmg=$2
[ -d "$app" ] || { echo "make_dmg.sh: $app is not a directory" >&2; exit 2; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -R "$app" "$stage/"
ln -s /Applications "$stage/Applications"
rm -f "$dmg"
hdiutil create -volname Mnemoscope -srcfolder "$stage" -fs HFS+ -format UDZO -ov "$dmg"
echo "$dmg  $(du -h "$dmg" | cut -f1)"
