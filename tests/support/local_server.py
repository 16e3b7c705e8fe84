"""A free TCP port on 127.0.0.1, for app servers started by the tests and the app benchmark."""

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
