"""The Cosmos DB quickstart with the official Python SDK, unchanged, against a Mayfly node's gateway."""
from azure.core import MatchConditions
from azure.cosmos import PartitionKey, exceptions

from conftest import status_of, unique


def test_quickstart(cluster):
    client = cluster.client(2)  # a follower most of the time: writes are forwarded to the leader
    name = unique("quickstart")
    database = client.create_database_if_not_exists(id=name)
    assert database.read()["id"] == name
    assert name in [d["id"] for d in client.list_databases()]
    container = database.create_container_if_not_exists(
        id="carts", partition_key=PartitionKey(path="/user"), default_ttl=3600)
    properties = container.read()
    assert properties["defaultTtl"] == 3600
    assert properties["partitionKey"]["paths"] == ["/user"]
    assert "carts" in [c["id"] for c in database.list_containers()]
    # create_container_if_not_exists again finds it
    assert database.create_container_if_not_exists(id="carts", partition_key=PartitionKey(path="/user")).id == "carts"

    for n in range(7):
        created = container.create_item({"id": f"c{n}", "user": "ana" if n % 2 == 0 else "bo", "n": n})
        assert created["n"] == n and created["_etag"] and created["_ts"] > 0
    assert status_of(lambda: container.create_item({"id": "c1", "user": "bo"})) == 409
    item = container.read_item("c1", partition_key="bo")
    assert item["n"] == 1 and item["user"] == "bo"

    # Queries with parameters, answered completely by the server (ORDER BY across partitions, VALUE, COUNT).
    rows = list(container.query_items("SELECT * FROM c WHERE c.n >= @min ORDER BY c.n DESC",
                                      parameters=[{"name": "@min", "value": 4}], enable_cross_partition_query=True))
    assert [r["id"] for r in rows] == ["c6", "c5", "c4"]
    ids = list(container.query_items("SELECT VALUE c.id FROM c WHERE c.user = @u", parameters=[
        {"name": "@u", "value": "ana"}], partition_key="ana"))
    assert sorted(ids) == ["c0", "c2", "c4", "c6"]
    count = list(container.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True))
    assert count == [7]
    # Paging with continuations: pages of 2.
    pages = list(container.query_items("SELECT * FROM c", enable_cross_partition_query=True,
                                       max_item_count=2).by_page())
    page_items = [list(page) for page in pages]
    assert len(page_items) >= 4 and all(len(p) <= 2 for p in page_items)
    assert sorted(i["id"] for p in page_items for i in p) == [f"c{n}" for n in range(7)]

    # Read feed, whole container and one partition, paged.
    assert sorted(i["id"] for i in container.read_all_items(max_item_count=3)) == [f"c{n}" for n in range(7)]

    # Upsert: replaces (200) or creates (201).
    assert container.upsert_item({"id": "c0", "user": "ana", "n": 10})["n"] == 10
    assert container.upsert_item({"id": "new", "user": "ana", "n": 11})["n"] == 11
    assert container.read_item("c0", partition_key="ana")["n"] == 10

    # Patch.
    patched = container.patch_item("c1", partition_key="bo", patch_operations=[
        {"op": "set", "path": "/color", "value": "red"}, {"op": "incr", "path": "/n", "value": 5}])
    assert patched["color"] == "red" and patched["n"] == 6

    # Replace with if-match: the current etag wins, a stale one gets 412.
    current = container.read_item("c1", partition_key="bo")
    stale_etag = current["_etag"]
    current["n"] = 100
    replaced = container.replace_item("c1", current, etag=stale_etag, match_condition=MatchConditions.IfNotModified)
    assert replaced["n"] == 100 and replaced["_etag"] != stale_etag
    try:
        container.replace_item("c1", current, etag=stale_etag, match_condition=MatchConditions.IfNotModified)
        raise AssertionError("a replace with a stale etag must fail")
    except exceptions.CosmosAccessConditionFailedError as error:
        assert error.status_code == 412

    # Delete: 204, then 404.
    container.delete_item("c1", partition_key="bo")
    try:
        container.read_item("c1", partition_key="bo")
        raise AssertionError("a deleted item must be gone")
    except exceptions.CosmosResourceNotFoundError as error:
        assert error.status_code == 404

    # Replace the container definition (how the SDKs change defaultTtl).
    database.replace_container(container, partition_key=PartitionKey(path="/user"), default_ttl=7200)
    assert container.read()["defaultTtl"] == 7200

    database.delete_container("carts")
    assert status_of(lambda: container.read()) == 404
    client.delete_database(name)
    assert status_of(lambda: database.read()) == 404


def test_unsupported_features_answer_clearly(cluster):
    client = cluster.client(1)
    database = client.create_database_if_not_exists(id=unique("unsupported"))
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"))
    try:
        container.scripts.create_stored_procedure({"id": "sp", "body": "function () {}"})
        raise AssertionError("stored procedures must be refused")
    except exceptions.CosmosHttpResponseError as error:
        assert error.status_code == 501
        assert "stored procedures" in error.message
