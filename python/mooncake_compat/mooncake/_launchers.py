"""`mooncake_master` and `mooncake_client` of the compatibility package: `kvtier master` and
`kvtier node`, which accept Mooncake's flag spellings (docs/mooncake-migration.md)."""

import os
import sys

from kvtier.server import find_binary


def _run(subcommand):
    binary = find_binary()
    os.execv(binary, [binary, subcommand] + sys.argv[1:])


def master():
    _run("master")


def client():
    _run("node")
