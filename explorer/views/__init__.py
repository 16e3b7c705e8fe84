"""explorer.views."""
