"""The environment variables that configure a real model.

Why a module of its own: the session's offline greeting and the merge's "the judge has no
model" notice both name them; the merge code sits above the session and must not import
it back (``app.session`` re-exports the tuple).
"""

from __future__ import annotations

MODEL_ENV_KEYS = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GOOGLE_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "OPENROUTER_API_KEY",
    "OLLAMA_BASE_URL",
)
"""Shown in the offline greeting and when the judge has no model."""
