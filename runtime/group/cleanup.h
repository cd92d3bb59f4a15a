// What is left when a program ends abnormally: nothing. A process that owns shared-memory
// segments (Data objects, a process group) handles the signals that would otherwise end it
// without running any exit handler (SIGINT from Ctrl-C, SIGTERM from `timeout` or a batch
// system, SIGHUP, SIGQUIT, SIGPIPE, SIGXCPU, SIGXFSZ; and the crashes SIGSEGV, SIGBUS, SIGFPE,
// SIGILL, SIGABRT, SIGSYS): the handler kills the group's workers, waits for them, removes every
// segment of this process, prints one line (not for SIGPIPE), and then dies of the same signal
// with its previous disposition, so the exit status is the usual one (130 for Ctrl-C in a shell).
// Only signals whose disposition is still the default are taken: a signal the program ignores
// or handles itself stays its own.
//
// The handler is async-signal-safe (raw system calls on state prepared beforehand). Workers go
// back to the original dispositions at once; rank 1 also gets a "janitor": when the master dies
// (even of SIGKILL), it removes the master's segments. A process with no rank 1 killed with
// SIGKILL is covered by its segment guard (segment_guard.h), started with the handlers.
#pragma once

#include <sys/types.h>

#include <span>
#include <string>

namespace synk::rt::cleanup {

// Called before this process creates a segment: installs the handlers the first time (and again
// in a process forked from an owner). Does nothing in a worker of a process group.
void prepare_process();

// The workers of this process's group, for the handler to kill (pidfds where the kernel has
// them, else -1). One group at a time; clear_workers() before they are reaped.
void set_workers(std::span<const pid_t> pids, std::span<const int> pidfds);
void clear_workers();

// Blocks (true) or unblocks the handled termination signals in the calling thread: the master
// forks its workers with them blocked, so that a signal never finds a worker it cannot name.
void block_signals(bool block);

// In a freshly forked worker: restores the dispositions the program had before synk took them
// and marks this process as a worker (it installs nothing itself).
void become_worker();
// True in a worker rank (after become_worker): synk's API is the master's.
bool is_worker();

// A flat directory this process is filling (a checkpoint being saved, synk/checkpoint.cpp): until
// it is cleared (""), the handler also removes its files and then the directory, so that a
// signal in the middle leaves no half-written copy. One at a time; installs the handlers.
void set_scratch_directory(const std::string& path);
// Text the signal handler's report puts after "synk: " (a multi-node leader: "node 1 of 2 (host): "),
// so that a crash in one leader of a job names it like the job's other messages. Cut at 127 bytes.
void set_report_prefix(const std::string& prefix);

// Rank 1: on janitor_signal() (its parent-death signal), removes every segment whose name starts
// with `master_prefix` (the master's session prefix), then exits.
void install_janitor(const std::string& master_prefix);
// The janitor's removal, also called by rank 1 when it finds the master gone. Async-signal-safe.
void janitor_clean();
// The real-time signal rank 1 asks for as its parent-death signal (PR_SET_PDEATHSIG): the kernel
// sends it when the master dies, and nothing else does, unlike SIGTERM.
int janitor_signal();

}  // namespace synk::rt::cleanup
