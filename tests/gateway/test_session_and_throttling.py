"""Session consistency through the SDK (read your writes on any node's gateway), and 429 with x-ms-retry-after-ms
honoured by the SDK's own retry policy."""
import time

from azure.cosmos import PartitionKey, documents, exceptions

from conftest import unique


def test_read_your_writes_on_every_gateway(cluster):
    name = unique("session")
    clients = [cluster.client(node) for node in range(1, cluster.nodes + 1)]
    containers = [c.get_database_client(name).get_container_client("c") for c in clients]
    clients[0].create_database_if_not_exists(name).create_container(id="c", partition_key=PartitionKey(path="/pk"))
    for i in range(60):
        writer = i % cluster.nodes
        reader = (i + 1) % cluster.nodes
        containers[writer].upsert_item({"id": "counter", "pk": "p", "n": i})
        # The same client reads its write at once through its gateway (a follower waits for the token) ...
        assert containers[writer].read_item("counter", partition_key="p")["n"] == i
        # ... and another client given that session token sees it through another node.
        token = clients[writer].client_connection.last_response_headers["x-ms-session-token"]
        assert containers[reader].read_item("counter", partition_key="p", session_token=token)["n"] == i


def test_throttled_requests_get_429_and_the_sdk_retries(cluster):
    database = cluster.client(1).create_database_if_not_exists(unique("throttle"))
    database.create_container(id="slow", partition_key=PartitionKey(path="/pk"), offer_throughput=20)
    # A client that does not retry sees the 429 and its retry-after.
    policy = documents.ConnectionPolicy()
    policy.RetryOptions = documents.RetryOptions(max_retry_attempt_count=0)
    impatient = cluster.client(1, connection_policy=policy).get_database_client(database.id).get_container_client("slow")
    body = "x" * 2000
    throttled = None
    for i in range(200):
        try:
            impatient.create_item({"id": f"i{i}", "pk": "p", "body": body})
        except exceptions.CosmosHttpResponseError as error:
            assert error.status_code == 429, error
            throttled = error
            break
    assert throttled is not None, "20 RU/s must run out within 200 writes"
    assert int(throttled.headers["x-ms-retry-after-ms"]) > 0
    assert "request rate is large" in throttled.message
    # The default client retries after the time the node asked for (x-ms-retry-after-ms), and every write lands.
    # Every HTTP attempt is seen by azure-core's raw_response_hook: 429s followed by the write's 201.
    attempts = []

    def seen(pipeline_response):
        response = pipeline_response.http_response
        attempts.append((response.status_code, response.headers.get("x-ms-retry-after-ms"), time.monotonic()))

    client = cluster.client(1, raw_response_hook=seen)
    patient = client.get_database_client(database.id).get_container_client("slow")
    for i in range(12):
        patient.create_item({"id": f"p{i}", "pk": "p", "body": body})
    throttles = [i for i, a in enumerate(attempts) if a[0] == 429]
    assert throttles, "the patient client must have met 429s too"
    for i in throttles:
        status, retry_after, at = attempts[i]
        assert int(retry_after) > 0
        # The SDK waited at least what the node asked before it sent the write again. The hook also sees the SDK's
        # own metadata calls (a 200 or 304 of an account, container or partition-key-range read, which may come at
        # once): the write's next attempt is the next 201 or 429.
        retry = next(a for a in attempts[i + 1:] if a[0] in (201, 429))
        assert retry[2] - at >= int(retry_after) / 1000 * 0.9, (attempts[i], retry)
    assert sum(1 for a in attempts if a[0] == 201) == 12
    ids = set(patient.query_items("SELECT VALUE c.id FROM c", partition_key="p"))
    assert {f"p{i}" for i in range(12)} <= ids
