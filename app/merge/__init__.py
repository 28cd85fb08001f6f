"""Resolving a fork: the judge, accepting its verdict, picking a winner, applying it, and
what the chat says afterwards.

Why a package: the workflow (``workflow``) is plain code over the session and the
coordinator, tested without a screen; ``screen_flow`` puts it on the chat screen (the
acceptance modal, the merge picker, closing the fork view); ``outcome`` holds what both and
the merge picker share about a merge's result.
"""
