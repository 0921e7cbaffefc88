"""Legal holds (docs/retention.md, "Legal holds") through the Cosmos gateway's Mayfly resource
/dbs/{db}/colls/{c}/holds, signed like any Cosmos request (resource type "holds", the container's link): a compliance key sets a hold on one
item, the official SDK's delete and replace of that item are refused (409 naming the hold) while the other items are
not, a readwrite key may not set or list holds, the hold is listed and released (DELETE .../holds/{id}), and the
item may be deleted again."""
import base64
import email.utils
import hashlib
import hmac
import json
import urllib.error
import urllib.parse
import urllib.request

from azure.cosmos import PartitionKey

from conftest import status_of, unique


def signed(cluster, method, path, resource_type, resource_link, role, body=None, headers=None):
    """A request signed by hand with the key of `role`, as the SDKs sign (shared/spec/cosmos-rest.md)."""
    date = email.utils.formatdate(usegmt=True)
    text = f"{method.lower()}\n{resource_type}\n{resource_link}\n{date.lower()}\n\n"
    signature = base64.b64encode(hmac.new(cluster.keys[role].encode(), text.encode(), hashlib.sha256).digest()).decode()
    all_headers = {"x-ms-date": date, "x-ms-version": "2020-07-15", "content-type": "application/json",
                   "authorization": urllib.parse.quote(f"type=master&ver=1.0&sig={signature}", safe="")}
    all_headers.update(headers or {})
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(cluster.url(1) + "/" + path, data=data, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def test_a_compliance_key_holds_an_item_against_the_sdk_until_it_releases_it(cluster):
    name = unique("holds")
    database = cluster.client(1).create_database(id=name)
    container = database.create_container(id="c", partition_key=PartitionKey(path="/pk"), default_ttl=3600)
    container.create_item({"id": "kept", "pk": "p"})
    container.create_item({"id": "other", "pk": "p"})
    holds = f"dbs/{name}/colls/c/holds"
    link = f"dbs/{name}/colls/c"  # a feed is signed with its parent's link, like .../docs
    hold = {"id": "case-17", "reason": "Smith v. Acme", "partitionKey": "p", "itemId": "kept"}
    # A readwrite key may neither set nor list holds.
    assert signed(cluster, "POST", holds, "holds", link, "readwrite", hold)[0] == 403
    assert signed(cluster, "GET", holds, "holds", link, "readwrite")[0] == 403
    status, body = signed(cluster, "POST", holds, "holds", link, "compliance", hold)
    assert status == 201, body
    assert body["scope"] == "item" and body["setBy"] == "test-compliance" and body["partitionKey"] == "p"
    # Held: the SDK's delete and replace are refused naming the hold; the item beside it is not held.
    assert status_of(lambda: container.delete_item("kept", partition_key="p")) == 409
    assert status_of(lambda: container.replace_item("kept", {"id": "kept", "pk": "p", "v": 2})) == 409
    assert container.read_item("kept", partition_key="p")["_hold"] == ["case-17"]
    container.delete_item("other", partition_key="p")
    # Bad bodies are 400 and set nothing.
    assert signed(cluster, "POST", holds, "holds", link, "compliance", {"id": "x"})[0] == 400
    assert signed(cluster, "POST", holds, "holds", link, "compliance", {"id": "x", "reason": "r", "itemId": "a"})[0] == 400
    status, listed = signed(cluster, "GET", holds, "holds", link, "compliance")
    assert status == 200 and [entry["id"] for entry in listed] == ["case-17"], listed
    # Released: the item may be deleted again.
    release = f"{holds}/case-17"
    status, body = signed(cluster, "DELETE", release, "holds", release, "compliance", headers={"x-mayfly-reason": "settled"})
    assert status == 200 and body["active"] is False and body["releaseReason"] == "settled", body
    # The same signed release again (within its second) is a replay: refused (another release of a hold set again
    # under the same id must not happen by replay); a release of a hold that is not active is 404.
    assert signed(cluster, "DELETE", release, "holds", release, "compliance")[0] in (401, 404)
    missing = f"{holds}/no-such-hold"
    assert signed(cluster, "DELETE", missing, "holds", missing, "compliance")[0] == 404
    container.delete_item("kept", partition_key="p")
