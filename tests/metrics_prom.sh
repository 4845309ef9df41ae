#!/bin/sh
# metrics_prom.sh -- tests/metrics_dump (known traffic, then the metrics)
# read back by Prometheus's own parser: tests/metrics_prom.py, with
# Debian's python3-prometheus-client under /usr/bin/python3 (not a python3
# that PATH may find first, which may lack it).
#
# Run by `make check` from the build directory (top_srcdir in the
# environment).  Exit 0: pass, 1: fail, 77: skip (no prometheus_client).
top_srcdir=${top_srcdir:-$(dirname "$0")/..}
PYTHON=${PROM_PYTHON:-/usr/bin/python3}

if ! "$PYTHON" -c 'import prometheus_client.parser' 2>/dev/null; then
    echo "SKIP: $PYTHON has no prometheus_client (python3-prometheus-client)"
    exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
./tests/metrics_dump "$tmp/metrics.txt" "$tmp/tally.json" || {
    echo "FAIL: metrics_dump"
    exit 1
}
"$PYTHON" "$top_srcdir/tests/metrics_prom.py" "$tmp/metrics.txt" "$tmp/tally.json"
