#!/bin/sh
echo "coverage is not collected through Bazel in kiln" >&2
exit 1
