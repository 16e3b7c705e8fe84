"""explorer.models."""
