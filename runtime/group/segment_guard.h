// The segment guard: a small child process that removes a process's shared-memory segments once
// that process has ended, however it ended. Signal handlers (cleanup.h) cover every death a
// handler can see; SIGKILL (the OOM killer, `kill -9`) is seen by none, and where the process has
// a rank 1, rank 1's janitor covers it. The guard covers the rest: a master with no workers (one
// rank, `--ranks 1` under mpirun, before fork(), after close() with Data alive) killed with SIGKILL.
//
// The guard is `/bin/sh` in a session of its own (no terminal's Ctrl-C, no `kill -- -PGID` of the
// program reaches it), blocked reading a pipe whose write end only the owner and the processes it
// forks hold (close-on-exec). End of file means they have all ended: it removes every
// /dev/shm entry with the owner's session prefix, and exits. On every ending the owner sees (exit,
// a handled signal) the owner SIGKILLs and reaps it itself, so it never outlives a healthy
// program, and is never left as a zombie by an init that does not reap orphans.
// SYNK_SEGMENT_GUARD=0 turns it off (a program that closes every file descriptor it did not open
// itself would close the pipe, and the guard would remove live segments).
#pragma once

namespace synk::rt::segment_guard {

// Starts the guard of the calling process for segments named `prefix`* (once per process; a
// process forked from an owner starts its own, and lets go of its parent's pipe). Not
// async-signal-safe; call before the first segment exists.
void start(const char* prefix);

// The owner only, async-signal-safe: SIGKILLs and reaps the guard (its work is being done by
// the caller). Does nothing in any other process or when no guard runs.
void stop();

// In a worker forked from the owner: closes the inherited pipe (the guard watches the owner).
void forget();

}  // namespace synk::rt::segment_guard
