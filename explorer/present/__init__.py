"""explorer.present."""
