#!/usr/bin/env bash
# Regenerates go.mod's replace block from k8s.io/kubernetes's own go.mod: upstream points each
# staging module at ./staging/src/k8s.io/X, which does not exist in the module download, so
# each becomes k8s.io/X at the staging release that matches the kubernetes version
# (v1.A.B -> v0.A.B). Run it after changing the kubernetes version in go.mod; never edit the
# block by hand.
set -euo pipefail
cd "$(dirname "$0")"
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
staging="v0.${version#v1.}"
upstream=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[[ -f $upstream ]] || { echo "gen-replace.sh: no go.mod for k8s.io/kubernetes@$version" >&2; exit 1; }
mods=$(sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/k8s\.io/.*#\1#p' "$upstream")
[[ -n $mods ]] || { echo "gen-replace.sh: no staging replace lines in $upstream" >&2; exit 1; }
edits=()
for m in $(go mod edit -json | sed -n 's/.*"Path": "\(k8s\.io\/[^"]*\)".*/\1/p' | sort -u); do
  edits+=("-dropreplace=$m")
done
for m in $mods; do edits+=("-replace=$m=$m@$staging"); done
go mod edit "${edits[@]}"
echo "gen-replace.sh: $(wc -w <<<"$mods") staging modules pinned to $staging (from k8s.io/kubernetes@$version)" >&2
