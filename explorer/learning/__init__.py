"""explorer.learning."""
