import Foundation

// The tests wait for child processes (the `lifecycle` binary, vips, psql, python, moto_server)
// off Swift concurrency's cooperative pool. That pool has one thread per core, two on CI: a
// test blocking one of them until a child exits stalls every other suite in the process for
// as long as the child runs.

extension Process {
    /// Waits for the child to end on a thread of its own; `terminationStatus` and
    /// `terminationReason` can be read afterwards.
    ///
    /// Foundation's `waitUntilExit` runs the calling thread's run loop until the child has
    /// ended, and only the thread that started the child has anything scheduled on its run
    /// loop. Anywhere else the run loop returns at once and the wait spins, burning CPU for as
    /// long as the child runs. So the waiting thread's run loop first gets a timer that never
    /// fires: the wait then sleeps between Foundation's checks, and is woken at the exit.
    public func exited() async {
        await onThreadOfItsOwn { [self] in
            let keepAlive = Timer(fire: .distantFuture, interval: 0, repeats: false) { _ in }
            RunLoop.current.add(keepAlive, forMode: .default)
            waitUntilExit()
            keepAlive.invalidate()
        }
    }
}

/// Runs `body` on a thread of its own and hands back what it returns or throws: for work
/// that blocks while a child runs (its output read to the end, a query through psql, a
/// PostgreSQL cluster's initdb and pg_ctl).
public func onThreadOfItsOwn<Value: Sendable, Failure: Error>(
    _ body: @escaping @Sendable () throws(Failure) -> Value
) async throws(Failure) -> Value {
    let result: Result<Value, Failure> = await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: Result { () throws(Failure) -> Value in try body() }) }.start()
    }
    return try result.get()
}
