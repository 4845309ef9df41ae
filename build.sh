#!/bin/sh
# build.sh -- one entry point for a fresh Debian 12 machine.
#
#   ./build.sh demo    install what the build needs, build, run the demo
#   ./build.sh check   install, build, run the test suite (make check)
#   ./build.sh bench   install, build, run bench/rlbench
#   ./build.sh deps    only install the Debian packages
#
# Packages come from apt-get (as root, or through sudo); the build is the
# plain autotools one: autoreconf -fi && ./configure && make.
set -eu
cd "$(dirname "$0")"

PACKAGES="build-essential autoconf automake libtool pkg-config \
libhiredis-dev libjansson-dev check mandoc libreadline8 redis-server \
redis-tools redis-sentinel libmicrohttpd-dev libsqlite3-dev libcurl4-openssl-dev \
libevent-dev libuv1-dev libssl-dev openssl python3-prometheus-client \
python3-pytest python3-venv python3-setuptools python3-wheel curl nginx nginx-dev wrk \
valgrind \
libgrpc-dev protobuf-c-compiler libprotobuf-c-dev libyaml-dev python3-grpcio \
python3-protobuf protobuf-compiler nghttp2-client"

deps() {
    missing=""
    for p in $PACKAGES; do
        dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "build.sh: installing$missing"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing
}

build() {
    [ -x configure ] || autoreconf -fi
    [ -f Makefile ] || ./configure --enable-werror --with-ratelimitd --with-ratelimit-envoy
    make -j"$(nproc)"
}

case "${1:-demo}" in
deps) deps ;;
demo) deps; build; make demo ;;
check) deps; build; make -j"$(nproc)" check ;;
bench) deps; build; make bench ;;
*) echo "usage: ./build.sh demo|check|bench|deps" >&2; exit 2 ;;
esac
