"""The live fork inside the chat: opening one, its view (tabs, panels, badge, log strip),
steering ``>>label``, follow-up turns on a branch tab, approvals, terminating a branch,
aborting, recovering a fork an earlier session left open, ``/fork diff``.

Why a package: these change together with the coordinator's API and apart from the chat's
turns and the merge workflow. The fork widgets (tabs, panels, badge, log strip, pickers)
live here too; every module here imports them (and pydantic-ai behind them) only when a fork starts.
"""
