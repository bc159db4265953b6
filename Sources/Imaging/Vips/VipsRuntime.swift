import CVips
import Foundation

/// Process-wide libvips state. libvips keeps global settings (untrusted
/// loaders, cache, thread pool size), so they are set exactly once, on first
/// use, behind Swift's thread-safe lazy static initialisation.
enum VipsRuntime {
    /// nil once libvips is ready; otherwise why it could not start.
    private static let startupFailure: String? = {
        // VIPS_INIT is a macro Swift cannot import; vips_init is what it calls.
        guard vips_init("AccountLifecycle") == 0 else {
            return takeError()
        }
        // Blocks loaders not meant for hostile input (SVG, PDF, ImageMagick,
        // …). GIF, WebP and TIFF stay "trusted", which is why Imaging also
        // insists on its own three loaders.
        vips_block_untrusted_set(1)
        // The operation cache keys buffer loads by blob, and photos arrive in
        // buffers that are freed and reused: caching can only return stale
        // results or pin memory across a long batch.
        vips_cache_set_max(0)
        // One worker thread per image: a batch normalises several photos at
        // once, and per-image threads would only fight over the same cores.
        // An operator's VIPS_CONCURRENCY still wins.
        if getenv("VIPS_CONCURRENCY") == nil {
            vips_concurrency_set(1)
        }
        return nil
    }()

    static func start() {
        if let startupFailure {
            fatalError("libvips failed to start: \(startupFailure)")
        }
    }

    /// Reads and clears the libvips error buffer. `vips_error_buffer_copy`
    /// does both under libvips' own lock, so two photos failing at once
    /// cannot clear each other's message between the read and the clear.
    static func takeError() -> String {
        guard let copy = vips_error_buffer_copy() else { return "libvips failed without a message" }
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
        return vips_tracked_get_mem()
    }

    /// Live pixel-buffer allocations libvips is tracking right now.
    static var trackedAllocations: Int {
        start()
        return Int(vips_tracked_get_allocs())
    }
}
