"""Delete by partition key (docs/retention.md) through the official Python SDK's delete_all_items_by_partition_key
(POST .../operations/partitionkeydelete) and the mayfly CLI (`mayfly item delete-partition`): the partition's items
are gone at once on every node — reads, queries, lists and the latest-version change feed — other partitions keep
theirs, a write afterwards is an ordinary create, hierarchical keys work by the whole key, and the refusals (the
read-only key, a container whose change feed is on) change nothing."""
from azure.cosmos import PartitionKey, exceptions

from conftest import status_of, unique, wait_until


def ids(items):
    return sorted(item["id"] for item in items)


def test_delete_all_items_by_partition_key_is_immediate_on_every_node(cluster):
    name = unique("pkdelete")
    database = cluster.client(1).create_database(id=name)
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"), default_ttl=-1)
    for i in range(5):
        container.create_item({"id": f"a{i}", "pk": "gone"})
    container.create_item({"id": "b", "pk": "kept"})
    container.delete_all_items_by_partition_key("gone")
    # Read your write on node 1 with the SDK's session token; on every node once they have applied it.
    assert status_of(lambda: container.read_item("a0", partition_key="gone")) == 404
    for node in (1, 2, 3):
        other = cluster.client(node).get_database_client(name).get_container_client("c")
        wait_until(lambda: ids(other.read_all_items()) == ["b"], 10, what=f"node {node} to apply the delete")
        assert ids(other.query_items("SELECT * FROM c", enable_cross_partition_query=True)) == ["b"]
        assert ids(other.query_items("SELECT * FROM c", partition_key="gone")) == []
        assert ids(other.query_items_change_feed(start_time="Beginning")) == ["b"]
    # A write afterwards is an ordinary create (the old a0 is not in its way), replace of a deleted one is 404.
    container.create_item({"id": "a0", "pk": "gone", "v": 2})
    assert container.read_item("a0", partition_key="gone")["v"] == 2
    assert status_of(lambda: container.replace_item("a1", {"id": "a1", "pk": "gone"})) == 404
    # The CLI: the same operation by another road.
    cluster.cli("item", "delete-partition", name, "c", "--pk", "kept", role="readwrite")
    assert ids(container.read_all_items()) == ["a0"]
    # The read-only key may not; a container whose change feed is on refuses (400 naming the feed); nothing changes.
    readonly = cluster.client(1, role="readonly").get_database_client(name).get_container_client("c")
    assert status_of(lambda: readonly.delete_all_items_by_partition_key("gone")) == 403
    feed = database.create_container(id="feed", partition_key=PartitionKey(path="/pk"))
    cluster.cli("container", "set", name, "feed", "--change-feed", "on")
    feed.create_item({"id": "x", "pk": "p"})
    assert status_of(lambda: feed.delete_all_items_by_partition_key("p")) == 400
    assert feed.read_item("x", partition_key="p")["id"] == "x"
    assert ids(container.read_all_items()) == ["a0"]


def test_hierarchical_keys_delete_by_the_whole_key(cluster):
    database = cluster.client(1).create_database(id=unique("pkdelete-h"))
    container = database.create_container(
        id="h", partition_key=PartitionKey(path=["/tenant", "/user"], kind="MultiHash"))
    container.create_item({"id": "1", "tenant": "t1", "user": "u1"})
    container.create_item({"id": "2", "tenant": "t1", "user": "u2"})
    container.delete_all_items_by_partition_key(["t1", "u1"])
    assert ids(container.read_all_items()) == ["2"]


def test_conflicts_are_an_empty_feed(cluster):
    """One write region never has conflicts: the SDK's conflict calls answer as Cosmos does for a container without
    any (an empty feed; 404 by id), and a missing container is still 404."""
    database = cluster.client(1).create_database(id=unique("conflicts"))
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"))
    assert list(container.list_conflicts()) == []
    assert list(container.query_conflicts("SELECT * FROM r WHERE r.resourceType = 'document'", partition_key="p")) == []
    for call in (container.get_conflict, container.delete_conflict):
        try:
            call("c1", partition_key="p")
            raise AssertionError("expected a 404")
        except exceptions.CosmosResourceNotFoundError:
            pass
    missing = database.get_container_client("missing")
    assert status_of(lambda: list(missing.list_conflicts())) == 404
