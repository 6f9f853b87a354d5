# shellcheck shell=bash
# Packages from a Debian suite other than the host's, fetched with an apt configuration of
# their own: its own sources list, state, status, cache and trusted keys (Debian's archive keys
# from the host's debian-archive-keyring). The host's sources and state are never read or
# written, and nothing is installed: the callers download .deb files and unpack them.
# Sourced by tests/emu/run (rdma-core releases) and tests/vm/run (a newer kernel).
#
#   debian_apt_for DIR SUITE...   fill debian_apt_opts (for apt-get and apt-cache) with a
#                                 configuration that lives under DIR and reads SUITE's main
#   debian_apt_update DIR SECONDS fetch the package lists when they are older than SECONDS;
#                                 on a failure keep older lists if there are any. Returns 1
#                                 only when there are none (apt's output is in DIR/log/update.txt)
#   debian_apt_preflight          why this host cannot use it (printed), or nothing; returns
#                                 1 in the first case
#
# DEBIAN_APT_MIRROR (http://deb.debian.org/debian) and DEBIAN_APT_ARCH (amd64) may be set first.

debian_apt_keyring=/usr/share/keyrings/debian-archive-keyring.gpg
debian_apt_mirror=${DEBIAN_APT_MIRROR:-http://deb.debian.org/debian}
debian_apt_arch=${DEBIAN_APT_ARCH:-amd64}

debian_apt_preflight() {
    if ! command -v apt-get >/dev/null; then
        echo "no apt-get: the packages come from Debian's archive"
    elif ! command -v dpkg-deb >/dev/null; then
        echo "no dpkg-deb to unpack the packages"
    elif [[ $(dpkg --print-architecture 2>/dev/null) != "$debian_apt_arch" ]]; then
        echo "the packages are fetched for $debian_apt_arch only"
    elif [[ ! -r $debian_apt_keyring ]]; then
        echo "no $debian_apt_keyring (debian-archive-keyring): apt could not check the archive"
    else
        return 0
    fi
    return 1
}

debian_apt_for() {
    local a=$1 suite
    shift
    debian_apt_opts=(-q -o "Dir::Etc::SourceList=$a/sources.list" -o "Dir::Etc::SourceParts=$a/none"
        -o "Dir::Etc::Preferences=$a/none/preferences" -o "Dir::Etc::PreferencesParts=$a/none"
        -o "Dir::Etc::Trusted=$a/none/trusted.gpg" -o "Dir::Etc::TrustedParts=$a/none"
        -o "Dir::State=$a/state" -o "Dir::State::status=$a/status" -o "Dir::Cache=$a/cache"
        -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "Dir::Log=$a/log"
        -o "APT::Architecture=$debian_apt_arch" -o "APT::Architectures::=$debian_apt_arch"
        -o "APT::Sandbox::User=$(id -un)" -o Debug::NoLocking=1 -o Acquire::Languages=none)
    mkdir -p "$a/none" "$a/state/lists/partial" "$a/cache/archives/partial" "$a/log"
    : >>"$a/status"
    : >"$a/sources.list"
    for suite in "$@"; do
        echo "deb [signed-by=$debian_apt_keyring] $debian_apt_mirror $suite main" >>"$a/sources.list"
    done
}

debian_apt_update() {
    local a=$1 refresh=$2 stamp=$1/state/updated age have=0
    age=$((refresh + 1))
    # The stamp holds the sources its lists were fetched from: lists of other suites are
    # not lists at all.
    if [[ -f $stamp ]] && cmp -s "$stamp" "$a/sources.list"; then
        have=1
        age=$(($(date +%s) - $(stat -c %Y "$stamp")))
    fi
    ((age > refresh)) || return 0
    if apt-get "${debian_apt_opts[@]}" --error-on=any update >"$a/log/update.txt" 2>&1; then
        cp "$a/sources.list" "$stamp"
    elif ((have)); then
        echo "apt-get update failed; using the package lists of $(date -r "$stamp" -u +%F)"
    else
        return 1
    fi
}
