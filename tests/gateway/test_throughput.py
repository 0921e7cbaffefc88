"""Throughput as the official Python SDK manages it: a database created with shared throughput (offer_throughput on
create_database), its containers sharing it unless created with their own, get_throughput / replace_throughput on
both (the SDK queries the offers by the resource's _self and replaces the offer it found), the shared figure
metering every sharing container together (429 when they use it up between them), and the refusals."""
import base64

from azure.cosmos import PartitionKey, documents, exceptions

from conftest import status_of, unique


def test_shared_and_dedicated_throughput_through_offers(cluster):
    client = cluster.client(1)
    name = unique("shared")
    database = client.create_database(id=name, offer_throughput=1000)
    assert database.get_throughput().offer_throughput == 1000
    sharing = database.create_container(id="sharing", partition_key=PartitionKey(path="/pk"))
    own = database.create_container(id="own", partition_key=PartitionKey(path="/pk"), offer_throughput=400)
    assert own.get_throughput().offer_throughput == 400
    # A sharing container has no offer of its own, as in Cosmos DB (the offer list below has none for it; on an
    # empty offer query azure-cosmos 4.17.1 raises its own 404 and then trips over it in its retry policy).
    assert sharing.read()["throughput"] == {"mode": "shared", "requestUnitsPerSecond": 1000}

    assert own.replace_throughput(600).offer_throughput == 600
    assert own.get_throughput().offer_throughput == 600
    assert database.replace_throughput(2000).offer_throughput == 2000
    assert database.get_throughput().offer_throughput == 2000
    # Every node answers the same (the offers are replicated state, and their ids are derived from the links).
    other = cluster.client(3).get_database_client(name)
    assert other.get_throughput().offer_throughput == 2000
    assert other.get_container_client("sharing").read()["throughput"]["requestUnitsPerSecond"] == 2000
    offers = [offer for offer in client.client_connection.ReadOffers() if offer["resource"].startswith(f"dbs/{name}/")]
    assert sorted(offer["resource"] for offer in offers) == [f"dbs/{name}/", f"dbs/{name}/colls/own/"]
    assert client.client_connection.ReadOffer(offers[0]["_self"])["id"] == offers[0]["id"]
    assert {offer["id"] for offer in offers} == {offer_id(f"dbs/{name}"), offer_id(f"dbs/{name}/colls/own")}

    # A database without shared throughput has no offer; it cannot get one by replacing (400 from the node).
    plain_name = unique("plain")
    client.create_database(id=plain_name)
    assert not [offer for offer in client.client_connection.ReadOffers() if offer["resource"] == f"dbs/{plain_name}/"]
    made_up = dict(offers[0], resource=f"dbs/{plain_name}/", id=offer_id(f"dbs/{plain_name}"))
    # An offer id that is not the resource's is refused by the gateway, a database without shared throughput by
    # the node: both 400, nothing changed.
    assert status_of(lambda: client.client_connection.ReplaceOffer(offers[0]["_self"], made_up)) == 400
    assert status_of(lambda: client.client_connection.ReplaceOffer(f"offers/{made_up['id']}/", made_up)) == 400
    assert database.get_throughput().offer_throughput == 2000


def offer_id(link):
    """Mayfly's offer id of a resource link (gateway/translate.h offer_id): base64 of the FNV-1a hash of the link, big
    endian, with '-' for '/'."""
    value = 2166136261
    for byte in link.encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return base64.b64encode(value.to_bytes(4, "big")).decode().replace("/", "-")


def test_sharing_containers_are_throttled_together(cluster):
    name = unique("pool")
    database = cluster.client(2).create_database(id=name, offer_throughput=20)
    database.create_container(id="first", partition_key=PartitionKey(path="/pk"))
    database.create_container(id="second", partition_key=PartitionKey(path="/pk"))
    # A client that does not retry sees the 429s.
    policy = documents.ConnectionPolicy()
    policy.RetryOptions = documents.RetryOptions(max_retry_attempt_count=0)
    impatient = cluster.client(2, connection_policy=policy).get_database_client(name)
    first = impatient.get_container_client("first")
    second = impatient.get_container_client("second")
    body = "x" * 2000
    # The first container alone uses the database's 20 RU/s up; right after its 429 the second, which has used
    # nothing, is throttled too: the budget is the database's, not each container's. (Each round waits for the
    # first's 429; the second's write follows at once, well inside the retry-after, in any but a stalled run.)
    second_throttled = 0
    for round_ in range(5):
        for i in range(200):
            try:
                first.create_item({"id": f"r{round_}-{i}", "pk": "p", "body": body})
            except exceptions.CosmosHttpResponseError as error:
                assert error.status_code == 429, error
                break
        else:
            raise AssertionError("20 RU/s must run out within 200 writes")
        try:
            second.create_item({"id": f"s{round_}", "pk": "p", "body": body})
        except exceptions.CosmosHttpResponseError as error:
            assert error.status_code == 429, error
            assert int(error.headers["x-ms-retry-after-ms"]) > 0
            second_throttled += 1
    assert second_throttled > 0, "the second container never met the used-up shared budget"
