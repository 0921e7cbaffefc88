"""Calls of the official Python SDK that Mayfly answered wrongly (issue "Cosmos DB fidelity"), each failing before its
fix: a query with a feed range returned other partition keys' items; query_databases / query_containers were taken
for creates (400 "definition needs an id"); read_items with more than 256 ids was refused (400 "at most 256 query
parameters")."""
from azure.cosmos import PartitionKey

from conftest import unique


def test_query_with_a_feed_range_returns_only_that_range(cluster):
    client = cluster.client(1)
    database = client.create_database_if_not_exists(id=unique("feedrange"))
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"))
    keys = ["pk1", "pk2", "pk3", 42, True]
    for key in keys:
        for n in range(3):
            container.create_item({"id": f"{key}-{n}", "pk": key, "n": n})
    for key in keys:
        feed_range = container.feed_range_from_partition_key(key)
        rows = list(container.query_items("SELECT * FROM c", feed_range=feed_range))
        assert sorted(r["id"] for r in rows) == [f"{key}-{n}" for n in range(3)], (key, rows)
        count = list(container.query_items("SELECT VALUE COUNT(1) FROM c", feed_range=feed_range))
        assert count == [3]
    # The container's own feed ranges (one, the whole key space) still return everything.
    ranges = list(container.read_feed_ranges())
    everything = [r["id"] for feed_range in ranges for r in container.query_items("SELECT * FROM c",
                                                                                   feed_range=feed_range)]
    assert sorted(everything) == sorted(f"{key}-{n}" for key in keys for n in range(3))


def test_query_databases_and_containers(cluster):
    client = cluster.client(2)
    name = unique("querymeta")
    database = client.create_database(id=name)
    database.create_container(id="first", partition_key=PartitionKey(path="/pk"))
    database.create_container(id="second", partition_key=PartitionKey(path="/pk"))
    found = list(client.query_databases(query="SELECT * FROM root r WHERE r.id=@id",
                                        parameters=[{"name": "@id", "value": name}]))
    assert [d["id"] for d in found] == [name]
    assert list(client.query_databases(query="SELECT * FROM root r WHERE r.id='no-such-database'")) == []
    containers = list(database.query_containers(query="SELECT * FROM root r WHERE r.id=@id",
                                                parameters=[{"name": "@id", "value": "second"}]))
    assert [c["id"] for c in containers] == ["second"]
    assert containers[0]["partitionKey"]["paths"] == ["/pk"]
    assert sorted(c["id"] for c in database.query_containers(query="SELECT * FROM c")) == ["first", "second"]


def test_read_items_with_more_than_256_ids(cluster):
    client = cluster.client(3)
    database = client.create_database_if_not_exists(id=unique("readitems"))
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"))
    wanted = []
    for n in range(300):
        key = f"p{n % 7}"
        container.upsert_item({"id": f"i{n}", "pk": key, "n": n})
        wanted.append((f"i{n}", key))
    wanted.append(("missing", "p0"))
    found = container.read_items(items=wanted)
    assert sorted(item["n"] for item in found) == list(range(300))


def test_an_http2_preface_gets_goaway_http_1_1_required(cluster):
    """An HTTP/2 client with prior knowledge (the Rust SDK's default) is told, in HTTP/2, to use HTTP/1.1: the server's
    SETTINGS frame, then GOAWAY with HTTP_1_1_REQUIRED (0xd), then a clean close (not a reset). It was an HTTP/1.1
    400, which an HTTP/2 client cannot read as a reason to fall back."""
    import socket
    import struct
    port = cluster.http_ports[0]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        # The preface, an empty SETTINGS frame, and the first request's HEADERS (stream 1, END_STREAM | END_HEADERS;
        # the server answers once it has seen it, so the client's request fails with the reason, not "closed").
        conn.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00" +
                     b"\x00\x00\x01\x01\x05\x00\x00\x00\x01\x82")
        data = b""
        while True:
            chunk = conn.recv(4096)  # a reset raises here
            if not chunk:
                break
            data += chunk
    frames = []
    while len(data) >= 9:
        length = int.from_bytes(data[0:3], "big")
        frames.append((data[3], data[9:9 + length]))
        data = data[9 + length:]
    assert data == b"" and [kind for kind, _ in frames] == [0x4, 0x7], frames
    last_stream, error_code = struct.unpack(">II", frames[1][1][:8])
    assert (last_stream, error_code) == (0, 0xd)
    # The same port still serves HTTP/1.1.
    assert cluster.client(1).get_database_account() is not None


def test_no_response_on_write_and_the_account_and_container_shapes(cluster):
    """Prefer: return=minimal (no_response=True) answers a write with its headers only; the account lists its one
    region (its own address: the azure-cosmos test suite reads writableLocations[0]); a container's indexing policy
    has Cosmos's includedPaths / excludedPaths; resource ids nest (a container's `_rid` begins with its database's)."""
    import base64
    client = cluster.client(1)
    account = client.get_database_account()
    assert [loc["databaseAccountEndpoint"] for loc in account.WritableLocations] == [cluster.url(1)]
    assert [loc["databaseAccountEndpoint"] for loc in account.ReadableLocations] == [cluster.url(1)]
    database = client.create_database_if_not_exists(id=unique("shapes"))
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"))
    quiet = container.create_item({"id": "a", "pk": "p", "n": 1}, no_response=True)
    assert dict(quiet) == {}
    assert quiet.get_response_headers().get("x-ms-request-charge")  # the headers still come back
    assert dict(container.upsert_item({"id": "a", "pk": "p", "n": 2}, no_response=True)) == {}
    assert dict(container.replace_item("a", {"id": "a", "pk": "p", "n": 3}, no_response=True)) == {}
    item = container.read_item("a", partition_key="p")
    assert item["n"] == 3
    loud = container.upsert_item({"id": "a", "pk": "p", "n": 4})
    assert loud["n"] == 4
    policy = container.read()["indexingPolicy"]
    assert policy["indexingMode"] == "consistent" and policy["automatic"] is True
    assert policy["includedPaths"] == [{"path": "/*"}]
    assert policy["excludedPaths"] == [{"path": '/"_etag"/?'}]

    def rid_bytes(rid):
        return base64.b64decode(rid.replace("-", "/"))
    database_rid = rid_bytes(database.read()["_rid"])
    container_rid = rid_bytes(container.read()["_rid"])
    assert len(database_rid) == 4 and len(container_rid) == 8 and container_rid[:4] == database_rid
    item_rid = rid_bytes(item["_rid"])
    assert len(item_rid) == 16 and item_rid[:8] == container_rid


def test_a_transactional_batch_applies_all_or_nothing(cluster):
    """execute_item_batch sends a JSON array with x-ms-cosmos-is-batch-request: it was taken for a create of that array
    (400 "item body must be a JSON object"). Now every operation applies, in order, each seeing the earlier ones
    (create then read, patch, replace), as one log entry; or, when one fails, none does: 207 with the failed
    operation's status and 424 for the others, and nothing is written."""
    from azure.cosmos import exceptions
    import pytest
    database = cluster.client(1).create_database_if_not_exists(id=unique("batch"))
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"))
    container.create_item({"id": "old", "pk": "p", "n": 1})
    results = container.execute_item_batch(batch_operations=[
        ("create", ({"id": "a", "pk": "p", "n": 1},)),
        ("read", ("a",)),
        ("patch", ("a", [{"op": "incr", "path": "/n", "value": 4}])),
        ("upsert", ({"id": "b", "pk": "p", "ttl": 3600},)),
        ("replace", ("old", {"id": "old", "pk": "p", "n": 2})),
        ("delete", ("b",)),
    ], partition_key="p")
    assert [r["statusCode"] for r in results] == [201, 200, 200, 201, 200, 204]
    assert results[1]["resourceBody"]["id"] == "a"
    assert results[2]["resourceBody"]["n"] == 5
    assert container.read_item("a", partition_key="p")["n"] == 5
    assert container.read_item("old", partition_key="p")["n"] == 2
    # The etag a batch returns is the item's.
    assert results[4]["eTag"] == container.read_item("old", partition_key="p")["_etag"]

    # One failure (a create of an existing id) and nothing of the batch applies.
    with pytest.raises(exceptions.CosmosBatchOperationError) as failed:
        container.execute_item_batch(batch_operations=[
            ("upsert", ({"id": "c", "pk": "p"},)),
            ("create", ({"id": "a", "pk": "p"},)),
            ("delete", ("old",)),
        ], partition_key="p")
    assert failed.value.error_index == 1
    assert [r["statusCode"] for r in failed.value.operation_responses] == [424, 409, 424]
    assert sorted(container.query_items("SELECT VALUE c.id FROM c", partition_key="p")) == ["a", "old"]
    # An item of another partition fails the batch too (a batch writes one partition).
    with pytest.raises(exceptions.CosmosBatchOperationError) as foreign:
        container.execute_item_batch(batch_operations=[("create", ({"id": "x", "pk": "q"},))], partition_key="p")
    assert [r["statusCode"] for r in foreign.value.operation_responses] == [400]



def test_an_item_without_a_partition_key_value_is_in_the_undefined_partition(cluster):
    """An item with no value at the partition key path was a 400; Cosmos DB stores it in the undefined partition,
    which the SDK addresses with NonePartitionKeyValue (the header [{}]), distinct from null."""
    from azure.cosmos.partition_key import NonePartitionKeyValue
    database = cluster.client(2).create_database_if_not_exists(id=unique("undefinedpk"))
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"))
    container.create_item({"id": "a", "n": 1})
    container.create_item({"id": "a", "pk": None, "n": 2})
    assert container.read_item("a", partition_key=NonePartitionKeyValue)["n"] == 1
    assert container.read_item("a", partition_key=None)["n"] == 2
    container.delete_item("a", partition_key=NonePartitionKeyValue)
    assert [item["n"] for item in container.read_all_items()] == [2]


def test_distinct_through_the_sdk(cluster):
    """SELECT DISTINCT was a 400 ("DISTINCT is not supported"); the node answers it in one page, each row once."""
    database = cluster.client(3).create_database_if_not_exists(id=unique("distinct"))
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"))
    for n in range(12):
        container.create_item({"id": f"i{n}", "pk": f"p{n % 3}", "color": ["red", "blue"][n % 2]})
    colors = list(container.query_items("SELECT DISTINCT VALUE c.color FROM c", enable_cross_partition_query=True))
    assert sorted(colors) == ["blue", "red"]
    pairs = list(container.query_items("SELECT DISTINCT c.pk, c.color FROM c WHERE c.pk = 'p1'", partition_key="p1"))
    assert sorted((p["pk"], p["color"]) for p in pairs) == [("p1", "blue"), ("p1", "red")]
