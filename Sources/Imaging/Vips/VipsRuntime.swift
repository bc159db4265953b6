import CVips
import Foundation
import Synchronization

/// Process-wide libvips state. libvips keeps global settings (untrusted
/// loaders, cache, thread pool size), so they are set exactly once, on first
/// use, behind Swift's thread-safe lazy static initialisation.
enum VipsRuntime {
    private struct Startup {
        /// nil once libvips is ready; otherwise why it could not start.
        var failure: String?
        /// The HEIF module to open on the first HEIC photo; nil when libvips loaded its
        /// modules itself (an operator's VIPSHOME) or has none where it is looked for.
        var heifModule: String?
    }

    private static let startup: Startup = {
        if let failure = cvips_open() {
            return Startup(failure: "cannot open libvips (Debian's libvips42): \(String(cString: failure))")
        }
        // No libvips module is loaded at start: the others (ImageMagick, poppler,
        // OpenSlide, JPEG XL) would bring decoders for formats the product refuses into the
        // process that reads untrusted uploads, and loading them costs every photo process
        // about 17 ms. libvips finds its modules under $VIPSHOME; pointing it at a directory
        // without any keeps it from loading them, and the HEIF module is opened by hand on
        // the first HEIC photo (`heifFailure`). An operator's own VIPSHOME, or a libvips laid
        // out differently, gets the stock behaviour.
        let heifModule = getenv("VIPSHOME") == nil ? heifModulePath() : nil
        if heifModule != nil { setenv("VIPSHOME", "/nonexistent", 1) }
        // VIPS_INIT is a macro Swift cannot import; vips_init is what it calls.
        guard cvips_init("AccountLifecycle") == 0 else {
            return Startup(failure: takeError())
        }
        if heifModule != nil { unsetenv("VIPSHOME") }
        // Blocks loaders not meant for hostile input (SVG, PDF, ImageMagick,
        // …). GIF, WebP and TIFF stay "trusted", which is why Imaging also
        // insists on its own three loaders. It marks the classes there are now:
        // the HEIF ones, registered later, are not among them, and libvips does
        // not count them untrusted anyway.
        cvips_block_untrusted_set(1)
        // The operation cache keys buffer loads by blob, and photos arrive in
        // buffers that are freed and reused: caching can only return stale
        // results or pin memory across a long batch.
        cvips_cache_set_max(0)
        // Threads per image are chosen per render (`RenderThreads`); until then one.
        if getenv("VIPS_CONCURRENCY") == nil {
            cvips_concurrency_set(1)
        }
        return Startup(heifModule: heifModule)
    }()

    private static var startupFailure: String? { startup.failure }

    /// Whether the HEIF loader is registered; behind a lock, since the first HEIC photos of
    /// a batch can arrive on several threads at once.
    private static let heifReady = Mutex(false)

    /// Why HEIC photos cannot be read, or nil once they can; the first call that finds
    /// libvips without its HEIF loader opens the module.
    ///
    /// The HEIF module (libheif with its HEVC, AV1 and x265 libraries) is opened by the
    /// first HEIC photo rather than at start: a process that only ever sees JPEG and PNG,
    /// as most do, is spared about 9 ms of loading and relocating them, and their memory.
    /// Registering its loader classes while other threads run libvips is safe: GLib's type
    /// system takes its own lock, libvips builds its loader list afresh at every lookup and
    /// guards its classes' argument tables with its global lock.
    ///
    /// A failure is not remembered: the module is opened again for the next HEIC photo (a
    /// failed open registers nothing), so a worker that met a passing shortage of memory or
    /// descriptors, or a package upgrade under way, recovers without a restart. Whatever the
    /// way libvips was started, a HEIF loader class that is not there is a failure here,
    /// never a photo refused as unreadable.
    static var heifFailure: String? {
        if let failure = startup.failure { return failure }
        return heifReady.withLock { ready -> String? in
            if ready { return nil }
            if let module = startup.heifModule, let failure = cvips_load_module(module) {
                return "cannot load the libvips HEIF module \(module): \(String(cString: failure))"
            }
            guard cvips_has_type("VipsForeignLoadHeifBuffer") != 0 else {
                return "libvips has no HEIF loader: its module vips-heif.so (Debian's libvips42, with libheif1) is missing or did not load"
            }
            ready = true
            return nil
        }
    }

    /// Where libvips keeps its HEIF module: `vips-modules-<major>.<minor>` beside the
    /// libvips shared library this process opened. nil when it is not there.
    private static func heifModulePath() -> String? {
        // The loader's own record of the file it opened: reading /proc/self/maps for it
        // cost each photo process about 1 ms, with some 150 libraries mapped.
        guard let library = cvips_library_path().map({ String(cString: $0) }) else { return nil }
        let directory = (library as NSString).deletingLastPathComponent
        let module = "\(directory)/vips-modules-\(cvips_version(0)).\(cvips_version(1))/vips-heif.so"
        return FileManager.default.isReadableFile(atPath: module) ? module : nil
    }

    static func start() {
        if let startupFailure {
            fatalError("libvips failed to start: \(startupFailure)")
        }
    }

    /// Why libvips could not be opened or started, or nil once it is ready.
    static var failure: String? { startupFailure }

    /// Reads and clears the libvips error buffer. `vips_error_buffer_copy`
    /// does both under libvips' own lock, so two photos failing at once
    /// cannot clear each other's message between the read and the clear.
    static func takeError() -> String {
        guard let copy = cvips_error_buffer_copy() else { return "libvips failed without a message" }
        defer { cvips_free(copy) }
        let lines = String(cString: copy)
            .split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        return lines.isEmpty ? "libvips failed without a message" : lines.joined(separator: "; ")
    }

    /// Live libvips objects (images, operations, sources) in the process.
    static var liveObjectCount: Int {
        start()
        return cvips_live_object_count()
    }

    /// Bytes of pixel memory libvips is tracking right now.
    static var trackedMemory: Int {
        start()
        return cvips_tracked_get_mem()
    }

    /// Live pixel-buffer allocations libvips is tracking right now.
    static var trackedAllocations: Int {
        start()
        return Int(cvips_tracked_get_allocs())
    }
}

/// How many threads libvips gives the next image, from the images in flight: one that
/// has the cores to itself (a single upload, `photos normalize-file`, a job running
/// alone) uses them all, as vipsthumbnail does; in a batch, where several images are in
/// flight, each gets one thread and the batch spreads over the cores instead, where
/// per-image threads would only fight over the same ones. libvips reads the setting
/// when a render starts its thread pool, so an image already running keeps its own.
/// An operator's VIPS_CONCURRENCY wins over both.
final class RenderThreads: Sendable {
    static let shared = RenderThreads(
        cores: ProcessInfo.processInfo.activeProcessorCount, pinned: getenv("VIPS_CONCURRENCY") != nil,
        apply: { cvips_concurrency_set(Int32($0)) })

    private let inFlight = Mutex(0)
    private let cores: Int
    private let pinned: Bool
    private let apply: @Sendable (Int) -> Void

    init(cores: Int, pinned: Bool, apply: @escaping @Sendable (Int) -> Void) {
        self.cores = max(1, cores)
        self.pinned = pinned
        self.apply = apply
    }

    /// Runs one image's render with the threads the images in flight leave it.
    func render<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        inFlight.withLock { inFlight in
            inFlight += 1
            if !pinned { apply(inFlight == 1 ? cores : 1) }
        }
        defer { inFlight.withLock { $0 -= 1 } }
        return try body()
    }
}
