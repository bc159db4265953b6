"""The reference job queues `make bench` measures the runner against, driven the way their
own documentation runs them, on the same machine, cluster and job count as the runner:

  pgqueuer (PostgreSQL, asyncpg):  python reference-queues.py pgqueuer-drain DSN JOBS PROCESSES
                                   python reference-queues.py pgqueuer-enqueue DSN JOBS SINGLES
  huey (SqliteHuey):               python reference-queues.py huey-drain DIRECTORY JOBS PROCESSES

Each prints one line of figures. A drain enqueues JOBS no-op jobs (bulk, not timed), starts
PROCESSES worker processes at once and times until every job has run; the processes'
start-up is inside the time, as it is for the runner's `worker --once`. Every figure is
checked, not assumed: a drain that leaves jobs behind fails.
"""
import asyncio
import os
import subprocess
import sys
import time

PGQUEUER_WORKER = r"""
import asyncio, sys
import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.qm import QueueManager
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode

async def main(dsn):
    connection = await asyncpg.connect(dsn)
    manager = QueueManager(Queries(AsyncpgDriver(connection)))

    @manager.entrypoint("noop")
    async def noop(job):
        pass

    # Its documented throughput settings: batches of 10, until the queue is empty.
    await manager.run(batch_size=10, mode=QueueExecutionMode.drain)

asyncio.run(main(sys.argv[1]))
"""


async def pgqueuer_queries(dsn):
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    connection = await asyncpg.connect(dsn)
    queries = Queries(AsyncpgDriver(connection))
    if not await queries.schema_is_installed():
        await queries.install()
    return connection, queries


async def pgqueuer_counts(connection):
    queued = await connection.fetchval("SELECT count(*) FROM pgqueuer")
    done = await connection.fetchval("SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'")
    return queued, done


async def pgqueuer_drain(dsn, jobs, processes):
    connection, queries = await pgqueuer_queries(dsn)
    await connection.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")
    await queries.enqueue(["noop"] * jobs, [None] * jobs, [0] * jobs)
    start = time.perf_counter()
    workers = [subprocess.Popen([sys.executable, "-c", PGQUEUER_WORKER, dsn]) for _ in range(processes)]
    for worker in workers:
        if worker.wait() != 0:
            sys.exit(f"pgqueuer worker exited {worker.returncode}")
    elapsed = time.perf_counter() - start
    queued, done = await pgqueuer_counts(connection)
    await connection.close()
    if queued != 0 or done < jobs:
        sys.exit(f"pgqueuer drain left {queued} queued, {done} of {jobs} logged successful")
    print(f"{jobs / elapsed:.0f}")


async def pgqueuer_enqueue(dsn, jobs, singles):
    connection, queries = await pgqueuer_queries(dsn)
    await connection.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")
    start = time.perf_counter()
    await queries.enqueue(["noop"] * jobs, [None] * jobs, [0] * jobs)
    bulk = jobs / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(singles):
        await queries.enqueue("noop", None)
    single = singles / (time.perf_counter() - start)
    queued, _ = await pgqueuer_counts(connection)
    await connection.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")
    await connection.close()
    if queued != jobs + singles:
        sys.exit(f"pgqueuer enqueue stored {queued} of {jobs + singles} jobs")
    print(f"{bulk:.0f} {single:.0f}")


HUEY_APP = r"""
import os
from huey import SqliteHuey

huey = SqliteHuey("bench", filename=os.environ["BENCH_HUEY_DB"])
counter = os.environ["BENCH_HUEY_COUNTER"]

@huey.task()
def noop():
    # One byte per job run, appended atomically: how the driver knows when all have run.
    descriptor = os.open(counter, os.O_WRONLY | os.O_APPEND)
    os.write(descriptor, b".")
    os.close(descriptor)
"""


def huey_drain(directory, jobs, processes):
    os.makedirs(directory, exist_ok=True)
    database = os.path.join(directory, f"huey-{processes}.sqlite")
    counter = os.path.join(directory, f"huey-{processes}.count")
    for path in (database, database + "-wal", database + "-shm", counter):
        if os.path.exists(path):
            os.remove(path)
    open(counter, "w").close()
    with open(os.path.join(directory, "huey_bench_app.py"), "w") as module:
        module.write(HUEY_APP)
    environment = {**os.environ, "BENCH_HUEY_DB": database, "BENCH_HUEY_COUNTER": counter,
                   "PYTHONPATH": directory + os.pathsep + os.environ.get("PYTHONPATH", "")}
    enqueue = "from huey_bench_app import noop\nfor _ in range(%d): noop()\n" % jobs
    subprocess.run([sys.executable, "-c", enqueue], env=environment, check=True)
    consumer = os.path.join(os.path.dirname(sys.executable), "huey_consumer")
    start = time.perf_counter()
    # Its process workers, one per process asked for; a short idle poll so it is not timed sleeping.
    child = subprocess.Popen([consumer, "huey_bench_app.huey", "-k", "process", "-w", str(processes), "-d", "0.01", "-m", "0.1", "-q"],
                             env=environment, cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = start + 600
    while os.path.getsize(counter) < jobs:
        if child.poll() is not None:
            sys.exit(f"huey consumer exited {child.returncode} after {os.path.getsize(counter)} of {jobs} jobs")
        if time.perf_counter() > deadline:
            child.kill()
            sys.exit(f"huey ran {os.path.getsize(counter)} of {jobs} jobs in 600 s")
        time.sleep(0.002)
    elapsed = time.perf_counter() - start
    child.terminate()
    child.wait()
    print(f"{jobs / elapsed:.0f}")


def main():
    command, target, jobs, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if command == "pgqueuer-drain":
        asyncio.run(pgqueuer_drain(target, jobs, extra))
    elif command == "pgqueuer-enqueue":
        asyncio.run(pgqueuer_enqueue(target, jobs, extra))
    elif command == "huey-drain":
        huey_drain(target, jobs, extra)
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
