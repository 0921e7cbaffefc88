// SIGINT / SIGTERM for mayfly-chaos: an interrupted campaign leaves no node processes, network namespaces, tmpfs
// mounts or cluster directories behind.
//
// install_interrupt_cleanup() installs handlers for SIGINT and SIGTERM that only write the signal's number to a
// non-blocking pipe (write(2) is async-signal-safe; SA_RESTART, so other threads' calls are not cut short), and starts
// a thread that reads the pipe. On a signal that thread, while the campaign's threads go on:
//   1. takes node_start_gate() and keeps it, so no node process starts after this point (every start of a node takes
//      the gate; it waits at most 15 s for a start in progress);
//   2. SIGKILLs every child process of this one (the nodes — `ip netns exec` execs mayflyd in place, so a node is a
//      child — and any `ip`/`iptables` command in flight), each through a pidfd opened and then checked to still be
//      this process's child, so a PID the campaign reaped meanwhile is never signalled; waits (bounded) for them to die;
//   3. unmounts this process's tmpfs ("mfc<pid>-disk"), deletes its network namespaces ("mfc<pid>-*"), and removes the
//      cluster directories registered with note_run_dir();
//   4. prints what it cleaned and _exits with 128 + the signal (130 for SIGINT, 143 for SIGTERM), without running
//      destructors under the campaign's feet.
//
// The thread does no networking, so it may start before the main thread enters the hub namespace.
//
// Thread-safety: install_interrupt_cleanup once, from main; the rest from any thread.
#pragma once

#include <mutex>
#include <string>

namespace mayfly::chaos {

void install_interrupt_cleanup();

// Held by whoever starts node processes (Campaign), so a start never races the cleanup's scan for children.
std::timed_mutex& node_start_gate();

// A cluster's temporary directory, removed by the cleanup if the campaign is interrupted while it exists.
void note_run_dir(const std::string& path);
void forget_run_dir(const std::string& path);

}  // namespace mayfly::chaos
