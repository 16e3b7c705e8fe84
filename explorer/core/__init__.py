"""explorer.core."""
