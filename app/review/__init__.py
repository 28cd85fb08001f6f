"""Review in the TUI beyond picking one branch: combine, process view, estimates (issue 17)."""
