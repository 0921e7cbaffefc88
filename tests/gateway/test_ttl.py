"""The TTL contract (docs/ttl.md) through the official SDK: validation errors with Cosmos's messages,
inheritance, the item's own ttl, -1, 404 after expiry through every node's gateway, expired items absent from
queries and COUNT, and no resurrection once defaultTtl is removed."""
from azure.cosmos import PartitionKey, exceptions

from conftest import unique, wait_until

TTL_MESSAGE = ("is invalid. Ensure to provide a nonzero positive integer less than or equal to '2147483647', "
               "or '-1' which means never expire.")


def bad_request(call):
    try:
        call()
    except exceptions.CosmosHttpResponseError as error:
        assert error.status_code == 400, error
        return error.message
    raise AssertionError("expected 400")


def gone(container, item_id, pk):
    try:
        container.read_item(item_id, partition_key=pk)
        return False
    except exceptions.CosmosResourceNotFoundError:
        return True


def test_validation_errors_are_400_with_the_cosmos_message(cluster):
    database = cluster.client(1).create_database_if_not_exists(unique("ttl-validation"))
    for bad in (0, -2, 2147483648, 1.5):
        message = bad_request(lambda: database.create_container(
            id=unique("c"), partition_key=PartitionKey(path="/pk"), default_ttl=bad))
        assert "The input defaultTtl '" in message, message
        assert "is invalid. Ensure to provide a nonzero positive integer less than or equal to '2147483647'" in message
    container = database.create_container(id="items", partition_key=PartitionKey(path="/pk"))
    for bad in (0, -5, "5", True, None, 1.5):
        message = bad_request(lambda: container.create_item({"id": "x", "pk": "p", "ttl": bad}))
        assert "The input ttl" in message and TTL_MESSAGE in message, message
    # Nothing was written.
    assert list(container.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True)) == [0]
    # defaultTtl with indexing none.
    message = bad_request(lambda: database.create_container(
        id=unique("c"), partition_key=PartitionKey(path="/pk"), default_ttl=10,
        indexing_policy={"indexingMode": "none", "automatic": False}))
    assert "Indexing mode value cannot be 'none' when 'defaultTtl' is specified" in message


def test_expiry_inheritance_override_and_every_gateway(cluster):
    writer = cluster.client(1)
    name = unique("ttl")
    database = writer.create_database_if_not_exists(name)
    container = database.create_container(id="sessions", partition_key=PartitionKey(path="/pk"), default_ttl=2)
    container.create_item({"id": "inherits", "pk": "p"})            # expires 2 s after _ts
    container.create_item({"id": "short", "pk": "p", "ttl": 1})     # the item's own ttl wins
    container.create_item({"id": "forever", "pk": "p", "ttl": -1})  # never
    container.create_item({"id": "long", "pk": "q", "ttl": 3600})
    assert container.read_item("forever", partition_key="p")["ttl"] == -1  # stored as written
    assert "ttl" not in container.read_item("inherits", partition_key="p")  # the default is not copied in

    wait_until(lambda: gone(container, "short", "p"), 15, what="'short' to expire")
    wait_until(lambda: gone(container, "inherits", "p"), 15, what="'inherits' to expire")
    for node in range(1, cluster.nodes + 1):
        c = cluster.client(node).get_database_client(name).get_container_client("sessions")
        for consistency_client in (c,):
            assert gone(consistency_client, "short", "p"), node
            assert gone(consistency_client, "inherits", "p"), node
            assert consistency_client.read_item("forever", partition_key="p")["id"] == "forever"
            assert consistency_client.read_item("long", partition_key="q")["id"] == "long"
        ids = sorted(i["id"] for i in c.query_items("SELECT * FROM c", enable_cross_partition_query=True))
        assert ids == ["forever", "long"], (node, ids)
        assert list(c.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True)) == [2], node
        assert sorted(i["id"] for i in c.read_all_items()) == ["forever", "long"], node

    # An expired item's id can be created again: a fresh item.
    assert container.create_item({"id": "short", "pk": "p", "ttl": -1})["ttl"] == -1

    # Removing defaultTtl (PUT without it) turns TTL off, and brings nothing back.
    database.replace_container(container, partition_key=PartitionKey(path="/pk"))
    assert "defaultTtl" not in container.read()
    for node in range(1, cluster.nodes + 1):
        c = cluster.client(node).get_database_client(name).get_container_client("sessions")
        assert gone(c, "inherits", "p"), node
        assert list(c.query_items("SELECT VALUE COUNT(1) FROM c", enable_cross_partition_query=True)) == [3], node


def test_container_default_minus_one(cluster):
    database = cluster.client(3).create_database_if_not_exists(unique("ttl-minus-one"))
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"), default_ttl=-1)
    assert container.read()["defaultTtl"] == -1
    container.create_item({"id": "kept", "pk": "p"})
    container.create_item({"id": "dies", "pk": "p", "ttl": 1})
    wait_until(lambda: gone(container, "dies", "p"), 15, what="'dies' to expire")
    assert container.read_item("kept", partition_key="p")["id"] == "kept"
    assert list(container.query_items("SELECT VALUE COUNT(1) FROM c", partition_key="p")) == [1]


def test_a_default_ttl_cut_that_expires_most_items_needs_the_force_header(cluster):
    """Mayfly's guard through the SDK: 412 with the figures, nothing changed; with x-mayfly-force-ttl-change the
    change applies and the items are gone at once. The items expose _expiresAt (_ts + effective ttl)."""
    import time
    name = unique("ttl-guard")
    database = cluster.client(1).create_database_if_not_exists(name)
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"), default_ttl=3600)
    written = [container.create_item({"id": f"i{n}", "pk": "p"}) for n in range(10)]
    assert all(item["_expiresAt"] == item["_ts"] + 3600 for item in written)
    newest = max(item["_ts"] for item in written)
    # A cut to 1 s expires every item at once as soon as replicated time is past newest + 1 (a later write moves it).
    wait_until(lambda: time.time() >= newest + 2, 10, what="two seconds past the last write")
    container.upsert_item({"id": "clock", "pk": "other", "ttl": -1})
    try:
        database.replace_container(container, partition_key=PartitionKey(path="/pk"), default_ttl=1)
        raise AssertionError("expected 412")
    except exceptions.CosmosAccessConditionFailedError as error:
        assert "force" in error.message, error.message
    assert container.read()["defaultTtl"] == 3600
    assert container.read_item("i0", partition_key="p")["_expiresAt"] == written[0]["_ts"] + 3600
    database.replace_container(container, partition_key=PartitionKey(path="/pk"), default_ttl=1,
                               headers={"x-mayfly-force-ttl-change": "true"})
    assert container.read()["defaultTtl"] == 1
    for node in range(1, cluster.nodes + 1):
        c = cluster.client(node).get_database_client(name).get_container_client("c")
        wait_until(lambda: gone(c, "i0", "p"), 15, what=f"i0 to be gone on node {node}")
        assert list(c.query_items("SELECT VALUE COUNT(1) FROM c", partition_key="p")) == [0], node
