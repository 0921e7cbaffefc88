"""Hierarchical partition keys (kind MultiHash) through the official Python SDK: a container keyed by /tenant and
/user, items written and read by the whole key, a query by the whole key and by a prefix (the SDK sends the prefix's
EPK range), patch and delete, the change feed of a prefix, an item without a value at one path (undefined there),
and clear 400s for keys of the wrong shape."""
from azure.cosmos import PartitionKey

from conftest import status_of, unique


def test_hierarchical_keys_through_the_python_sdk(cluster):
    client = cluster.client(1)
    name = unique("hier")
    database = client.create_database_if_not_exists(id=name)
    container = database.create_container(
        id="c", partition_key=PartitionKey(path=["/tenant", "/user"], kind="MultiHash"))
    cluster.cli("container", "set", name, "c", "--change-feed", "on")  # off by default (docs/changefeed.md)
    properties = container.read()
    assert properties["partitionKey"]["paths"] == ["/tenant", "/user"]
    assert properties["partitionKey"]["kind"] == "MultiHash"

    for tenant in ("t1", "t2"):
        for user in ("u1", "u2"):
            for n in range(2):
                container.create_item({"id": str(n), "tenant": tenant, "user": user, "n": n})
    # The same id under another full key is another item.
    item = container.read_item("1", partition_key=["t2", "u1"])
    assert (item["tenant"], item["user"], item["n"]) == ("t2", "u1", 1)
    assert status_of(lambda: container.create_item({"id": "1", "tenant": "t2", "user": "u1"})) == 409
    assert status_of(lambda: container.read_item("1", partition_key=["t2", "u9"])) == 404
    # A prefix is not an item's key.
    assert status_of(lambda: container.read_item("1", partition_key=["t2"])) == 400
    # No value at /user: the undefined component, as in Cosmos DB; found under its prefix.
    container.create_item({"id": "x", "tenant": "t3"})
    assert [r["id"] for r in container.query_items("SELECT * FROM c", partition_key=["t3"])] == ["x"]

    whole = list(container.query_items("SELECT VALUE c.id FROM c", partition_key=["t1", "u2"]))
    assert sorted(whole) == ["0", "1"]
    prefix = list(container.query_items("SELECT c.tenant, c.user, c.id FROM c", partition_key=["t1"]))
    assert len(prefix) == 4 and {row["tenant"] for row in prefix} == {"t1"}, prefix
    everything = list(container.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True))
    assert everything == [9]

    patched = container.patch_item("0", partition_key=["t1", "u1"],
                                   patch_operations=[{"op": "incr", "path": "/n", "value": 5}])
    assert patched["n"] == 5
    assert status_of(lambda: container.patch_item(
        "0", partition_key=["t1", "u1"], patch_operations=[{"op": "set", "path": "/user", "value": "u7"}])) == 400
    container.upsert_item({"id": "0", "tenant": "t1", "user": "u1", "n": 6})
    assert container.read_item("0", partition_key=["t1", "u1"])["n"] == 6
    container.delete_item("0", partition_key=["t1", "u1"])
    assert status_of(lambda: container.read_item("0", partition_key=["t1", "u1"])) == 404
    assert sorted(r["id"] + r["user"] for r in container.read_all_items() if r["tenant"] == "t1") == \
        ["0u2", "1u1", "1u2"]

    # The change feed of a prefix: every change under tenant t2, none of t1's.
    feed = list(container.query_items_change_feed(start_time="Beginning", partition_key=["t2"]))
    assert len(feed) == 4 and {change["tenant"] for change in feed} == {"t2"}, feed
    feed_range = container.feed_range_from_partition_key(["t2", "u2"])
    ranged = list(container.query_items_change_feed(start_time="Beginning", feed_range=feed_range))
    assert sorted(change["id"] for change in ranged) == ["0", "1"]
