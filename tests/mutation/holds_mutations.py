#!/usr/bin/env python3
# Mutation check of the legal holds' guards (docs/retention.md, "Legal holds"): takes each check out in turn, rebuilds
# holds_test and prints the tests that fail without it (every line should name at least one; "collector_container" is
# the container-hold shortcut of the collector, which the per-item check behind it covers, so none fails there).
# The source is restored after each. Not part of `make test` (a rebuild per mutation).
#   python3 tests/mutation/holds_mutations.py [--build DIR] [NAME ...]
import os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = "build"
args = sys.argv[1:]
if args[:1] == ["--build"]:
    BUILD, args = args[1], args[2:]
muts = [
 ("delete_item", "storage/state_machine.cc", "      return held_item_refusal(*partition_key, command.id, covering);", "      (void)covering;"),
 ("write_item", "storage/state_machine.cc", "      return held_item_refusal(partition_key, id, covering);", "      (void)covering;"),
 ("default_ttl", "storage/state_machine.cc", "  if (record.active_holds > 0 && policy_changes) {", "  if (false) {"),
 ("delete_partition", "storage/state_machine.cc", "    if (std::vector<const HoldRecord*> held = (*holds)->active_in_partition(*partition_key); !held.empty()) {", "    if (std::vector<const HoldRecord*> held = (*holds)->active_in_partition(*partition_key); false) {"),
 ("delete_container", "storage/state_machine.cc", "  if (found->active_holds > 0) {", "  if (false) {"),
 ("delete_database", "storage/state_machine.cc", "    if (record->active_holds > 0) {", "    if (false) {"),
 ("collector", "storage/expiry_keeper.cc", "            continue;  // alive when its hold took it: kept", "            last_held[own ? 0 : 1].reset(); --held_skipped;"),
 ("collector_container", "storage/expiry_keeper.cc", "      if (hold->scope == HoldScope::kContainer) return CollectResult{};", "      (void)hold;"),
 ("restore_pause", "storage/restore.cc", "    if (holds && mode == RestoreTtlMode::kPause && container.ttl.policy.is_on()) {", "    if (false) {"),
 ("restore_alive", "storage/restore.cc", "          if (deleted || !HoldSet::alive(record, container.ttl, backup_ts, since)) {", "          if (deleted || !HoldSet::alive(record, container.ttl, backup_ts, std::nullopt)) {"),
 ("read_item", "storage/store_reader.cc", "  if (holds ? !holds->alive(*partition_key, id, item, found->ttl, now_micros)", "  if (holds ? !ttl::alive(item.ttl, item.write_ts_micros, found->ttl, now_micros)"),
 ("stretch", "storage/holds.cc", "          hold.released_index > holds_[*start].set_index) {", "          hold.released_index > holds_[*start].set_index && false) {"),
]
sel = args
for name, path, old, new in muts:
    if sel and name not in sel: continue
    p = os.path.join(ROOT, path)
    src = open(p).read()
    assert src.count(old) == 1, (name, src.count(old))
    open(p, "w").write(src.replace(old, new))
    try:
        b = subprocess.run(f"cd {ROOT} && cmake --build {BUILD} -j 2 --target holds_test", shell=True, capture_output=True, text=True)
        if b.returncode != 0:
            print(name, "BUILD FAILED", b.stdout[-2000:]); continue
        r = subprocess.run(f"cd {ROOT} && MAYFLY_HOLDS_SEED=1 {BUILD}/tests/unit/holds_test", shell=True, capture_output=True, text=True)
        failed = sorted({l.split()[3] for l in r.stdout.splitlines() if l.startswith("[  FAILED  ]") and "(" in l})
        print(f"{name}: {', '.join(failed) if failed else 'NO TEST FAILED'}", flush=True)
    finally:
        open(p, "w").write(src)
