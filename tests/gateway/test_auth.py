"""Keys through the gateway: the Cosmos key of a Mayfly key K is base64(K); a bad signature is 401 (never 403,
which makes the SDKs loop); a read-only key cannot write (403); the emulator's well-known key works with
--emulator-key on a loopback address. And malformed HTTP gets 400 without hurting the node."""
import base64
import json
import os
import socket
import urllib.error
import urllib.request

from azure.cosmos import CosmosClient, PartitionKey, exceptions

from conftest import EMULATOR_KEY, status_of, unique


def test_bad_signature_is_401(cluster):
    wrong = base64.b64encode(os.urandom(32)).decode()
    assert status_of(lambda: CosmosClient(cluster.url(1), credential=wrong)) == 401
    # A key close to a real one (base64 of the readwrite key with one byte more) is refused too, on another node.
    near = base64.b64encode(cluster.keys["readwrite"].encode() + b"x").decode()
    assert status_of(lambda: CosmosClient(cluster.url(2), credential=near)) == 401


def test_missing_authorization_is_401_with_a_cosmos_error_body(cluster):
    request = urllib.request.Request(cluster.url(1) + "dbs", headers={"x-ms-date": "Tue, 24 Nov 2026 12:00:00 GMT"})
    try:
        urllib.request.urlopen(request, timeout=10)
        raise AssertionError("expected 401")
    except urllib.error.HTTPError as error:
        assert error.code == 401
        body = json.loads(error.read())
        assert body["code"] == "Unauthorized" and "authorization" in body["message"]


def test_read_only_key_reads_but_cannot_write(cluster):
    name = unique("readonly")
    cluster.client(1).create_database_if_not_exists(name).create_container(
        id="c", partition_key=PartitionKey(path="/pk")).create_item({"id": "a", "pk": "p"})
    reader = cluster.client(3, role="readonly").get_database_client(name).get_container_client("c")
    assert reader.read_item("a", partition_key="p")["id"] == "a"
    try:
        reader.create_item({"id": "b", "pk": "p"})
        raise AssertionError("a read-only key must not write")
    except exceptions.CosmosHttpResponseError as error:
        assert error.status_code == 403 and "readonly" in error.message


def test_emulator_key_on_loopback(cluster):
    client = CosmosClient(cluster.url(2), credential=EMULATOR_KEY)
    database = client.create_database_if_not_exists(unique("emulator"))
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"))
    assert container.create_item({"id": "a", "pk": "p"})["id"] == "a"


def raw(cluster, data):
    with socket.create_connection(("127.0.0.1", cluster.http_ports[0]), timeout=10) as s:
        s.sendall(data)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_malformed_http_gets_400_and_the_node_keeps_serving(cluster):
    for junk in (b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n",
                 b"POST /dbs HTTP/1.1\r\nContent-Length: -5\r\n\r\n", b"\x00\xff\xfe\r\n\r\n"):
        answer = raw(cluster, junk)
        assert answer.startswith(b"HTTP/1.1 400"), (junk, answer[:200])
    big = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n"
    assert raw(cluster, big).startswith(b"HTTP/1.1 431")
    huge_body = b"POST /dbs HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n"
    assert raw(cluster, huge_body).startswith(b"HTTP/1.1 413")
    assert cluster.alive()
    assert cluster.client(1).create_database_if_not_exists(unique("after-junk")) is not None


def signed_get(cluster, path, resource_type, resource_link, date):
    """A GET signed by hand with the readonly key, as the SDKs sign (shared/spec/cosmos-rest.md)."""
    import hashlib
    import hmac
    import urllib.parse
    text = f"get\n{resource_type}\n{resource_link}\n{date.lower()}\n\n"
    signature = base64.b64encode(hmac.new(cluster.keys["readonly"].encode(), text.encode(),
                                          hashlib.sha256).digest()).decode()
    request = urllib.request.Request(cluster.url(1) + path, headers={
        "x-ms-date": date, "x-ms-version": "2020-07-15",
        "authorization": urllib.parse.quote(f"type=master&ver=1.0&sig={signature}", safe="")})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_signature_is_good_for_fifteen_minutes_only(cluster):
    import email.utils
    import time
    now = email.utils.formatdate(time.time(), usegmt=True)
    status, body = signed_get(cluster, "dbs", "dbs", "", now)
    assert status == 200 and "Databases" in body  # signed by hand exactly as the SDKs do
    an_hour_ago = email.utils.formatdate(time.time() - 3600, usegmt=True)
    status, body = signed_get(cluster, "dbs", "dbs", "", an_hour_ago)
    assert status == 401 and "15 minutes" in body["message"], body


def test_an_open_node_accepts_any_signature_like_its_rpc_port():
    from conftest import Cluster
    open_cluster = Cluster(nodes=1, auth=False)
    try:
        open_cluster.wait_ready()
        any_key = base64.b64encode(os.urandom(64)).decode()
        database = CosmosClient(open_cluster.url(1), credential=any_key).create_database_if_not_exists("open")
        assert database.read()["id"] == "open"
        with urllib.request.urlopen(open_cluster.url(1) + "dbs", timeout=10) as response:  # no authorization at all
            assert response.status == 200 and "open" in [d["id"] for d in json.loads(response.read())["Databases"]]
    except Exception:
        open_cluster.failed = True
        raise
    finally:
        open_cluster.stop()
