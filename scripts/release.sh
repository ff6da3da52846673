#!/usr/bin/env bash
# Cut a Flint release: make release VERSION=vX.Y.Z
#
# 1. checks the tree: on main, nothing uncommitted or untracked, the tag
#    new, the version a semantic version above the last tag, and CHANGELOG.md
#    holding an "## Unreleased" section with something in it;
# 2. turns that section into "## vX.Y.Z (date)" under a fresh, empty
#    "## Unreleased", commits it and tags the commit (annotated, with the
#    section as the message);
# 3. builds the binaries with the release flags (make release-build: one per
#    RELEASE_PLATFORMS entry, in dist/, with SHA256SUMS) and, where docker is
#    installed and RELEASE_IMAGE is not 0, the image flint:vX.Y.Z from the
#    Dockerfile (same flags).
#
# Nothing is pushed: push the branch and the tag yourself once you have
# looked at them (git push origin main vX.Y.Z).
set -euo pipefail

die() { echo "release: $*" >&2; exit 1; }

version=${1:-}
[[ $version =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]] ||
	die "VERSION must look like v1.2.3 (got '${version}'): make release VERSION=v1.2.3"

cd "$(git rev-parse --show-toplevel)"
[[ $(git rev-parse --abbrev-ref HEAD) == main ]] || die "releases are cut from main (this is $(git rev-parse --abbrev-ref HEAD))"
[[ -z $(git status --porcelain) ]] || die "the tree has changes; commit or stash them first:
$(git status --short)"
! git rev-parse -q --verify "refs/tags/$version" >/dev/null || die "tag $version exists already"
last=$(git tag --list 'v*' --sort=-v:refname | head -n1)
if [[ -n $last ]]; then
	[[ $(printf '%s\n%s\n' "$last" "$version" | sort -V | tail -n1) == "$version" ]] ||
		die "$version is not above the last release, $last"
fi

[[ -f CHANGELOG.md ]] || die "CHANGELOG.md is missing"
grep -q '^## Unreleased$' CHANGELOG.md || die 'CHANGELOG.md has no "## Unreleased" section'
notes=$(awk '/^## Unreleased$/ {on=1; next} on && /^## / {exit} on {print}' CHANGELOG.md | sed '/./,$!d')
[[ -n ${notes//[[:space:]]/} ]] || die 'the "## Unreleased" section of CHANGELOG.md is empty: say what this release changes'

today=$(date -u +%Y-%m-%d)
awk -v v="$version" -v d="$today" '
	/^## Unreleased$/ && !done { print; print ""; print "## " v " (" d ")"; done=1; next }
	{ print }' CHANGELOG.md >CHANGELOG.md.new
mv CHANGELOG.md.new CHANGELOG.md
git add CHANGELOG.md
git commit -q -m "Release $version"
git tag -a "$version" -F - <<<"Flint $version

$notes"
echo "release: tagged $version ($(git rev-parse --short HEAD))"

make --no-print-directory release-build VERSION="$version"
if [[ ${RELEASE_IMAGE:-1} == 0 ]]; then
	echo "release: RELEASE_IMAGE=0: image not built"
elif command -v docker >/dev/null 2>&1; then
	docker build --build-arg VERSION="$version" -t "flint:$version" .
	echo "release: built image flint:$version"
else
	echo "release: docker is not installed here; build the image with: docker build --build-arg VERSION=$version -t flint:$version ."
fi
echo "release: done. Push with: git push origin main $version"
