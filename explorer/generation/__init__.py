"""explorer.generation.decoding."""
