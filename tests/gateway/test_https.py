"""HTTPS: a node started with --tls-cert/--tls-key serves the gateway over TLS only, with the certificate of its RPC
port. The SDK works unchanged given the cluster's CA (ssl_config.SSLCaCerts), TTL included; without the CA it refuses
the certificate; plain HTTP to the port gets no answer (the connection is closed) and the node keeps serving.
(The gateway listens on 127.0.0.2: the Python SDK skips certificate checks for localhost and 127.0.0.1.)"""
import socket
import ssl
import time

import pytest
from azure.core.exceptions import ServiceRequestError
from azure.cosmos import CosmosClient, PartitionKey, exceptions

from conftest import running_cluster, unique, wait_until


@pytest.fixture(scope="module")
def tls_cluster():
    yield from running_cluster(nodes=1, tls=True)


def test_sdk_over_https_with_the_clusters_ca(tls_cluster):
    assert tls_cluster.url(1).startswith("https://")
    database = tls_cluster.client(1).create_database_if_not_exists(unique("https"))
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"), default_ttl=2)
    created = container.create_item({"id": "a", "pk": "p"})
    assert created["_expiresAt"] == created["_ts"] + 2
    assert container.read_item("a", partition_key="p")["id"] == "a"
    assert [i["id"] for i in container.query_items("SELECT * FROM c WHERE c.pk = @p",
                                                   parameters=[{"name": "@p", "value": "p"}],
                                                   partition_key="p")] == ["a"]

    def gone():
        try:
            container.read_item("a", partition_key="p")
            return False
        except exceptions.CosmosResourceNotFoundError:
            return True
    wait_until(gone, 30, poll_s=0.2, what="the item's expiry (404 over https)")


def test_the_certificate_is_refused_without_the_ca(tls_cluster):
    # The SDK trusts the system store by default; the cluster's private CA is not in it.
    with pytest.raises(ServiceRequestError) as raised:
        CosmosClient(tls_cluster.url(1), credential=tls_cluster.cosmos_key(), retry_total=0)
    assert "CERTIFICATE_VERIFY_FAILED" in str(raised.value) or "certificate verify failed" in str(raised.value)


def test_plain_http_to_the_https_port_gets_no_answer_and_the_node_serves_on(tls_cluster):
    host, port = tls_cluster.http_host, tls_cluster.http_ports[0]
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(10)
        received = b""
        started = time.monotonic()
        while time.monotonic() - started < 10:
            chunk = s.recv(65536)
            if not chunk:
                break
            received += chunk
    assert not received.startswith(b"HTTP/"), received[:200]
    # A TLS client that trusts the CA still gets answers (the bad connection hurt nothing).
    context = ssl.create_default_context(cafile=tls_cluster.ca_file)
    with socket.create_connection((host, port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=host) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: " + host.encode() + b"\r\nConnection: close\r\n\r\n")
            answer = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]  # unsigned: 401, over TLS
    assert tls_cluster.alive()
