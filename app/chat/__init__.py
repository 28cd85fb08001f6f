"""The parent chat: the transcript's turns, what a submitted line does, ``!cmd``, and the
commands that need no fork (``/help``, ``/cost``, settings, ...).

Why a package: these change together (a new input form touches the parser, the queue and
its dispatch) and apart from the fork and merge features beside it.
"""
