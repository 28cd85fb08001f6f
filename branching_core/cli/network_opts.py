"""``--network none|private|host`` and ``--service NAME`` for the commands that sandbox.

One place for the flags and for turning them (with ``[sandbox] network`` and
``[services.*]`` of the workspace's config.toml) into a ``NetworkSetup``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from branching_core.sandbox.net_settings import NetworkSetup, Purpose, network_setup

if TYPE_CHECKING:
    from branching_core.workspace import Workspace


def add_network_option(p: argparse.ArgumentParser, *, services: bool = True) -> None:
    p.add_argument("--network", choices=["none", "private", "host"], default=None,
                   help="the sandbox's network: none (loopback only), private (own "
                        "namespace with outbound access through pasta/slirp4netns) or host "
                        "(default: [sandbox] network, else none; private with services)")
    if services:
        p.add_argument("--service", action="append", dest="services", default=[],
                       metavar="NAME", help="start this [services.NAME] in the branch "
                       "first (repeatable); it runs until the branch ends")


def setup_from_args(args: argparse.Namespace, ws: Workspace, purpose: Purpose = "command"
                    ) -> NetworkSetup:
    """The network setup for this command (config of workspace ``ws`` plus the flags)."""
    from branching_core.config import load_settings

    settings = load_settings(ws.path).settings
    return network_setup(settings, override=getattr(args, "network", None), purpose=purpose)


__all__ = ["add_network_option", "setup_from_args"]
