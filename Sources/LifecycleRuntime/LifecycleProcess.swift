import CLinux
import Foundation

/// What a lifecycle process sets up before it does anything: the executable calls this
/// first, an app embedding the library decides for itself.
public enum LifecycleProcess {
    public static func prepare() {
        // libarchive needs a UTF-8 locale for non-ASCII entry names (a Swift process starts in "C").
        setlocale(LC_CTYPE, "C.UTF-8")
        // Everything this process writes holds personal data (the database, photos,
        // archives, their temporary files): readable by its owner only, whatever umask
        // it was started with. The stores set these modes themselves too.
        umask(0o077)
        // Past a file-size limit (ulimit -f) a write should fail with EFBIG and be
        // reported like a full disk (exit 75), not kill the process half-way.
        signal(SIGXFSZ, SIG_IGN)
        // A reader that goes away (`lifecycle map check | head -2`) should end this process's
        // output, not the process: with SIGPIPE ignored, write(2) returns EPIPE and the
        // writer stops writing to that stream while the command finishes its work.
        signal(SIGPIPE, SIG_IGN)
        // Two malloc arenas per core instead of glibc's eight. With eight, libvips' threads
        // each took an arena of their own and grew it: two photo jobs at a time on two cores
        // peaked at 193 MB against 151 MB with two arenas (scripts/bench-photos.sh prints
        // both). Two in all was too few for the job runner, whose threads then queued on the
        // allocator's locks: a 20,000-job drain made 11,000 context switches instead of
        // 2,700 and cost 10-15 % more CPU; with four, photos peaked at 170 MB at the same
        // speed. MALLOC_ARENA_MAX in the environment wins.
        if ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil {
            _ = mallopt(M_ARENA_MAX, Int32(max(4, 2 * ProcessInfo.processInfo.activeProcessorCount)))
        }
    }
}
