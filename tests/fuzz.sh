#!/bin/sh
# Runs the fuzz targets over the checked-in corpus plus deterministic
# mutations (tests/fuzz/run.c).  `make fuzz` runs them under libFuzzer.
exec "${top_builddir:-.}/tests/fuzz_run" "${top_srcdir:-.}/tests/fuzz/corpus" 300
