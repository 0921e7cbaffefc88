"""The gateway's connection bounds on real processes: past --http-max-connections the connection that has waited
longest for a request is closed to make room for the new one (and the node keeps serving), and a connection idle for
--http-idle-timeout-ms is closed."""
import socket

from conftest import Cluster, wait_until


def closed_by_server(sock):
    try:
        return sock.recv(1) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def test_connection_limit_and_idle_timeout():
    cluster = Cluster(extra_flags=("--http-max-connections", "4", "--http-idle-timeout-ms", "1500"))
    try:
        cluster.wait_ready()
        port = cluster.http_ports[1]
        # wait_ready's connections to node 2 are gone once the node closed them (idle).
        idle = [socket.create_connection(("127.0.0.1", port), timeout=0.2) for _ in range(4)]
        extra = socket.create_connection(("127.0.0.1", port), timeout=0.2)
        # Full: the oldest idle connection makes room; the fifth stays open.
        wait_until(lambda: closed_by_server(idle[0]), 10, what="the oldest idle connection to be evicted")
        assert not closed_by_server(extra), "the fifth connection must be admitted"
        # The others are closed by the node after the idle timeout (bounded wait, not a sleep).
        for sock in idle + [extra]:
            wait_until(lambda s=sock: closed_by_server(s), 10, what="an idle connection to be closed")
            sock.close()
        # Then there is room again, and the node serves.
        assert cluster.client(2).create_database_if_not_exists("after-limits") is not None
        assert cluster.alive()
    except Exception:
        cluster.failed = True
        raise
    finally:
        cluster.stop()
