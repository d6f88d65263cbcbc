#!/bin/sh
# A deliberately broken locktest client: dies at start.
echo "fatal: cannot load my lock library" >&2
exit 3
