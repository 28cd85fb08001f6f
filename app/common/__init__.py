"""App-wide pieces no single feature owns: the yes/no dialog, the full tool output modal,
the type-ahead guard for modals, the redraw helpers, and the protocols the features use to
talk to the chat screen (``ports``).

Why a package: a feature (chat, fork, merge, review) may import from here and from the
engine's public modules, never another feature's screen; this package imports no feature.
"""
