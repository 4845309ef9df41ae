#!/bin/sh
# run-tests.sh -- ratelimit-envoy's tests (tests/envoy, pytest), as `make
# check` runs them with --with-ratelimit-envoy: the binary just built, a real
# gRPC client (Debian's python3-grpcio) with messages protoc generates
# from the project's .proto copies into a temporary directory (nothing is
# written to the source tree: a VPATH build of a read-only tree works),
# real redis-server processes.
#
# Exit 0: pass, 1: fail, 77: skip (no python3 with pytest, grpc and
# protobuf, or no protoc).
top_srcdir=${top_srcdir:-$(dirname "$0")/../..}
top_builddir=${top_builddir:-.}
python=${RATELIMIT_PYTHON:-/usr/bin/python3}

if [ ! -x "$python" ] || ! "$python" -c 'import pytest, grpc, google.protobuf' 2>/dev/null; then
    echo "SKIP: $python with pytest, grpc and protobuf not found (Debian: python3-pytest python3-grpcio python3-protobuf)"
    exit 77
fi
if ! command -v protoc >/dev/null; then
    echo "SKIP: protoc not found (Debian: protobuf-compiler)"
    exit 77
fi
abs() { (cd "$(dirname "$1")" && printf '%s/%s\n' "$(pwd)" "$(basename "$1")"); }
gen=$(mktemp -d "${TMPDIR:-/tmp}/rl-envoy-pb.XXXXXX") || exit 1
trap 'rm -rf "$gen"' EXIT INT TERM
proto=$top_srcdir/tools/ratelimit-envoy/proto
(cd "$proto" && protoc -I. --python_out="$gen" \
    envoy/service/ratelimit/v3/rls.proto \
    envoy/extensions/common/ratelimit/v3/ratelimit.proto \
    envoy/config/core/v3/base.proto envoy/type/v3/ratelimit_unit.proto) || exit 1

RATELIMIT_ENVOY=${RATELIMIT_ENVOY:-$(abs "$top_builddir/tools/ratelimit-envoy/ratelimit-envoy")}
RLS_PB_DIR=$gen
# ratelimitd, for the rules_source tests (skipped without --with-ratelimitd)
RATELIMITD=${RATELIMITD:-$(abs "$top_builddir/tools/ratelimitd/ratelimitd")}
RLS_REDIS_HELPER=$(abs "$top_srcdir/bindings/python/tests/redis_server.py")
RLS_EXAMPLE_CONFIG=$(abs "$top_srcdir/examples/envoy/ratelimit-config")
PYTHONDONTWRITEBYTECODE=1
# grpcio's fork handlers (pthread_atfork) crashed the test process in a
# fork for a child (subprocess with preexec_fn, beside the channels'
# threads): off, as the children exec at once
GRPC_ENABLE_FORK_SUPPORT=false
export GRPC_ENABLE_FORK_SUPPORT RATELIMIT_ENVOY RATELIMITD RLS_PB_DIR RLS_REDIS_HELPER RLS_EXAMPLE_CONFIG \
    PYTHONDONTWRITEBYTECODE
"$python" -m pytest -q -p no:cacheprovider "$top_srcdir/tests/envoy" "$@"
