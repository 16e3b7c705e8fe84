"""What the tests share besides conftest.py."""
