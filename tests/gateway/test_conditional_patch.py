"""Conditional patch (the SDKs' filter_predicate) through the official Python SDK, sent to a follower: the leader
decides the condition over the item as a read shows it and pins the patch to that version; 412 when it is false
(nothing changes), 400 when it is not "from c where ...", 404 for a missing item."""
from azure.cosmos import PartitionKey

from conftest import status_of, unique


def test_conditional_patch(cluster):
    client = cluster.client(3)
    database = client.create_database_if_not_exists(id=unique("condpatch"))
    container = database.create_container(id="tasks", partition_key=PartitionKey(path="/pk"))
    container.create_item({"id": "t1", "pk": "a", "taskNum": 3, "done": False})
    done = [{"op": "set", "path": "/done", "value": True}]

    patched = container.patch_item("t1", partition_key="a", patch_operations=done,
                                   filter_predicate="from c where c.taskNum = 3")
    assert patched["done"] is True

    before = container.read_item("t1", partition_key="a")
    bump = [{"op": "incr", "path": "/taskNum", "value": 1}]
    assert status_of(lambda: container.patch_item("t1", partition_key="a", patch_operations=bump,
                                                  filter_predicate="FROM c WHERE c.taskNum > 5")) == 412
    # An undefined property is not true either.
    assert status_of(lambda: container.patch_item("t1", partition_key="a", patch_operations=bump,
                                                  filter_predicate="from c where c.missing = 1")) == 412
    after = container.read_item("t1", partition_key="a")
    assert after["_etag"] == before["_etag"] and after["taskNum"] == 3

    # System properties are part of the item the condition sees.
    patched = container.patch_item("t1", partition_key="a", patch_operations=bump,
                                   filter_predicate=f"from c where c._etag = '{after['_etag']}' and c.done")
    assert patched["taskNum"] == 4

    assert status_of(lambda: container.patch_item("t1", partition_key="a", patch_operations=bump,
                                                  filter_predicate="where c.taskNum = 4")) == 400
    assert status_of(lambda: container.patch_item("t1", partition_key="a", patch_operations=bump,
                                                  filter_predicate="from c where c.taskNum =")) == 400
    assert status_of(lambda: container.patch_item("t1", partition_key="a", patch_operations=bump,
                                                  filter_predicate="from c where c.taskNum = 4 order by c.id")) == 400
    assert status_of(lambda: container.patch_item("nope", partition_key="a", patch_operations=bump,
                                                  filter_predicate="from c where true")) == 404
    assert container.read_item("t1", partition_key="a")["taskNum"] == 4
