"""A write loop through one follower's gateway while the leader is killed (SIGKILL): every write is acknowledged
(the application retries a 503, as Cosmos applications do; upserts are idempotent), none is lost, and the gateway
never hangs. Runs on a cluster of its own, since it kills a node."""
import signal
import time

from azure.cosmos import PartitionKey, exceptions

from conftest import Cluster, wait_until


def test_write_loop_through_a_follower_while_the_leader_is_killed():
    cluster = Cluster()
    try:
        cluster.wait_ready()
        served_by = []
        client = cluster.client(1, raw_response_hook=lambda r: served_by.append(
            r.http_response.headers.get("x-ms-mayfly-served-by")))
        database = client.create_database_if_not_exists("failover")
        database.create_container(id="c", partition_key=PartitionKey(path="/pk"))
        container = database.get_container_client("c")
        container.upsert_item({"id": "probe", "pk": "p"})
        leader = int(served_by[-1])  # a write is answered by the leader (forwarded there by a follower)
        follower = next(n for n in range(1, cluster.nodes + 1) if n != leader)
        writer = cluster.client(follower).get_database_client("failover").get_container_client("c")
        acknowledged, retried_503 = [], 0
        deadline = time.monotonic() + 90
        for i in range(120):
            if i == 30:
                cluster.procs[leader - 1].send_signal(signal.SIGKILL)
                cluster.procs[leader - 1].wait(timeout=10)
            while True:
                assert time.monotonic() < deadline, f"write {i} not acknowledged in time"
                try:
                    writer.upsert_item({"id": f"k{i}", "pk": "p", "n": i})
                    acknowledged.append(i)
                    break
                except exceptions.CosmosHttpResponseError as error:
                    assert error.status_code in (503, 408), error  # no leader yet / outcome unknown: retry
                    retried_503 += 1
                    time.sleep(0.05)
        assert acknowledged == list(range(120))
        # Every acknowledged write is there, read through the follower's gateway at strong consistency.
        strong = cluster.client(follower, consistency_level="Strong")
        ids = wait_until(lambda: {item["id"] for item in strong.get_database_client("failover").get_container_client(
            "c").read_all_items()}, 30, what="the items after the failover")
        assert {f"k{i}" for i in range(120)} <= ids
        print(f"leader {leader} killed after 30 writes; {retried_503} attempts answered 503 and retried")
    except Exception:
        cluster.failed = True
        raise
    finally:
        cluster.stop()
