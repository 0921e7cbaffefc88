"""free_ports(count): `count` distinct TCP ports on 127.0.0.1 that were free a moment ago (bound to port 0, read,
closed together so none repeats). Shared by the Python tests (tests/deploy/compose_test.py, tests/gateway/conftest.py):
standard library only, so a test importing it needs nothing else (the deploy test stays free of pytest). A port can
still be taken by another process between this call and its use."""
import socket


def free_ports(count):
    sockets, ports = [], []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
        ports.append(s.getsockname()[1])
    for s in sockets:
        s.close()
    return ports
