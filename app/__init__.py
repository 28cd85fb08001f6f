"""forkdeck's Textual terminal UI. It reaches the engine only through its public API."""
