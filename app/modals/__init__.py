"""forkdeck TUI package."""
