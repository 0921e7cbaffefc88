# Mayfly's wire contract: the client API and the peer (Raft) API, served on one port by every mayflyd.
#
# Business outcomes — 404, 409, 412, 429, "not leader" — are values in Response, never RPC exceptions. An exception
# means the connection or the peer failed (the client library reconnects and retries where that is safe).
@0xb47b7fe77235879e;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("mayfly::proto");

# How fresh a read must be (docs/design.md, "Reads and consistency levels"). Every level decides expiry at the serving
# replica's applied time.
enum Consistency {
  session @0;   # default: any replica that has applied the request's session token
  strong @1;    # the leader confirms leadership with a quorum (ReadIndex); linearizable
  bounded @2;   # any replica within the configured staleness (entries and seconds) of the leader
  eventual @3;  # any replica, as it is
}

struct Options {
  consistency @0 :Consistency = session;
  sessionToken @1 :Text;   # the sessionToken of the client's previous response; empty: none
  ifMatch @2 :Text;        # an etag (as returned, with its quotes): the write applies only to that version
  maxItems @3 :UInt32;     # listItems / query page size; 0: the default (100)
  continuation @4 :Text;   # listItems / query: where to go on, from the previous page's Response.continuation
}

# A container's settings. On create, `partitionKeyPath` is required and `unchanged` means "absent" (TTL off,
# consistent indexing, serverless throughput). On update, empty path and `unchanged` leave a setting as it is.
struct ContainerSettings {
  partitionKeyPath @0 :Text;
  defaultTtl :union {
    unchanged @1 :Void;
    set @2 :Text;        # the JSON value as the user wrote it ("10", "-1", ...); validated by the server
    remove @3 :Void;     # TTL off (not the same as -1)
  }
  indexing :union {
    unchanged @4 :Void;
    consistent @5 :Void;
    none @6 :Void;
  }
  throughput :union {
    unchanged @7 :Void;
    provisioned @8 :UInt32;   # RU/s
    serverless @9 :Void;
  }
  # updateContainer with a defaultTtl change (docs/ttl.md, "Containers"): `dryRun` answers what the change would expire
  # (live items and bytes, expired at once / within 1 h / within 1 day) and changes nothing; `force` applies a change
  # that would expire more than 10 % of the container's live items at once (refused with 412 otherwise).
  dryRun @10 :Bool;
  force @11 :Bool;
  # The change feed (docs/changefeed.md): off unless asked for. `on` carries the retention in seconds (1 .. 90
  # days); 0: the leader's --changefeed-retention. Turning it on again over an enabled feed changes the retention.
  changeFeed :union {
    unchanged @12 :Void;
    on @13 :UInt32;
    off @14 :Void;
  }
  # "Expiring soon" warnings in the change feed (docs/retention.md): `set` is the window in seconds before an item's
  # expiry instant at which its feed carries a warning; 0 turns them off.
  expiryWarning :union {
    unchanged @15 :Void;
    set @16 :UInt32;
  }
}

struct Batch {
  partitionKey @0 :Text;  # the partition key value as JSON, like ItemKey's
  operations @1 :Text;    # a JSON array of {"operationType","id"?,"resourceBody"?,"ifMatch"?}, as Cosmos DB's REST API
}

struct Hold {
  id @0 :Text;
  scope @1 :Scope;
  enum Scope {
    container @0;
    partition @1;
    item @2;
  }
  partitionKey @2 :Text;  # partition and item holds: the partition key value as JSON, like ItemKey's
  itemId @3 :Text;        # item holds
  reason @4 :Text;
  # The key name of the client: set only by a node forwarding the request of a client it authenticated to the
  # leader (trusted only from a peer that proved the cluster secret); a client's value is ignored.
  actor @5 :Text;
}

struct HoldRelease {
  id @0 :Text;
  reason @1 :Text;
  actor @2 :Text;  # as Hold's
}

struct ItemKey {
  partitionKey @0 :Text;  # the partition key value as JSON: "\"tenant-1\"", "42", "true", "null"
  id @1 :Text;
}

# A query in Mayfly's Cosmos-style SQL subset (docs/cosmos.md, "Queries"). Page size and continuation travel in Options.
struct Query {
  sql @0 :Text;
  parameters @1 :Text;     # one JSON object {"@name": value, ...}; empty: none
  partitionKey :union {
    crossPartition @2 :Void;
    value @3 :Text;        # the partition key value as JSON: only this partition is read
  }
  enableScan @4 :Bool;     # allow a scan on a container whose indexing mode is none
  feedRangeMin @5 :Text;   # a feed range of effective partition keys (hex), min inclusive; both empty: all
  feedRangeMax @6 :Text;   # ... max exclusive
}

struct Member {
  id @0 :UInt64;
  address @1 :Text;  # host:port of its RPC listener
}

struct Request {
  database @0 :Text;
  container @1 :Text;
  options @2 :Options;
  union {
    createDatabase @3 :Void;
    deleteDatabase @4 :Void;
    listDatabases @5 :Void;
    createContainer @6 :ContainerSettings;
    updateContainer @7 :ContainerSettings;
    getContainer @8 :Void;
    deleteContainer @9 :Void;
    listContainers @10 :Void;
    createItem @11 :Text;    # the item JSON
    upsertItem @12 :Text;
    replaceItem @13 :Text;
    readItem @14 :ItemKey;
    deleteItem @15 :ItemKey;
    patchItem :group {
      key @16 :ItemKey;
      operations @17 :Text;  # JSON array of patch operations
      # Conditional patch (the SDKs' filter_predicate): "FROM c WHERE ..." over the item as it is; false -> 412.
      condition @36 :Text;
    }
    listItems :union {       # the read feed: one partition or the whole container, a page at a time
      wholeContainer @18 :Void;
      partitionKey @19 :Text;
    }
    clusterStatus @20 :Void;
    addMember @21 :Member;
    removeMember @22 :UInt64;
    transferLeader @23 :UInt64;
    query @24 :Query;        # a read: follows the consistency level like listItems
    # Admin, --clock virtual clusters only (docs/ttl.md, "Virtual clock"): move replicated time forward by this duration
    # ("90s", "1500ms", "30m", "2h", "1d"; a bare number is seconds). 412 on a real-clock cluster, 400 if not > 0.
    advanceClock @26 :Text;
    # Online backup (admin; docs/operations.md, "Backup and restore"), served by the node called, never forwarded:
    # backupOpen starts exporting this node's state at its applied index to a file of its own and answers {"backup":
    # ID}; backupRead returns that file's bytes from `offset` in Response.data (at most `maxBytes`, capped at 1 MiB)
    # with {"state":"exporting"|"ready", "bytes", "appliedIndex", ...} in the body. A read at the end releases the file.
    backupOpen @27 :Void;
    backupRead @28 :BackupRead;
    # The TTL forecast of container `database`/`container` (docs/ttl.md, "Forecast"), served by the node
    # called from its own applied state, never forwarded: live items and bytes expiring per minute for the next hour
    # and per hour for the next day, this node's backlog and reclaim capacity, and the projected backlog peak and
    # drain time, as JSON in the body. Read role.
    containerForecast @29 :Void;
    # The change feed of container `database`/`container` (docs/changefeed.md): a read at the request's consistency
    # level, from any replica. Body {"changes":[...],"continuation":"...","caughtUp":bool}; 410 for a start before
    # the feed was turned on or older than its retention.
    readChangeFeed @30 :ReadChangeFeed;
    # A database's shared throughput (docs/cosmos.md, "Throughput"): the RU/s in `sharedThroughput` (> 0), for a
    # database created with shared throughput. Its containers without throughput of their own share the new figure.
    updateDatabase @32 :Void;
    # The account's offers (docs/cosmos.md, "Throughput"): every database with shared throughput and every container
    # with its own, as a JSON array [{"database","container"?,"rid","throughput","ts"}] in the body. A read.
    listOffers @33 :Void;
    # A transactional batch on one partition of container `database`/`container` (docs/cosmos.md, "Transactional
    # batch"): up to 100 operations that all apply, as one log entry, or none does. Body: each operation's result
    # [{"statusCode","requestCharge","eTag"?,"resourceBody"?,"message"?}]; 207 when it failed as a whole.
    batch @34 :Batch;
    # Delete by partition key (docs/retention.md): the partition key value as JSON. Every item of that partition is
    # gone at once, on every replica at the same log position; the collector removes them with spare RU. Body:
    # {"partitionKey":…,"deletedTs":…}. Refused (400) on a container whose change feed is on.
    deletePartition @35 :Text;
    # Legal holds (docs/retention.md, "Legal holds"; keys with the compliance role, or admin): a hold keeps what it
    # covers from expiring and from every deletion path until released. Body: the hold as JSON (201 for a set).
    setHold @37 :Hold;
    releaseHold @38 :HoldRelease;
    # The holds of `database`/`container` (of every container of `database` when `container` is empty, of every
    # container when both are): a JSON array; true: released ones too. A read, compliance role.
    listHolds @39 :Bool;
    # The audit trail of holds set and released, oldest first ([{"action","index","ts","database","container","hold",
    # "scope",...,"actor","reason"}]), a page at a time (Options.maxItems, continuation). A read, compliance role.
    listHoldAudit @40 :Void;
  }
  # createDatabase: the RU/s its containers share (those created without throughput of their own); 0: none (each
  # container has its own, or is serverless). updateDatabase: the new figure.
  sharedThroughput @31 :UInt32;
  # Database, container and item writes from a client that asks for exactly-once execution (docs/tests.md, "Exactly-once
  # writes"): the node answers a re-sent write with the outcome of its first execution. Absent: no deduplication.
  writeId @25 :WriteId;
}

struct ReadChangeFeed {
  mode @0 :Mode;
  enum Mode {
    all @0;     # every create, replace, delete and TTL expiration
    latest @1;  # creates and replaces whose version is still the item's current, live one
  }
  from :union {
    beginning @1 :Void;     # the oldest position the retention keeps
    now @2 :Void;           # the serving replica's applied position
    time @3 :Int64;         # changes at positions whose replicated time is >= this (Unix microseconds)
    continuation @4 :Text;  # a page's continuation (or a change's position)
  }
  onlyExpirations @5 :Bool;
  maxItems @6 :UInt32;      # changes per page; 0: 100
  # Long-poll: when the page is caught up and empty, the node waits up to this many ms (at most 5000) for its
  # applied index to pass the page's position, then reads again. 0: answer at once.
  waitMs @7 :UInt32;
  feedRangeMin @8 :Text;  # only changes to items whose partition key's effective partition key (hex) is in
  feedRangeMax @9 :Text;  # [min, max); both empty: the whole container
  onlyWarnings @10 :Bool;   # only "expiring soon" warnings (docs/retention.md)
  noWarnings @11 :Bool;     # leave the warnings out (the Cosmos gateway: Cosmos has no such change)
}

struct BackupRead {
  backup @0 :UInt64;    # from backupOpen's answer
  offset @1 :UInt64;
  maxBytes @2 :UInt32;  # 0: 1 MiB
}

struct WriteId {
  client @0 :UInt64;              # the client's random id, != 0
  sequence @1 :UInt64;            # 1, 2, 3, ... per client; a re-sent write keeps its number
  firstUnacknowledged @2 :UInt64; # the lowest sequence the client still waits for (<= sequence): older outcomes go
  retry @3 :Bool;                 # this attempt may be a re-send of an earlier one
  # Who made the write (storage::dedup_owner_of of the key's name; 0: anonymous): set only by a node forwarding the
  # write of a client it authenticated to the leader, which takes it only from a peer that proved the cluster secret.
  # A client's value is ignored: the node that authenticated the client decides it.
  owner @4 :UInt64;
}

struct Response {
  status @0 :UInt16;        # HTTP-style: 200, 201, 204, 400, 404, 409, 412, 413, 429, 503, ...
  substatus @1 :UInt32;
  message @2 :Text;         # for errors: what went wrong and what to do
  body @3 :Text;            # JSON: an item with its system properties, a container, an array for lists, a status
  etag @4 :Text;
  ts @5 :Int64;             # `_ts` of the item or container written or read (Unix seconds); 0 otherwise
  requestCharge @6 :Float64;
  sessionToken @7 :Text;    # pass it back in Options.sessionToken to read your own writes anywhere
  retryAfterMs @8 :UInt32;  # with 429 (and 503 when a leader election is under way)
  servedBy @9 :UInt64;      # the node that executed the request
  leaderHint @10 :UInt64;   # the leader as this node knows it (0: unknown), for client-side leader discovery
  continuation @11 :Text;   # listItems / query: non-empty when there are more pages
  data @12 :Data;           # backupRead: the bytes of the backup file from the requested offset
}

# The bootstrap capability every mayflyd offers, one per connection. Authentication (docs/security.md) is a
# challenge-response over both sides' nonces, so no key or secret ever crosses the wire:
#   1. hello(clientNonce) -> serverNonce (fresh for this connection; a second hello on it is refused);
#   2. openSession(proof = HMAC(key, ...)) or openPeer(from, cluster, proof = HMAC(cluster secret, ...)), answered with
#      the node's own proof over the same nonces, which the caller checks before it sends anything else.
# A node with no keys configured accepts any session (it runs open, and says so); a node with no cluster secret
# accepts any peer of its cluster name. A connection that has not authenticated within the handshake timeout is
# closed.
interface Mayfly {
  # `credentials` is unused (never send a key in it). A session whose requests are checked against the role of the key that made `proof` (common/auth.h). An empty or
  # wrong proof still opens a session, whose every request is answered 401 with a message saying what to do.
  openSession @0 (credentials :Text, proof :Data) -> (session :Session, serverProof :Data);
  # The peer API for node `from` of cluster `cluster`. Fails (an RPC exception) unless `proof` shows the caller
  # holds the cluster secret; every message later delivered on it must come from `from`.
  # `clock` is the caller's --clock mode ("" or "real", "virtual"): a node refuses a peer whose mode differs from
  # its own (docs/ttl.md, "Virtual clock").
  openPeer @1 (from :UInt64, cluster :Text, proof :Data, clock :Text) -> (peer :Peer, serverProof :Data);
  hello @2 (clientNonce :Data) -> (serverNonce :Data);
}

interface Session {
  execute @0 (request :Request) -> (response :Response);
  # Several requests in one call (the client library batches the item writes and point reads issued together on a
  # connection): each is admitted, authorized and executed as if it came alone, in list order, and `responses[i]`
  # answers `requests[i]`. The call returns when the last of them is answered, so the library sends nothing that may
  # wait long (queries, lists, change feed waits, admin) this way. At most 1024 requests: a longer batch is answered
  # 400 for each request, none executed.
  executeBatch @1 (requests :List(Request)) -> (responses :List(Response));
}

interface Peer {
  # Raft messages from the calling node, in order, each encoded by replication/codec.h (encode_message). Snapshots
  # travel as chunked kSnapshot messages among them.
  deliver @0 (messages :List(Data)) -> ();
  # A follower hands a client write (or strong read) to the leader, which executes it as if the client had called.
  forward @1 (request :Request) -> (response :Response);
  # This node's own view, as JSON: {"id","address","role","term","commit","applied","appliedTime","leader"}.
  nodeStatus @2 () -> (status :Text);
}
