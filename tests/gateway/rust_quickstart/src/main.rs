//! The quickstart of the official Rust Cosmos DB SDK (`azure_data_cosmos` 1.1.0-beta.1) against a Mayfly gateway.
//!
//!   rust_quickstart ENDPOINT KEY DATABASE
//!
//! Creates DATABASE and a container in it (partition key /pk, defaultTtl 3600) through the SDK, then runs the item
//! operations an application uses — create, read, upsert, replace with an ETag precondition (a stale ETag must get
//! 412), queries with parameters, patch (set, incr), an item with its own short ttl that must disappear, a
//! transactional batch (and a failing one that writes nothing), a container with a hierarchical partition key
//! (point read, prefix query), delete — checking every answer, and deletes DATABASE at the end. One line per step on stdout; on any mismatch or
//! unexpected error a line `FAILED: ...` on stderr and exit code 1. tests/gateway/test_rust_sdk.py runs it.

use std::error::Error;
use std::time::{Duration, Instant};

use azure_core::credentials::Secret;
use azure_core::http::Etag;
use azure_data_cosmos::clients::ContainerClient;
use azure_data_cosmos::models::{ContainerProperties, CosmosNumber, PatchInstructions, PatchOperation, TimeToLive};
use azure_data_cosmos::options::{
    BinaryEncodingOptions, ItemWriteOptions, PatchItemOptions, PatchStrategy, Precondition, Region,
};
use azure_data_cosmos::{
    AccountEndpoint, AccountReference, CosmosClient, CosmosError, FeedScope, PartitionKey, Query, RoutingStrategy,
    TransactionalBatch,
};
use futures::TryStreamExt;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

type Res<T> = Result<T, Box<dyn Error>>;

const CONTAINER: &str = "quickstart";
const DEFAULT_TTL_S: u32 = 3600;
const SHORT_TTL_S: i64 = 2;
/// How long the short-ttl item may take to disappear (its ttl plus the cluster's expiry and replication), times
/// $MAYFLY_TEST_TIME_SCALE (4 for a sanitized build's nodes, as in tests/gateway/conftest.py).
fn expiry_bound() -> Duration {
    let scale = std::env::var("MAYFLY_TEST_TIME_SCALE")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(1.0);
    Duration::from_secs_f64(30.0 * scale.max(1.0))
}

/// Fails the run with a message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+).into());
        }
    };
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Item {
    id: String,
    pk: String,
    name: String,
    n: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ttl: Option<i64>,
}

fn item(id: &str, pk: &str, name: &str, n: i64) -> Item {
    Item {
        id: id.into(),
        pk: pk.into(),
        name: name.into(),
        n,
        ttl: None,
    }
}

/// `what` failed with an error the SDK returned: its status and message, with the source chain and diagnostics
/// (`{:?}`; `{:#}` would add a backtrace).
fn sdk_error(what: &str, error: CosmosError) -> Box<dyn Error> {
    format!("{what}: {error:?}").into()
}

/// A call that must succeed.
async fn ok<T>(what: &str, call: impl std::future::Future<Output = azure_data_cosmos::Result<T>>) -> Res<T> {
    call.await.map_err(|e| sdk_error(what, e))
}

/// A call that must fail with `status` (e.g. 412, 404, 409); returns the error for printing.
async fn fails_with<T>(
    what: &str,
    status: u16,
    call: impl std::future::Future<Output = azure_data_cosmos::Result<T>>,
) -> Res<CosmosError> {
    match call.await {
        Ok(_) => Err(format!("{what}: succeeded, expected HTTP {status}").into()),
        Err(e) if u16::from(e.status().status_code()) == status => Ok(e),
        Err(e) => Err(sdk_error(
            &format!("{what}: expected HTTP {status}, got another error"),
            e,
        )),
    }
}

async fn query_all<T: DeserializeOwned + Send + 'static>(
    items: &ContainerClient,
    what: &str,
    query: Query,
    scope: FeedScope,
) -> Res<Vec<T>> {
    let mut rows = Vec::new();
    let mut stream = ok(what, items.query_items::<T>(query, scope, None)).await?;
    while let Some(row) = stream.try_next().await.map_err(|e| sdk_error(what, e))? {
        rows.push(row);
    }
    Ok(rows)
}

fn etag_of(what: &str, etag: Option<&Etag>) -> Res<Etag> {
    etag.cloned()
        .ok_or_else(|| format!("{what}: the response has no etag header").into())
}

async fn build_client(endpoint: &str, key: &str) -> Res<CosmosClient> {
    let endpoint: AccountEndpoint = endpoint.parse().map_err(|e| format!("endpoint {endpoint:?}: {e}"))?;
    let account = AccountReference::with_authentication_key(endpoint, Secret::from(key.to_string()));
    // HTTP: the SDK's defaults are kept (HTTP/2 allowed). Mayfly answers an HTTP/2 prior-knowledge preface with
    // GOAWAY HTTP_1_1_REQUIRED, on which the SDK falls back to HTTP/1.1 by itself (see the note at the error below).
    //
    // Binary encoding: the SDK sends item bodies as Cosmos *binary* JSON and asks for binary responses
    // (x-ms-cosmos-supported-serialization-formats: CosmosBinary) by default (BinaryEncodingOptions::default() is
    // enabled; azure_data_cosmos src/clients/mod.rs resolve_binary_encoding). Mayfly speaks text JSON only, so it is
    // turned off here with the documented option (the equivalent of AZURE_COSMOS_BINARY_ENCODING_ENABLED=false) —
    // unless that variable is set, which the SDK then follows (=true to see what the server does with binary).
    //
    // Region: the account lists one region (its own URL), so the SDK sends everything there whatever strategy is
    // given; the builder requires one.
    let mut builder = CosmosClient::builder();
    if std::env::var_os("AZURE_COSMOS_BINARY_ENCODING_ENABLED").is_none() {
        builder = builder.with_binary_encoding_options(BinaryEncodingOptions::new().with_enabled(false));
    }
    let client = builder
        .build(account, RoutingStrategy::ProximityTo(Region::EAST_US))
        .await
        .map_err(|e| {
            // The build's first request (GET /, the database account) is an HTTP/2 probe: the SDK retries over
            // HTTP/1.1 only when the failure carries an h2 error HTTP_1_1_REQUIRED / PROTOCOL_ERROR /
            // FRAME_SIZE_ERROR (azure_data_cosmos_driver src/driver/cosmos_driver.rs,
            // has_explicit_http2_incompatibility), e.g. the server's GOAWAY reaching the request's stream. A GOAWAY
            // that arrives before the request's HEADERS went out closes the connection first: hyper then reports
            // "connection closed" / "channel closed" without the h2 reason, and the build fails with 503/20011.
            sdk_error(
                "build the CosmosClient (GET / over HTTP/2, else HTTP/1.1 after an h2 HTTP_1_1_REQUIRED)",
                e,
            )
        })?;
    Ok(client)
}

async fn run(endpoint: &str, key: &str, database: &str) -> Res<()> {
    let started = Instant::now();
    let client = build_client(endpoint, key).await?;
    let binary = std::env::var("AZURE_COSMOS_BINARY_ENCODING_ENABLED").unwrap_or_else(|_| "off".into());
    println!("client: built for {endpoint} (key auth, binary encoding {binary})");

    // ----- Database and container (control_plane feature). ----------------------------------------------------
    let db = ok("create_database", client.create_database(database, None)).await?;
    let db_status = db.status();
    let db = db.into_model().map_err(|e| sdk_error("create_database: decode", e))?;
    ensure!(
        db.id.as_deref() == Some(database),
        "create_database: id {:?}, expected {database:?}",
        db.id
    );
    let db_rid = db.system_properties.resource_id.clone().unwrap_or_default();
    println!("create_database: {database} status={db_status} _rid={db_rid}");

    let database_client = client.database_client(database);
    let properties = ContainerProperties::new(CONTAINER, "/pk".into()).with_default_ttl(DEFAULT_TTL_S);
    let created = ok("create_container", database_client.create_container(properties, None)).await?;
    let status = created.status();
    let container = created
        .into_model()
        .map_err(|e| sdk_error("create_container: decode", e))?;
    ensure!(
        container.id == CONTAINER,
        "create_container: id {:?}, expected {CONTAINER:?}",
        container.id
    );
    ensure!(
        container.default_ttl == TimeToLive::Seconds(DEFAULT_TTL_S),
        "create_container: defaultTtl {:?}, expected {DEFAULT_TTL_S}",
        container.default_ttl
    );
    ensure!(
        container.partition_key.paths().iter().map(|p| p.as_ref()).eq(["/pk"]),
        "create_container: partition key paths {:?}, expected [\"/pk\"]",
        container.partition_key.paths()
    );
    let coll_rid = container.system_properties.resource_id.clone().unwrap_or_default();
    println!("create_container: {CONTAINER} status={status} defaultTtl={DEFAULT_TTL_S} _rid={coll_rid}");

    // The container client reads the container (and its partition key ranges) once, and needs its `_rid`.
    let items = ok("container_client", database_client.container_client(CONTAINER, None)).await?;
    println!("container_client: resolved {database}/{CONTAINER}");

    // ----- create, read --------------------------------------------------------------------------------------
    let a = item("a", "p1", "first", 1);
    let created = ok("create_item a", items.create_item("p1", "a", &a, None)).await?;
    ensure!(
        u16::from(created.status().status_code()) == 201,
        "create_item a: status {}",
        created.status()
    );
    let etag_created = etag_of("create_item a", created.headers().etag())?;
    println!("create_item: a status={} etag={etag_created:?}", created.status());

    let error = fails_with("create_item a again", 409, items.create_item("p1", "a", &a, None)).await?;
    println!("create_item: a again -> {} (conflict, as expected)", error.status());

    let read = ok("read_item a", items.read_item("p1", "a", None)).await?;
    let read_etag = etag_of("read_item a", read.headers().etag())?;
    let got: Item = read.into_model().map_err(|e| sdk_error("read_item a: decode", e))?;
    ensure!(got == a, "read_item a: {got:?}, expected {a:?}");
    ensure!(
        read_etag == etag_created,
        "read_item a: etag {read_etag:?}, the create returned {etag_created:?}"
    );
    println!("read_item: a = {got:?}");

    // ----- upsert (existing item: replaced; new item: created) ------------------------------------------------
    let a2 = item("a", "p1", "upserted", 2);
    let upserted = ok("upsert_item a", items.upsert_item("p1", "a", &a2, None)).await?;
    ensure!(
        u16::from(upserted.status().status_code()) == 200,
        "upsert_item a: status {}",
        upserted.status()
    );
    let etag_upserted = etag_of("upsert_item a", upserted.headers().etag())?;
    ensure!(
        etag_upserted != etag_created,
        "upsert_item a: the etag did not change ({etag_upserted:?})"
    );
    let b = item("b", "p1", "second", 10);
    let upserted_b = ok("upsert_item b", items.upsert_item("p1", "b", &b, None)).await?;
    ensure!(
        u16::from(upserted_b.status().status_code()) == 201,
        "upsert_item b (new): status {}",
        upserted_b.status()
    );
    println!(
        "upsert_item: a status={} (replaced), b status={} (created)",
        upserted.status(),
        upserted_b.status()
    );

    // ----- replace with an ETag precondition ------------------------------------------------------------------
    let a3 = item("a", "p1", "replaced", 3);
    let stale = ItemWriteOptions::default().with_precondition(Precondition::if_match(etag_created.clone()));
    let error = fails_with(
        "replace_item a with the stale etag",
        412,
        items.replace_item("p1", "a", &a3, Some(stale)),
    )
    .await?;
    ensure!(
        error.status().is_precondition_failed(),
        "replace_item a (stale etag): status {} is not precondition-failed",
        error.status()
    );
    println!(
        "replace_item: a with the stale etag -> {} (precondition failed, as expected)",
        error.status()
    );
    let current = ItemWriteOptions::default().with_precondition(Precondition::if_match(etag_upserted.clone()));
    let replaced = ok(
        "replace_item a with the current etag",
        items.replace_item("p1", "a", &a3, Some(current)),
    )
    .await?;
    let etag_replaced = etag_of("replace_item a", replaced.headers().etag())?;
    ensure!(
        etag_replaced != etag_upserted,
        "replace_item a: the etag did not change"
    );
    let got: Item = ok("read_item a after replace", items.read_item("p1", "a", None))
        .await?
        .into_model()
        .map_err(|e| sdk_error("read_item a: decode", e))?;
    ensure!(got == a3, "read_item a after replace: {got:?}, expected {a3:?}");
    println!(
        "replace_item: a with the current etag status={} -> {got:?}",
        replaced.status()
    );

    // ----- queries with parameters ----------------------------------------------------------------------------
    let c = item("c", "p2", "third", 7);
    ok("create_item c", items.create_item("p2", "c", &c, None)).await?;
    // One partition (FeedScope::partition: the SDK sends the partition key header, no query plan).
    let query = Query::from("SELECT * FROM c WHERE c.pk = @pk AND c.n >= @min")
        .with_parameter("@pk", "p1")?
        .with_parameter("@min", 3)?;
    let mut rows: Vec<Item> =
        query_all(&items, "query_items (partition p1)", query, FeedScope::partition("p1")).await?;
    rows.sort_by(|x, y| x.id.cmp(&y.id));
    ensure!(
        rows == vec![a3.clone(), b.clone()],
        "query_items (partition p1): {rows:?}, expected [a, b]"
    );
    println!(
        "query_items: partition p1, n >= 3 -> {:?}",
        rows.iter().map(|r| &r.id).collect::<Vec<_>>()
    );
    // Across partitions (FeedScope::full_container: the SDK plans the query and runs it on each partition key
    // range — Mayfly has one).
    let query = Query::from("SELECT c.id, c.n FROM c WHERE c.n > @min").with_parameter("@min", 5)?;
    let mut rows: Vec<Value> = query_all(
        &items,
        "query_items (cross-partition)",
        query,
        FeedScope::full_container(),
    )
    .await?;
    rows.sort_by_key(|r| r["id"].as_str().unwrap_or_default().to_string());
    let expected = vec![json!({"id": "b", "n": 10}), json!({"id": "c", "n": 7})];
    ensure!(
        rows == expected,
        "query_items (cross-partition): {rows:?}, expected {expected:?}"
    );
    println!("query_items: all partitions, n > 5 -> {rows:?}");

    // ----- patch (set, incr), sent to the server --------------------------------------------------------------
    // PatchStrategy::ServerSide: one PATCH request; the SDK's default (Auto) would do a client-side
    // read-modify-write for a list holding an increment (not retry-safe), which would not exercise the server.
    let patch = PatchInstructions::new()
        .with_operation(PatchOperation::set("/name", json!("patched")))
        .with_operation(PatchOperation::set("/extra", json!({"k": [1, 2]})))
        .with_operation(PatchOperation::increment("/n", CosmosNumber::from(5i64)));
    let options = PatchItemOptions::default().with_strategy(PatchStrategy::ServerSide);
    let patched = ok("patch_item b", items.patch_item("p1", "b", patch, Some(options))).await?;
    let status = patched.status();
    let post: Value = patched.into_model().map_err(|e| sdk_error("patch_item b: decode", e))?;
    ensure!(
        post["name"] == json!("patched") && post["n"] == json!(15) && post["extra"] == json!({"k": [1, 2]}),
        "patch_item b: post-image {post}, expected name=patched n=15 extra={{k:[1,2]}}"
    );
    let read: Value = ok("read_item b after patch", items.read_item("p1", "b", None))
        .await?
        .into_model()
        .map_err(|e| sdk_error("read_item b: decode", e))?;
    ensure!(
        read["name"] == json!("patched") && read["n"] == json!(15),
        "read_item b after patch: {read}"
    );
    println!(
        "patch_item: b set name, set extra, incr n by 5 status={status} -> name={} n={}",
        read["name"], read["n"]
    );

    // ----- an item with its own short ttl disappears -----------------------------------------------------------
    let short = Item {
        ttl: Some(SHORT_TTL_S),
        ..item("short", "p3", "short-lived", 0)
    };
    ok("create_item short", items.create_item("p3", "short", &short, None)).await?;
    let got: Item = ok("read_item short", items.read_item("p3", "short", None))
        .await?
        .into_model()
        .map_err(|e| sdk_error("read_item short: decode", e))?;
    ensure!(got == short, "read_item short: {got:?}, expected {short:?}");
    let written = Instant::now();
    let bound = expiry_bound();
    loop {
        match items.read_item("p3", "short", None).await {
            Ok(_) if written.elapsed() < bound => tokio::time::sleep(Duration::from_millis(200)).await,
            Ok(_) => {
                return Err(format!(
                    "read_item short: still there {bound:?} after it was written with ttl \
                                    {SHORT_TTL_S} s"
                )
                .into())
            }
            Err(e) if e.status().is_not_found() => break,
            Err(e) => return Err(sdk_error("read_item short (waiting for it to expire)", e)),
        }
    }
    println!(
        "ttl: item short (ttl {SHORT_TTL_S} s) read back, then 404 after {:.1} s",
        written.elapsed().as_secs_f64()
    );

    // ----- transactional batch: all or nothing, as one log entry --------------------------------------------
    let batch = TransactionalBatch::new("p1")
        .create_item(item("d", "p1", "batched", 1))?
        .read_item("d", None)
        .upsert_item(item("e", "p1", "batched", 2), None)?;
    let response = ok("transactional batch", items.execute_transactional_batch(batch, None)).await?;
    let status = u16::from(response.status().status_code());
    ensure!(status == 200, "transactional batch: status {status}, expected 200");
    let results = response
        .into_model()
        .map_err(|e| sdk_error("transactional batch: decode", e))?;
    let codes: Vec<u16> = results.results().iter().map(|r| r.status_code()).collect();
    ensure!(codes == [201, 200, 201], "transactional batch: statuses {codes:?}, expected [201, 200, 201]");
    let read_back: Option<Item> = results.results()[1]
        .into_model()
        .map_err(|e| sdk_error("transactional batch: decode the read", e))?;
    ensure!(
        read_back.as_ref().map(|i| i.name.as_str()) == Some("batched"),
        "transactional batch: the read saw {read_back:?}, expected the item created before it"
    );
    // One failing operation (a create of an existing id): 207, its 409 and 424 for the others, nothing written.
    let failing = TransactionalBatch::new("p1")
        .upsert_item(item("f", "p1", "never", 3), None)?
        .create_item(item("d", "p1", "again", 4))?;
    let response = ok("failing transactional batch", items.execute_transactional_batch(failing, None)).await?;
    let status = u16::from(response.status().status_code());
    let results = response
        .into_model()
        .map_err(|e| sdk_error("failing transactional batch: decode", e))?;
    let failed_codes: Vec<u16> = results.results().iter().map(|r| r.status_code()).collect();
    ensure!(
        status == 207 && failed_codes == [424, 409],
        "failing transactional batch: status {status} {failed_codes:?}, expected 207 [424, 409]"
    );
    fails_with("read_item f (its batch failed)", 404, items.read_item("p1", "f", None)).await?;
    println!("transactional batch: {codes:?}; a failing one -> {status} {failed_codes:?}, nothing written");

    // ----- hierarchical partition keys (MultiHash) -------------------------------------------------------------
    let hierarchical = ContainerProperties::new("hierarchical", ("/tenant", "/user").into());
    ok("create_container hierarchical", database_client.create_container(hierarchical, None)).await?;
    let tenants = ok(
        "container_client hierarchical",
        database_client.container_client("hierarchical", None),
    )
    .await?;
    for (id, tenant, user) in [("1", "t1", "u1"), ("2", "t1", "u2"), ("3", "t2", "u1")] {
        let doc = json!({"id": id, "tenant": tenant, "user": user});
        ok(
            "create_item hierarchical",
            tenants.create_item(PartitionKey::from((tenant, user)), id, &doc, None),
        )
        .await?;
    }
    let one: Value = ok(
        "read_item hierarchical",
        tenants.read_item(PartitionKey::from(("t1", "u2")), "2", None),
    )
    .await?
    .into_model()
    .map_err(|e| sdk_error("read_item hierarchical: decode", e))?;
    ensure!(one["user"] == "u2", "read_item hierarchical: {one}");
    let prefix: Vec<Value> = query_all(
        &tenants,
        "query_items by the prefix t1",
        Query::from("SELECT * FROM c"),
        FeedScope::partition(PartitionKey::from("t1")),
    )
    .await?;
    let mut ids: Vec<String> = prefix.iter().map(|v| v["id"].as_str().unwrap_or("").to_string()).collect();
    ids.sort();
    ensure!(ids == ["1", "2"], "query_items by the prefix t1: ids {ids:?}, expected [\"1\", \"2\"]");
    println!("hierarchical keys: read (t1, u2)/2, prefix t1 -> {ids:?}");

    // ----- delete --------------------------------------------------------------------------------------------
    let deleted = ok("delete_item a", items.delete_item("p1", "a", None)).await?;
    ensure!(
        u16::from(deleted.status().status_code()) == 204,
        "delete_item a: status {}",
        deleted.status()
    );
    let error = fails_with("read_item a after delete", 404, items.read_item("p1", "a", None)).await?;
    let error2 = fails_with("delete_item a again", 404, items.delete_item("p1", "a", None)).await?;
    println!(
        "delete_item: a status={}; read -> {}, delete again -> {}",
        deleted.status(),
        error.status(),
        error2.status()
    );

    ok("delete database", database_client.delete(None)).await?;
    println!("delete_database: {database}");
    println!("OK: all steps passed in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!(
            "usage: {} ENDPOINT KEY DATABASE",
            args.first().map(String::as_str).unwrap_or("rust_quickstart")
        );
        std::process::exit(2);
    }
    if let Err(error) = run(&args[1], &args[2], &args[3]).await {
        eprintln!("FAILED: {error}");
        std::process::exit(1);
    }
}
