#!/bin/sh
echo "bazel coverage needs remote_coverage_tools, which cannot be fetched offline" >&2
exit 1
