"""The change feed through the gateway with the official SDK's query_items_change_feed (issue #15;
docs/changefeed.md): latest version from the beginning in write order with paging, the continuation (the response etag)
resuming with no duplicates, start "Now" and a start time, all versions and deletes with previous images and a TTL
expiration at its logical position, the read-only key, and the refusals (400 naming the header, 410 before the feed,
501).

Every container has the latest-version feed, as in Cosmos (read from its `_ts` index). All versions and deletes is
Mayfly's change feed, off by default (it costs a copy of every write): most tests turn it on with the mayfly CLI
(`mayfly container set DB C --change-feed on`), as docs/changefeed.md tells users to."""
import base64
import datetime
import json
import time

import pytest
from azure.cosmos import PartitionKey, exceptions

from conftest import unique, wait_until


def feed_container(cluster, default_ttl=None):
    """A new container (partition key /pk) whose change feed the CLI turned on; returns (database name, container)."""
    name = unique("feed")
    database = cluster.client(1).create_database_if_not_exists(name)
    options = {} if default_ttl is None else {"default_ttl": default_ttl}
    container = database.create_container(id="events", partition_key=PartitionKey(path="/pk"), **options)
    cluster.cli("container", "set", name, "events", "--change-feed", "on")
    return name, container


def read_feed(container, **kwargs):
    """Every change query_items_change_feed yields (it stops at the first empty page, 304 when caught up), and the
    continuation the SDK left in the last response's etag header."""
    changes = list(container.query_items_change_feed(**kwargs))
    return changes, container.client_connection.last_response_headers["etag"]


def ids(changes):
    return [change["id"] for change in changes]


def test_latest_version_from_the_beginning_pages_and_resumes_without_duplicates(cluster):
    _, container = feed_container(cluster)
    container.create_item({"id": "a", "pk": "p1", "v": 1})
    container.create_item({"id": "b", "pk": "p2", "v": 1})
    container.create_item({"id": "c", "pk": "p1", "v": 1})
    container.replace_item("a", {"id": "a", "pk": "p1", "v": 2})
    container.upsert_item({"id": "b", "pk": "p2", "v": 2})   # an upsert over an item: a replace
    container.upsert_item({"id": "d", "pk": "p3", "v": 1})   # an upsert of a new item: a create
    container.delete_item("c", partition_key="p1")

    # Latest version: each live item once, at its last write, in write order; c is deleted, a and b show v2. Pages of
    # two: the SDK follows the etag from page to page until the 304.
    pages = [list(page) for page in
             container.query_items_change_feed(start_time="Beginning", max_item_count=2).by_page()]
    page_ids = [ids(page) for page in pages]
    assert page_ids == [["a", "b"], ["d"]], page_ids
    changes = [change for page in pages for change in page]
    assert [change["v"] for change in changes] == [2, 2, 1]
    token = container.client_connection.last_response_headers["etag"]
    # The documents look like the gateway's item reads: the same system properties, plus the change's _lsn.
    read = container.read_item("a", partition_key="p1")
    for key in ("_rid", "_ts", "_etag", "_self"):
        assert changes[0][key] == read[key], (key, changes[0], read)
    assert all(isinstance(change["_lsn"], int) for change in changes)
    assert changes[0]["_lsn"] < changes[1]["_lsn"] < changes[2]["_lsn"]

    # Caught up: the continuation reads nothing (304), and again nothing — no duplicates.
    assert read_feed(container, continuation=token)[0] == []
    # A new write and a replace after the continuation: exactly those, once.
    container.create_item({"id": "e", "pk": "p1", "v": 1})
    container.replace_item("d", {"id": "d", "pk": "p3", "v": 2})
    later, token2 = read_feed(container, continuation=token)
    assert [(change["id"], change["v"]) for change in later] == [("e", 1), ("d", 2)]
    assert read_feed(container, continuation=token2)[0] == []
    # The container's one feed range (read_feed_ranges) is the whole feed.
    (whole,) = list(container.read_feed_ranges())
    assert ids(read_feed(container, feed_range=whole, start_time="Beginning")[0]) == ["a", "b", "e", "d"]
    # The token is the SDK's own (base64 JSON) with Mayfly's continuation as the etag it sends in If-None-Match.
    state = json.loads(base64.b64decode(token2))
    assert state["mode"] == "LatestVersion", state
    etag = state["continuation"]["continuation"][0]["token"]
    assert etag.startswith('"') and etag.endswith('"') and len(etag) > 2, etag


def test_latest_version_without_turning_the_feed_on(cluster):
    """A plain container (feed off) serves the latest-version feed as Cosmos does: every live item once at its last
    write, pages and etags, one partition key, "Now", and a continuation that keeps its place when the feed is turned
    on between reads."""
    name = unique("plainfeed")
    database = cluster.client(1).create_database_if_not_exists(name)
    container = database.create_container(id="plain", partition_key=PartitionKey(path="/pk"), default_ttl=-1)
    container.create_item({"id": "a", "pk": "p1", "v": 1})
    container.create_item({"id": "b", "pk": "p2", "v": 1})
    container.create_item({"id": "c", "pk": "p1", "v": 1})
    container.create_item({"id": "gone", "pk": "p1", "ttl": 1})
    container.replace_item("a", {"id": "a", "pk": "p1", "v": 2})
    container.delete_item("c", partition_key="p1")
    wait_until(lambda: ids(read_feed(container, start_time="Beginning")[0]) == ["b", "a"], 10,
               what="the ttl 1 item to expire out of the feed")
    pages = [list(page) for page in
             container.query_items_change_feed(start_time="Beginning", max_item_count=1).by_page()]
    assert [ids(page) for page in pages if page] == [["b"], ["a"]]
    assert pages[1][0]["v"] == 2 and isinstance(pages[1][0]["_lsn"], int)
    token = container.client_connection.last_response_headers["etag"]
    assert ids(read_feed(container, partition_key="p1", start_time="Beginning")[0]) == ["a"]
    assert read_feed(container, start_time="Now")[0] == []
    # The feed turned on between reads: the latest-version continuation goes on in write order.
    cluster.cli("container", "set", name, "plain", "--change-feed", "on")
    container.upsert_item({"id": "b", "pk": "p2", "v": 2})
    container.create_item({"id": "d", "pk": "p3"})
    assert [(change["id"], change.get("v")) for change in read_feed(container, continuation=token)[0]] == \
        [("b", 2), ("d", None)]


def test_from_now_and_from_a_start_time(cluster):
    _, container = feed_container(cluster)
    # A whole second after the feed was turned on (a start before that is 410: the feed did not record then).
    feed_on = int(time.time()) + 1
    wait_until(lambda: time.time() > feed_on + 0.05, 5, what="the clock to pass a whole second")
    before = container.create_item({"id": "before", "pk": "p"})
    # From now (If-None-Match: *): nothing yet, and the continuation then yields only later writes.
    assert read_feed(container, start_time="Now")[0] == []
    token = container.client_connection.last_response_headers["etag"]
    # A start time (If-Modified-Since, whole seconds) after `before` was written: wait until the clock passed it.
    start = before["_ts"] + 1
    wait_until(lambda: time.time() > start + 0.2, 5, what="the clock to pass the start time")
    after = container.create_item({"id": "after", "pk": "p"})
    assert after["_ts"] >= start
    assert ids(read_feed(container, continuation=token)[0]) == ["after"]
    since = datetime.datetime.fromtimestamp(start, tz=datetime.timezone.utc)
    assert ids(read_feed(container, start_time=since)[0]) == ["after"]
    # A start time before `before` (but after the feed was on): both.
    earlier = datetime.datetime.fromtimestamp(feed_on, tz=datetime.timezone.utc)
    assert ids(read_feed(container, start_time=earlier)[0]) == ["before", "after"]


def test_all_versions_and_deletes_with_previous_images_and_a_ttl_expiration(cluster):
    _, container = feed_container(cluster, default_ttl=-1)  # TTL on without a default: the item's own ttl counts
    changes, token = read_feed(container, start_time="Now", mode="AllVersionsAndDeletes")
    assert changes == []
    container.create_item({"id": "a", "pk": "p", "v": 1})
    container.replace_item("a", {"id": "a", "pk": "p", "v": 2})
    container.delete_item("a", partition_key="p")
    container.create_item({"id": "short", "pk": "q", "ttl": 1})
    wait_until(lambda: status_of_read(container, "short", "q") == 404, 20, what="'short' to expire")

    # The expiration is a change at its logical position once the replicated time passed it: poll the continuation.
    seen = []

    def five_changes():
        nonlocal token
        page, token = read_feed(container, continuation=token)
        seen.extend(page)
        return len(seen) >= 5

    wait_until(five_changes, 30, poll_s=0.2, what="the five changes (the last the expiration)")
    assert len(seen) == 5, seen
    metadata = [change["metadata"] for change in seen]
    assert [m["operationType"] for m in metadata] == ["create", "replace", "delete", "create", "delete"], metadata
    assert [m.get("timeToLiveExpired", False) for m in metadata] == [False, False, False, False, True], metadata
    lsns = [m["lsn"] for m in metadata]
    assert lsns == sorted(lsns) and len(set(lsns)) == 5, lsns
    create, replace, delete, short_create, expiry = seen
    assert create["current"]["v"] == 1 and "previous" not in create
    assert replace["current"]["v"] == 2 and replace["previous"]["v"] == 1
    # A delete: an empty current image, the previous one, and the id and partition key in the metadata (as Cosmos).
    assert delete["current"] == {} and delete["previous"]["v"] == 2
    assert delete["metadata"]["id"] == "a" and delete["metadata"]["partitionKey"] == {"pk": "p"}
    assert short_create["current"]["id"] == "short"
    assert expiry["previous"]["id"] == "short" and expiry["metadata"]["partitionKey"] == {"pk": "q"}
    # Caught up: nothing more.
    assert read_feed(container, continuation=token)[0] == []


def status_of_read(container, item_id, pk):
    try:
        container.read_item(item_id, partition_key=pk)
        return 200
    except exceptions.CosmosHttpResponseError as error:
        return error.status_code


def test_read_only_key_reads_the_change_feed(cluster):
    name, container = feed_container(cluster)
    container.create_item({"id": "x", "pk": "p", "v": 1})
    reader = cluster.client(2, role="readonly").get_database_client(name).get_container_client("events")
    # Through node 2, which may apply the write a moment later (this client has no session token from it).
    changes = wait_until(lambda: read_feed(reader, start_time="Beginning")[0], 10, what="the feed through node 2")
    assert [(change["id"], change["v"]) for change in changes] == [("x", 1)]
    # ...but still cannot write.
    with pytest.raises(exceptions.CosmosHttpResponseError) as error:
        reader.create_item({"id": "y", "pk": "p"})
    assert error.value.status_code in (401, 403), error.value


def test_one_partition_keys_feed_and_a_feed_range(cluster):
    """query_items_change_feed(partition_key=...) and (feed_range=...) send the key's hash range in x-ms-start-epk /
    x-ms-end-epk: only that partition key's changes come back (it was a 400), in both modes, resuming by etag."""
    _, container = feed_container(cluster)
    for n in range(4):
        container.create_item({"id": f"a{n}", "pk": "p", "v": n})
        container.create_item({"id": f"b{n}", "pk": "q", "v": n})
    container.create_item({"id": "n", "pk": 7, "v": 0})
    container.delete_item("a0", partition_key="p")
    changes, token = read_feed(container, start_time="Beginning", partition_key="p")
    assert ids(changes) == ["a1", "a2", "a3"], ids(changes)
    changes, _ = read_feed(container, start_time="Beginning", partition_key=7)
    assert ids(changes) == ["n"], ids(changes)
    changes, _ = read_feed(container, start_time="Beginning",
                           feed_range=container.feed_range_from_partition_key("q"), max_item_count=2)
    assert ids(changes) == ["b0", "b1", "b2", "b3"], ids(changes)
    # All versions and deletes of "p": the creates, then the delete of a0.
    everything = list(container.query_items_change_feed(mode="AllVersionsAndDeletes", start_time="Now",
                                                          partition_key="p"))
    assert everything == []
    continuation = container.client_connection.last_response_headers["etag"]
    container.upsert_item({"id": "a1", "pk": "p", "v": 10})
    container.upsert_item({"id": "b1", "pk": "q", "v": 10})
    container.delete_item("a2", partition_key="p")
    later = list(container.query_items_change_feed(mode="AllVersionsAndDeletes", continuation=continuation))
    assert [(c["metadata"]["operationType"], (c["current"] or c["previous"]).get("id")) for c in later] == [
        ("replace", "a1"), ("delete", "a2")], later
    # The whole container's feed still has everything.
    changes, _ = read_feed(container, start_time="Beginning")
    assert sorted(ids(changes)) == sorted(["a1", "a3", "b0", "b1", "b2", "b3", "n"]), ids(changes)
    del token


def refusal(call):
    try:
        list(call())
    except exceptions.CosmosHttpResponseError as error:
        return error.status_code, error.message
    raise AssertionError("expected a CosmosHttpResponseError")


def test_refusals_name_what_is_wrong(cluster):
    name, container = feed_container(cluster)
    container.create_item({"id": "x", "pk": "p"})
    # A start before the feed was turned on: 410 Gone with the reason.
    long_ago = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    status, message = refusal(lambda: container.query_items_change_feed(start_time=long_ago))
    assert status == 410 and "turned on after the time asked for" in message, message
    # All versions and deletes on a container whose feed is off: 400 from the node, naming the feed.
    plain = cluster.client(1).get_database_client(name).create_container(id="plain", partition_key=PartitionKey("/pk"))
    status, message = refusal(lambda: plain.query_items_change_feed(start_time="Now", mode="AllVersionsAndDeletes"))
    assert status == 400 and "change feed" in message and "is off" in message, message
    # Headers the SDK's change feed would not send: a client whose every request carries them (default_headers; the
    # SDK ignores initial_headers on reads), reading the container's items, which is a GET .../docs with them.
    def raw_feed(headers):
        client = cluster.client(1)
        items = client.get_database_client(name).get_container_client("events")
        items.read()  # the container's metadata first, without the headers
        client.client_connection.default_headers.update(headers)
        return refusal(lambda: items.read_all_items())

    status, message = raw_feed({"A-IM": "Incremental feed", "If-None-Match": "\"not-a-token\""})
    assert status == 400 and "If-None-Match" in message, message
    status, message = raw_feed({"A-IM": "Incremental feed", "If-None-Match": "\"0123abcd\""})  # hex, not a token
    assert status == 400 and "continuation" in message, message
    other_token = read_feed(feed_container(cluster)[1], start_time="Now")[1]  # another container's continuation
    other_etag = json.loads(base64.b64decode(other_token))["continuation"]["continuation"][0]["token"]
    status, message = raw_feed({"A-IM": "Incremental feed", "If-None-Match": other_etag})
    assert status == 400 and "container" in message, message
    status, message = raw_feed({"A-IM": "Incremental feed", "If-Modified-Since": "yesterday"})
    assert status == 400 and "If-Modified-Since" in message, message
    status, message = raw_feed({"A-IM": "Incremental feed", "x-ms-max-item-count": "many"})
    assert status == 400 and "x-ms-max-item-count" in message, message
    status, message = raw_feed({"A-IM": "everything"})
    assert status == 400 and "A-IM" in message, message
    status, message = raw_feed({"A-IM": "Incremental feed", "x-ms-documentdb-partitionkeyrangeid": "7"})
    assert status == 400 and "x-ms-documentdb-partitionkeyrangeid" in message, message
    # All versions in a wire format Mayfly does not render: 501 naming the header.
    status, message = raw_feed({"A-IM": "Full-Fidelity Feed", "x-ms-cosmos-changefeed-wire-format-version": "2018-01-01"})
    assert status == 501 and "x-ms-cosmos-changefeed-wire-format-version" in message, message
    # The cluster still serves the feed afterwards.
    assert ids(read_feed(container, start_time="Beginning")[0]) == ["x"]
