#!/usr/bin/env python3
"""Writes deploy/grafana/dashboards/mayfly.json, the Mayfly Grafana dashboard, from the panel list below.

    python3 deploy/grafana/make_dashboard.py          # rewrite the JSON
    python3 deploy/grafana/make_dashboard.py --check  # exit 1 if the JSON differs from what this would write

Edit the panels here, not in the JSON (or export from Grafana and port the change back). Every query of every panel is
run against a real Prometheus by tests/deploy/compose_test.py, which must return data for each.
Metric names: metrics/metrics.cc. Variables: $node and $container (multi-select, "All" = .*).
"""
import json
import os
import sys

DATASOURCE = {"type": "prometheus", "uid": "mayfly-prometheus"}
N = 'node=~"$node"'
NC = 'node=~"$node", container=~"$container"'
RI = "$__rate_interval"


def q(expr, legend, ref=None):
    return {"expr": expr, "legendFormat": legend, "refId": ref}


def quantiles(metric, by, selector, qs=(0.5, 0.99), legend_prefix=""):
    out = []
    for quantile in qs:
        expr = (f"histogram_quantile({quantile}, sum by ({by}, le) "
                f"(rate({metric}_bucket{{{selector}}}[{RI}])))")
        legend = legend_prefix + "p" + str(int(quantile * 100)) + " " + " ".join("{{%s}}" % b for b in by.split(", "))
        out.append(q(expr, legend))
    return out


# (row title, [panel]) with panel = (title, type, unit, description, [targets], width)
ROWS = [
    ("Cluster", [
        ("Leader (as each node sees it)", "stat", "none",
         "The leader id each node knows (0: none). All nodes should agree.",
         [q(f"max by (node) (mayfly_raft_leader{{{N}}})", "node {{node}}")], 6),
        ("Nodes up / leaders", "stat", "none",
         "Nodes Prometheus scrapes, and how many report the leader role (1 when healthy).",
         [q('sum(up{job="mayfly"})', "nodes up"),
          q('sum(mayfly_raft_role{role="leader"})', "leaders")], 6),
        ("Term", "timeseries", "none", "Current Raft term per node; a step is an election.",
         [q(f"max by (node) (mayfly_raft_term{{{N}}})", "node {{node}}")], 6),
        ("Leader changes", "timeseries", "none", "Leader changes seen per node in the interval.",
         [q(f"sum by (node) (increase(mayfly_raft_leader_changes_total{{{N}}}[{RI}]))", "node {{node}}")], 6),
        ("Commit and applied index", "timeseries", "none",
         "Raft commit and applied log positions per node; a lagging line is a node catching up.",
         [q(f"max by (node) (mayfly_raft_commit_index{{{N}}})", "commit {{node}}"),
          q(f"max by (node) (mayfly_raft_applied_index{{{N}}})", "applied {{node}}")], 8),
        ("Applied-time lag", "timeseries", "s",
         "Wall clock minus applied replicated time. Items expire on a node when its applied time passes them.",
         [q(f"max by (node) (mayfly_applied_time_lag_seconds{{{N}}})", "node {{node}}")], 8),
        ("Raft latency p99", "timeseries", "s", "Log fsync (one Ready) and proposal-to-applied (leader) at p99.",
         quantiles("mayfly_raft_fsync_latency_seconds", "node", N, qs=(0.99,), legend_prefix="fsync ")
         + quantiles("mayfly_raft_proposal_latency_seconds", "node", N, qs=(0.99,), legend_prefix="proposal "), 8),
    ]),
    ("Traffic", [
        ("Requests by op and status", "timeseries", "reqps", "Requests answered per second (all selected nodes).",
         [q(f"sum by (op, status) (rate(mayfly_requests_total{{{N}}}[{RI}]))", "{{op}} {{status}}")], 12),
        ("Request latency", "timeseries", "s", "Latency quantiles by operation (all selected nodes).",
         quantiles("mayfly_request_latency_seconds", "op", N, qs=(0.5, 0.9, 0.99)), 12),
        ("Request units by op and container", "timeseries", "none", "RU/s consumed (ttl_delete: serverless TTL deletes).",
         [q(f"sum by (container, op) (rate(mayfly_ru_consumed_total{{{NC}}}[{RI}]))", "{{container}} {{op}}")], 12),
        ("Throttled requests (429)", "timeseries", "reqps",
         "Requests refused because a provisioned container's RU/s were used up.",
         [q(f"sum by (container) (rate(mayfly_requests_throttled_total{{{NC}}}[{RI}]))", "{{container}}")], 12),
    ]),
    ("TTL", [
        ("GC backlog items", "timeseries", "none",
         "Items expired at the applied time, not yet deleted, per node and container (invisible to readers).",
         [q(f"max by (node, container) (mayfly_ttl_gc_backlog_items{{{NC}}})", "{{container}} @ {{node}}")], 8),
        ("GC backlog bytes", "timeseries", "bytes", "Bytes of those items.",
         [q(f"max by (node, container) (mayfly_ttl_gc_backlog_bytes{{{NC}}})", "{{container}} @ {{node}}")], 8),
        ("Oldest expired, not deleted", "timeseries", "s",
         "Age of the oldest backlog item. Growing steadily: the collector is starved (see spare RU).",
         [q(f"max by (node, container) (mayfly_ttl_gc_oldest_expired_age_seconds{{{NC}}})",
            "{{container}} @ {{node}}")], 8),
        ("Deletion lag", "timeseries", "s", "Physical delete time minus expiry instant, p50 and p99 per container.",
         quantiles("mayfly_ttl_gc_deletion_lag_seconds", "container", NC), 8),
        ("GC RU spent vs spare RU", "timeseries", "none",
         "RU/s the collector spent, against the RU left for it this second (provisioned containers).",
         [q(f"sum by (node, container) (rate(mayfly_ttl_gc_ru_spent_total{{{NC}}}[{RI}]))",
            "spent {{container}} @ {{node}}"),
          q(f"max by (node, container) (mayfly_ttl_gc_spare_ru{{{NC}}})", "spare {{container}} @ {{node}}")], 8),
        ("GC deletes", "timeseries", "none", "Expired items deleted per second, per node and container.",
         [q(f"sum by (node, container) (rate(mayfly_ttl_gc_deleted_items_total{{{NC}}}[{RI}]))",
            "{{container}} @ {{node}}")], 8),
        ("Items expiring soon", "timeseries", "none",
         "Live items whose expiry falls within the window after the applied time (max over the selected nodes).",
         [q(f"max by (container, window) (mayfly_ttl_items_expiring{{{NC}}})", "{{container}} within {{window}}")],
         12),
        ("Reads that skipped expired items", "timeseries", "none",
         "Items reads passed over because they had expired (per second).",
         [q(f"sum by (node) (rate(mayfly_ttl_reads_skipped_expired_total{{{N}}}[{RI}]))", "node {{node}}")], 12),
        ("Forecast: items expiring and backlog peak", "timeseries", "none",
         "The TTL forecast (mayfly container forecast): live items expiring within the next hour and day, and the "
         "peak the backlog would reach over the day at the collector's capacity.",
         [q(f"max by (container, window) (mayfly_ttl_forecast_expiring_items{{{NC}}})",
            "{{container}} within {{window}}"),
          q(f"max by (node, container) (mayfly_ttl_forecast_backlog_peak_items{{{NC}}})",
            "peak {{container}} @ {{node}}")], 8),
        ("Forecast: time to drain the peak", "timeseries", "s",
         "How long the collector would need to delete the projected backlog peak (86400: not within the day). "
         "MayflyExpiryStormAhead fires above 10 minutes.",
         [q(f"max by (node, container) (mayfly_ttl_forecast_drain_seconds{{{NC}}})", "{{container}} @ {{node}}")], 8),
        ("GC reclaim capacity", "timeseries", "none",
         "Items per second the collector can delete: measured over the last minute's busy passes, else estimated "
         "from its settings (and the container's RU/s).",
         [q(f"max by (node, container) (mayfly_ttl_gc_reclaim_capacity_items_per_second{{{NC}}})",
            "{{container}} @ {{node}}")], 8),
    ]),
    ("Storage", [
        ("Live items", "timeseries", "none", "Items users can see (expired excluded), per container and node.",
         [q(f"max by (node, container) (mayfly_storage_live_items{{{NC}}})", "{{container}} @ {{node}}")], 12),
        ("Billable bytes", "timeseries", "bytes", "Bytes of the items users can see.",
         [q(f"max by (node, container) (mayfly_storage_billable_bytes{{{NC}}})", "{{container}} @ {{node}}")], 12),
    ]),
]


def variable(name, label, query):
    return {
        "name": name, "label": label, "type": "query", "datasource": DATASOURCE,
        "definition": query, "query": query,
        "refresh": 2, "multi": True, "includeAll": True, "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 3, "options": [], "hide": 0, "regex": "",
    }


def dashboard():
    panels = []
    next_id = 1
    y = 0
    for row_title, row_panels in ROWS:
        panels.append({"type": "row", "title": row_title, "id": next_id, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        next_id += 1
        y += 1
        x = 0
        row_height = 0
        for title, kind, unit, description, targets, width in row_panels:
            if x + width > 24:
                x = 0
                y += row_height
                row_height = 0
            height = 4 if kind == "stat" else 8
            refs = iter("ABCDEFGH")
            panel = {
                "type": kind, "title": title, "description": description, "id": next_id,
                "datasource": DATASOURCE,
                "gridPos": {"h": height, "w": width, "x": x, "y": y},
                "targets": [dict(t, refId=t["refId"] or next(refs), datasource=DATASOURCE) for t in targets],
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            }
            if kind == "stat":
                panel["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                                    "colorMode": "value", "graphMode": "none", "textMode": "value_and_name"}
            else:
                panel["options"] = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                                    "tooltip": {"mode": "multi", "sort": "desc"}}
                panel["fieldConfig"]["defaults"]["custom"] = {"lineWidth": 1, "fillOpacity": 0, "spanNulls": False}
            panels.append(panel)
            next_id += 1
            x += width
            row_height = max(row_height, height)
        y += row_height
    return {
        "uid": "mayfly-overview",
        "title": "Mayfly",
        "description": "Mayfly cluster: Raft, traffic and request units, TTL garbage collection, storage.",
        "tags": ["mayfly"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "10s",
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [
            variable("node", "node", "label_values(mayfly_raft_term, node)"),
            variable("container", "container", "label_values(mayfly_storage_live_items, container)"),
        ]},
        "annotations": {"list": []},
        "links": [],
        "panels": panels,
    }


def main():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dashboards", "mayfly.json")
    text = json.dumps(dashboard(), indent=2) + "\n"
    if "--check" in sys.argv[1:]:
        with open(path) as f:
            if f.read() != text:
                print(f"{path} differs from make_dashboard.py's output: run python3 {sys.argv[0]}", file=sys.stderr)
                return 1
        return 0
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
