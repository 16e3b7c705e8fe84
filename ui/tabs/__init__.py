"""ui.tabs."""
